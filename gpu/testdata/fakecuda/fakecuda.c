/*
 * fakecuda.c: a stand-in for libcuda.so.1, for testing package gpu on machines without a GPU.
 *
 * It exports the driver entry points the binding uses, with the CUDA driver API's C
 * signatures, and implements them on the host: device memory is malloc'd host memory (a
 * CUdeviceptr is the host address), copies are memcpy, and cuLaunchKernel runs the kernels'
 * per-thread bodies (resize_body.h, the same code the PTX is compiled from) over the launch
 * grid. It also checks the rules a real driver enforces less visibly:
 *   - every call after cuCtxCreate must come from the thread that created the context
 *     (else CUDA_ERROR_INVALID_CONTEXT), since package gpu promises one owner thread;
 *   - cuLaunchKernel's kernelParams must hold the launcher's arguments (the job table must be
 *     readable memory, layout and esize in range);
 *   - a context destroyed with device or pinned memory still allocated reports
 *     CUDA_ERROR_UNKNOWN, so the tests catch leaks;
 *   - an event reports CUDA_ERROR_NOT_READY to its first two queries, exercising the
 *     polling path.
 * cuModuleLoadDataEx accepts PTX holding both packer entry points and otherwise fails with
 * CUDA_ERROR_INVALID_PTX and a message in the JIT error log buffer.
 *
 * Built by the tests: cc -shared -fPIC -I gpu/kernels -o libfakecuda.so fakecuda.c
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resize_body.h"

typedef int CUresult;

static pthread_t owner;
static int have_ctx;
static long live_dev, live_host;
static int event_pending[64];
static int next_event = 1, next_stream = 1;

#define OWNER_ONLY()                                            \
	do {                                                    \
		if (!have_ctx || !pthread_equal(owner, pthread_self())) \
			return 201; /* CUDA_ERROR_INVALID_CONTEXT */ \
	} while (0)

CUresult cuInit(unsigned flags) { return flags == 0 ? 0 : 1; }
CUresult cuDriverGetVersion(int *v) { *v = 12040; return 0; }
CUresult cuGetErrorName(CUresult r, const char **s)
{
	if (r == 4242) {
		*s = "CUDA_ERROR_FAKE_4242";
		return 0;
	}
	return 1;
}
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int ordinal)
{
	if (ordinal != 0)
		return 101;
	*d = 0;
	return 0;
}
CUresult cuDeviceGetName(char *name, int len, int dev)
{
	snprintf(name, len, "Fake CUDA Device %d", dev);
	return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
	switch (attr) {
	case 75: *v = 9; break;    /* compute capability major */
	case 76: *v = 0; break;    /* minor */
	case 16: *v = 132; break;  /* SMs */
	case 36: *v = 2619000; break;
	case 37: *v = 5120; break;
	default: *v = 0;
	}
	return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *b, int dev) { *b = (size_t)80 << 30; return 0; }

CUresult cuCtxCreate_v2(void **ctx, unsigned flags, int dev)
{
	if (have_ctx)
		return 216; /* the fake supports one context */
	owner = pthread_self();
	have_ctx = 1;
	*ctx = (void *)0x1;
	return 0;
}
CUresult cuCtxDestroy_v2(void *ctx)
{
	OWNER_ONLY();
	have_ctx = 0;
	if (live_dev || live_host) {
		fprintf(stderr, "fakecuda: context destroyed with %ld device and %ld pinned allocations live\n", live_dev, live_host);
		live_dev = live_host = 0;
		return 999;
	}
	return 0;
}
CUresult cuCtxSynchronize(void) { OWNER_ONLY(); return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { OWNER_ONLY(); *f = (size_t)79 << 30; *t = (size_t)80 << 30; return 0; }

CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned n, int *opts, void **vals)
{
	OWNER_ONLY();
	char *errlog = NULL;
	size_t errsize = 0;
	for (unsigned i = 0; i < n; i++) {
		if (opts[i] == 5)
			errlog = vals[i];
		if (opts[i] == 6)
			errsize = (size_t)(uintptr_t)vals[i];
	}
	if (!strstr(image, ".entry packer_hpass") || !strstr(image, ".entry packer_vpass")) {
		if (errlog && errsize)
			snprintf(errlog, errsize, "fake ptxas fatal: no packer entry points in the module");
		return 218; /* CUDA_ERROR_INVALID_PTX */
	}
	*mod = (void *)0x2;
	return 0;
}
CUresult cuModuleUnload(void *mod) { OWNER_ONLY(); return 0; }
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name)
{
	OWNER_ONLY();
	if (strcmp(name, "packer_hpass") == 0)
		*fn = (void *)1;
	else if (strcmp(name, "packer_vpass") == 0)
		*fn = (void *)2;
	else
		return 500;
	return 0;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			unsigned shared, void *stream, void **params, void **extra)
{
	OWNER_ONLY();
	if (gz != 1 || by != 1 || bz != 1 || shared != 0 || extra != NULL || params == NULL)
		return 1;
	pk_thread t;
	t.bdx = bx;
	if ((uintptr_t)f == 1) {
		const pk_i32 *jobs = *(const pk_i32 **)params[0];
		const pk_u8 *src = *(const pk_u8 **)params[1];
		const pk_i32 *wts = *(const pk_i32 **)params[2];
		pk_u8 *mid = *(pk_u8 **)params[3];
		for (t.by = 0; t.by < gy; t.by++)
			for (t.bx = 0; t.bx < gx; t.bx++)
				for (t.tx = 0; t.tx < bx; t.tx++)
					pk_hpass(t, jobs, src, wts, mid);
		return 0;
	}
	if ((uintptr_t)f == 2) {
		const pk_i32 *jobs = *(const pk_i32 **)params[0];
		const pk_u8 *mid = *(const pk_u8 **)params[1];
		const pk_i32 *wts = *(const pk_i32 **)params[2];
		const pk_u32 *lut = *(const pk_u32 **)params[3];
		pk_u8 *dst = *(pk_u8 **)params[4];
		pk_i32 layout = *(const pk_i32 *)params[5];
		pk_i32 esize = *(const pk_i32 *)params[6];
		if (layout < 0 || layout > 1 || (esize != 1 && esize != 2 && esize != 4))
			return 1;
		for (t.by = 0; t.by < gy; t.by++)
			for (t.bx = 0; t.bx < gx; t.bx++)
				for (t.tx = 0; t.tx < bx; t.tx++)
					pk_vpass(t, jobs, mid, wts, lut, dst, layout, esize);
		return 0;
	}
	return 400;
}

CUresult cuMemAlloc_v2(uint64_t *p, size_t n)
{
	OWNER_ONLY();
	void *m = malloc(n);
	if (!m)
		return 2;
	memset(m, 0xA5, n); /* device memory is not zeroed */
	live_dev++;
	*p = (uint64_t)(uintptr_t)m;
	return 0;
}
CUresult cuMemFree_v2(uint64_t p)
{
	OWNER_ONLY();
	if (p) {
		free((void *)(uintptr_t)p);
		live_dev--;
	}
	return 0;
}
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) { OWNER_ONLY(); memcpy((void *)(uintptr_t)dst, src, n); return 0; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t n, void *s) { OWNER_ONLY(); memcpy((void *)(uintptr_t)dst, src, n); return 0; }
CUresult cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t n, void *s) { OWNER_ONLY(); memcpy(dst, (void *)(uintptr_t)src, n); return 0; }

CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
	OWNER_ONLY();
	void *m = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
	if (!m)
		return 2;
	live_host++;
	*p = m;
	return 0;
}
CUresult cuMemFreeHost(void *p)
{
	OWNER_ONLY();
	free(p);
	live_host--;
	return 0;
}
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) { OWNER_ONLY(); return p && n ? 0 : 1; }
CUresult cuMemHostUnregister(void *p) { OWNER_ONLY(); return 0; }

CUresult cuStreamCreate(void **s, unsigned flags) { OWNER_ONLY(); *s = (void *)(uintptr_t)(next_stream++); return 0; }
CUresult cuStreamDestroy_v2(void *s) { OWNER_ONLY(); return 0; }
CUresult cuStreamSynchronize(void *s) { OWNER_ONLY(); return 0; }
CUresult cuEventCreate(void **e, unsigned flags)
{
	OWNER_ONLY();
	if (next_event >= 64)
		return 2;
	*e = (void *)(uintptr_t)(next_event++);
	return 0;
}
CUresult cuEventDestroy_v2(void *e) { OWNER_ONLY(); return 0; }
CUresult cuEventRecord(void *e, void *s)
{
	OWNER_ONLY();
	event_pending[(uintptr_t)e % 64] = 2;
	return 0;
}
CUresult cuEventQuery(void *e)
{
	OWNER_ONLY();
	int *p = &event_pending[(uintptr_t)e % 64];
	if (*p > 0) {
		(*p)--;
		return 600; /* CUDA_ERROR_NOT_READY */
	}
	return 0;
}
CUresult cuEventSynchronize(void *e) { OWNER_ONLY(); event_pending[(uintptr_t)e % 64] = 0; return 0; }
CUresult cuEventElapsedTime(float *ms, void *a, void *b) { OWNER_ONLY(); *ms = 0.5f; return 0; }
