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
 *   - work is asynchronous: each stream runs its queue on a thread of its own, after a short
 *     delay per operation, so an event is NOT_READY until its stream gets there and a copy
 *     reads its source when it runs; the legacy default stream (0) waits for every other;
 *   - fresh device and pinned memory is filled with garbage, and freed device and pinned
 *     memory is poisoned before it is released;
 *   - staging is scribbled over, stricter than a driver: after each wait that sees a stream's
 *     work complete (cuEventQuery returning success, cuEventSynchronize, cuStreamSynchronize,
 *     cuCtxSynchronize), both ends of every finished asynchronous upload from write-combined
 *     pinned memory (the host's upload staging) and the device source of every finished copy
 *     back are overwritten, so a batch that relies on an earlier batch's staged or device
 *     bytes gets garbage; and the host destination of a copy back is overwritten when the copy
 *     is enqueued, so reading a record before waiting for it gets garbage;
 *   - fakecuda_fail (found through dlsym) makes a chosen call of an entry point fail.
 * cuModuleLoadDataEx accepts PTX holding both packer entry points and otherwise fails with
 * CUDA_ERROR_INVALID_PTX and a message in the JIT error log buffer.
 *
 * Built by the tests: cc -shared -fPIC -I gpu/kernels -o libfakecuda.so fakecuda.c
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "resize_body.h"

typedef int CUresult;

static pthread_t owner;
static int have_ctx;
static int cc_major = 9, cc_minor = 0, no_jit, loaded_kind = -1; /* see fakecuda_set_device */
static long live_dev, live_host;
static int event_pending[64], event_live[64];
static uintptr_t event_stream[64]; /* the stream each event was last recorded on */

#define OWNER_ONLY()                                            \
	do {                                                    \
		if (!have_ctx || !pthread_equal(owner, pthread_self())) \
			return 201; /* CUDA_ERROR_INVALID_CONTEXT */ \
	} while (0)

static int inject(const char *call); /* fakecuda_fail; counts the call for fakecuda_calls */
static void stop_streams(void);      /* the streams' threads, for cuCtxDestroy */
static int is_write_combined(const void *p, size_t n);
#define INJECT(name)                          \
	do {                                  \
		int r_ = inject(name);        \
		if (r_)                       \
			return r_;            \
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
CUresult cuGetErrorString(CUresult r, const char **s)
{
	if (r == 4242) {
		*s = "the fake's own failure";
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
	if (attr == 16 || attr == 36 || attr == 37)
		INJECT("cuDeviceGetAttribute(cosmetic)");
	switch (attr) {
	case 75: *v = cc_major; break; /* compute capability major */
	case 76: *v = cc_minor; break; /* minor */
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
	stop_streams();
	have_ctx = 0;
	if (live_dev || live_host) {
		fprintf(stderr, "fakecuda: context destroyed with %ld device and %ld pinned allocations live\n", live_dev, live_host);
		live_dev = live_host = 0;
		return 999;
	}
	return 0;
}
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { OWNER_ONLY(); *f = (size_t)79 << 30; *t = (size_t)80 << 30; return 0; }


/* fakecuda_set_device sets the compute capability the fake reports and whether its "driver"
 * can JIT-compile PTX; fakecuda_loaded says what the last module loaded was: 1 a cubin
 * (ELF), 0 PTX, -1 none. */
void fakecuda_set_device(int major, int minor, int jit)
{
	cc_major = major;
	cc_minor = minor;
	no_jit = !jit;
}
int fakecuda_loaded(void) { return loaded_kind; }

static int has(const void *image, size_t n, const char *s)
{
	size_t k = strlen(s);
	for (size_t i = 0; i + k <= n; i++)
		if (memcmp((const char *)image + i, s, k) == 0)
			return 1;
	return 0;
}

CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned n, int *opts, void **vals)
{
	OWNER_ONLY();
	INJECT("cuModuleLoadDataEx");
	if (memcmp(image, "\x7f" "ELF", 4) == 0) {
		/* A cubin: the fake takes the size from the ELF section headers' end. */
		const unsigned char *e = image;
		uint64_t shoff;
		uint16_t shentsize, shnum;
		memcpy(&shoff, e + 0x28, 8);
		memcpy(&shentsize, e + 0x3A, 2);
		memcpy(&shnum, e + 0x3C, 2);
		size_t size = shoff + (size_t)shentsize * shnum;
		if (size > (1 << 24) || !has(image, size, "packer_hpass") || !has(image, size, "packer_vpass"))
			return 200; /* CUDA_ERROR_INVALID_IMAGE */
		loaded_kind = 1;
		*mod = (void *)0x2;
		return 0;
	}
	if (no_jit)
		return 221; /* CUDA_ERROR_JIT_COMPILER_NOT_FOUND */
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
	loaded_kind = 0;
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

/* ---- asynchronous streams ----
 * Each stream created by cuStreamCreate has a worker thread that runs its queue in order,
 * after a short delay per operation, so copies and kernels really complete after the call
 * that enqueued them returns. A copy reads its source when it runs, not when enqueued: a
 * host buffer rewritten before its stream got there sends the new bytes, as on a device.
 * Stream 0 (the legacy default stream) runs synchronously after every other stream drains. */
enum { OP_COPY, OP_HPASS, OP_VPASS, OP_EVENT };
enum { COPY_H2D_STAGED = 1, COPY_D2H = 2 }; /* op.copy: which ends become dead once the copy ran */
struct span {
	void *p;
	size_t n;
	struct span *next;
};
struct op {
	int kind, copy;
	void *dst;
	const void *src;
	size_t n;
	unsigned gx, gy, bx;
	void *p[5];
	int layout, esize, event;
	struct op *next;
};
struct stream {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct op *head, *tail;
	int busy, quit;
	struct span *dead; /* buffers of finished copies, scribbled at the next wait */
};
#define MAX_STREAMS 64
static struct stream *streams[MAX_STREAMS];
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;

static void take_dead(struct stream *s, int event);

/* run_op runs o; s is its stream (NULL for the legacy default stream). */
static void run_op(struct op *o, struct stream *s)
{
	pk_thread t;
	switch (o->kind) {
	case OP_COPY:
		memcpy(o->dst, o->src, o->n);
		break;
	case OP_HPASS:
		t.bdx = o->bx;
		for (t.by = 0; t.by < o->gy; t.by++)
			for (t.bx = 0; t.bx < o->gx; t.bx++)
				for (t.tx = 0; t.tx < o->bx; t.tx++)
					pk_hpass(t, o->p[0], o->p[1], o->p[2], o->p[3]);
		break;
	case OP_VPASS:
		t.bdx = o->bx;
		for (t.by = 0; t.by < o->gy; t.by++)
			for (t.bx = 0; t.bx < o->gx; t.bx++)
				for (t.tx = 0; t.tx < o->bx; t.tx++)
					pk_vpass(t, o->p[0], o->p[1], o->p[2], o->p[3], o->p[4], o->layout, o->esize);
		break;
	case OP_EVENT:
		/* The stream's finished copies so far become the event's: a wait that sees the event
		 * complete scribbles over them (and nothing enqueued after it). */
		if (s)
			take_dead(s, o->event);
		pthread_mutex_lock(&ev_mu);
		event_pending[o->event] = 0;
		pthread_cond_broadcast(&ev_cv);
		pthread_mutex_unlock(&ev_mu);
		break;
	}
}

/* note_dead records the buffers of a finished copy that no correct program reads again
 * without rewriting them: both ends of an upload from staging, the device source of a copy
 * back. Called by the stream's thread with s->mu held. */
static void add_dead(struct stream *s, void *p, size_t n)
{
	struct span *d = malloc(sizeof *d);
	if (!d)
		return;
	d->p = p;
	d->n = n;
	d->next = s->dead;
	s->dead = d;
}
static void note_dead(struct stream *s, struct op *o)
{
	if (o->copy == COPY_H2D_STAGED) {
		add_dead(s, (void *)o->src, o->n);
		add_dead(s, o->dst, o->n);
	} else if (o->copy == COPY_D2H) {
		add_dead(s, (void *)o->src, o->n);
	}
}

static long scribbles; /* bytes scribbled over, for fakecuda_scribbled */
static struct span *event_dead[64]; /* under ev_mu: the finished copies before each event */

static void free_spans(struct span *d)
{
	while (d) {
		struct span *next = d->next;
		free(d);
		d = next;
	}
}

/* drop_event forgets event ev's spans without scribbling (re-recorded or destroyed: they may
 * be live again by the time anyone waits). */
static void drop_event(int ev)
{
	pthread_mutex_lock(&ev_mu);
	struct span *d = event_dead[ev];
	event_dead[ev] = NULL;
	pthread_mutex_unlock(&ev_mu);
	free_spans(d);
}

static void scribble_spans(struct span *d)
{
	while (d) {
		struct span *next = d->next;
		memset(d->p, 0xD9, d->n);
		__atomic_add_fetch(&scribbles, (long)d->n, __ATOMIC_RELAXED);
		free(d);
		d = next;
	}
}

/* take_dead moves stream s's dead spans to event ev's list. Runs on s's thread. */
static void take_dead(struct stream *s, int ev)
{
	pthread_mutex_lock(&s->mu);
	struct span *d = s->dead;
	s->dead = NULL;
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_lock(&ev_mu);
	while (d) {
		struct span *next = d->next;
		d->next = event_dead[ev];
		event_dead[ev] = d;
		d = next;
	}
	pthread_mutex_unlock(&ev_mu);
}

/* scribble_event overwrites the dead spans of event ev, which a wait has seen complete. */
static void scribble_event(int ev)
{
	pthread_mutex_lock(&ev_mu);
	struct span *d = event_dead[ev];
	event_dead[ev] = NULL;
	pthread_mutex_unlock(&ev_mu);
	scribble_spans(d);
}

/* scribble overwrites the dead spans of an idle stream (all of its work is finished), its
 * events' included. */
static void scribble(struct stream *s, uintptr_t sh)
{
	pthread_mutex_lock(&s->mu);
	struct span *d = s->dead;
	s->dead = NULL;
	pthread_mutex_unlock(&s->mu);
	scribble_spans(d);
	for (int i = 0; i < 64; i++) {
		pthread_mutex_lock(&ev_mu);
		int mine = event_stream[i] == sh && event_dead[i];
		pthread_mutex_unlock(&ev_mu);
		if (mine)
			scribble_event(i);
	}
}

/* forget_dead drops the dead spans inside [p, p+n): the memory is being freed. */
static void forget_dead(const void *p, size_t n);

/* fakecuda_scribbled counts the bytes scribbled over after waits. */
long fakecuda_scribbled(void) { return __atomic_load_n(&scribbles, __ATOMIC_RELAXED); }

static void *stream_main(void *arg)
{
	struct stream *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->head && !s->quit)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->head)
			break;
		struct op *o = s->head;
		s->busy = 1;
		pthread_mutex_unlock(&s->mu);
		usleep(200); /* the device takes its time */
		run_op(o, s);
		pthread_mutex_lock(&s->mu);
		if (o->kind == OP_COPY && o->copy)
			note_dead(s, o);
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		s->busy = 0;
		free(o);
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void drain(struct stream *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->head)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

static void drain_all(void)
{
	for (int i = 0; i < MAX_STREAMS; i++)
		if (streams[i])
			drain(streams[i]);
}

static void scribble_all(void)
{
	for (int i = 0; i < MAX_STREAMS; i++)
		if (streams[i])
			scribble(streams[i], (uintptr_t)i);
}

static void drop_overlapping(struct span **pp, const char *lo, const char *hi)
{
	while (*pp) {
		struct span *d = *pp;
		if ((const char *)d->p < hi && (const char *)d->p + d->n > lo) {
			*pp = d->next;
			free(d);
		} else {
			pp = &d->next;
		}
	}
}

static void forget_dead(const void *p, size_t n)
{
	const char *lo = p, *hi = lo + n;
	for (int i = 0; i < MAX_STREAMS; i++) {
		struct stream *s = streams[i];
		if (!s)
			continue;
		pthread_mutex_lock(&s->mu);
		drop_overlapping(&s->dead, lo, hi);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_lock(&ev_mu);
	for (int i = 0; i < 64; i++)
		drop_overlapping(&event_dead[i], lo, hi);
	pthread_mutex_unlock(&ev_mu);
}

static void destroy_stream_state(struct stream *s)
{
	free_spans(s->dead);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

/* stop_streams ends every stream's thread (after its queue) and forgets the streams and
 * events, as destroying the context does. */
static void stop_streams(void)
{
	for (int i = 0; i < MAX_STREAMS; i++) {
		struct stream *s = streams[i];
		if (!s)
			continue;
		pthread_mutex_lock(&s->mu);
		s->quit = 1;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
		streams[i] = NULL;
		destroy_stream_state(s);
	}
	for (int i = 0; i < 64; i++)
		drop_event(i);
	pthread_mutex_lock(&ev_mu);
	memset(event_live, 0, sizeof event_live);
	memset(event_pending, 0, sizeof event_pending);
	pthread_mutex_unlock(&ev_mu);
}

/* max_busy is the most streams seen with work queued at once (fakecuda_max_busy). */
static int max_busy;

static void note_busy(void)
{
	int n = 0;
	for (int i = 0; i < MAX_STREAMS; i++) {
		struct stream *s = streams[i];
		if (!s)
			continue;
		pthread_mutex_lock(&s->mu);
		n += s->head != NULL;
		pthread_mutex_unlock(&s->mu);
	}
	if (n > __atomic_load_n(&max_busy, __ATOMIC_RELAXED))
		__atomic_store_n(&max_busy, n, __ATOMIC_RELAXED);
}

/* fakecuda_max_busy returns the most streams that had work queued at the same time since the
 * last call, and starts counting again. */
int fakecuda_max_busy(void) { return __atomic_exchange_n(&max_busy, 0, __ATOMIC_RELAXED); }

/* enqueue hands o to stream s, or runs it now on the legacy default stream. */
static CUresult enqueue(void *sh, struct op *o)
{
	uintptr_t i = (uintptr_t)sh;
	if (i == 0) {
		drain_all();
		run_op(o, NULL);
		free(o);
		return 0;
	}
	if (i >= MAX_STREAMS || !streams[i]) {
		free(o);
		return 400; /* CUDA_ERROR_INVALID_HANDLE */
	}
	struct stream *s = streams[i];
	pthread_mutex_lock(&s->mu);
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	note_busy();
	return 0;
}

/* ---- failure injection ----
 * fakecuda_fail makes the nth next call (1 = the next) of the named entry point return code
 * without doing anything. Tests reach it through dlsym. */
#define MAX_FAILS 4
static struct {
	char call[64];
	int nth, code;
} fails[MAX_FAILS];

/* fakecuda_fail arms a failure; an empty call disarms them all. Up to MAX_FAILS at once. */
void fakecuda_fail(const char *call, int nth, int code)
{
	if (!call || !*call) {
		memset(fails, 0, sizeof fails);
		return;
	}
	for (int i = 0; i < MAX_FAILS; i++)
		if (fails[i].nth <= 0) {
			snprintf(fails[i].call, sizeof fails[i].call, "%s", call);
			fails[i].nth = nth;
			fails[i].code = code;
			return;
		}
}

/* fakecuda_queued counts the operations enqueued on streams and not yet finished. */
int fakecuda_queued(void)
{
	int n = 0;
	for (int i = 0; i < MAX_STREAMS; i++) {
		struct stream *s = streams[i];
		if (!s)
			continue;
		pthread_mutex_lock(&s->mu);
		for (struct op *o = s->head; o; o = o->next)
			n++;
		pthread_mutex_unlock(&s->mu);
	}
	return n;
}

/* Calls per entry point, for fakecuda_calls (only those that go through INJECT). */
#define MAX_COUNTED 48
static struct {
	const char *call;
	long n;
} counted[MAX_COUNTED];
static pthread_mutex_t count_mu = PTHREAD_MUTEX_INITIALIZER;

long fakecuda_calls(const char *call)
{
	long n = 0;
	pthread_mutex_lock(&count_mu);
	for (int i = 0; i < MAX_COUNTED && counted[i].call; i++)
		if (strcmp(counted[i].call, call) == 0)
			n = counted[i].n;
	pthread_mutex_unlock(&count_mu);
	return n;
}

static int inject(const char *call)
{
	pthread_mutex_lock(&count_mu);
	for (int i = 0; i < MAX_COUNTED; i++)
		if (!counted[i].call || strcmp(counted[i].call, call) == 0) {
			counted[i].call = call;
			counted[i].n++;
			break;
		}
	pthread_mutex_unlock(&count_mu);
	for (int i = 0; i < MAX_FAILS; i++)
		if (fails[i].nth > 0 && strcmp(call, fails[i].call) == 0 && --fails[i].nth == 0)
			return fails[i].code;
	return 0;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			unsigned shared, void *stream, void **params, void **extra)
{
	OWNER_ONLY();
	INJECT("cuLaunchKernel");
	if (gz != 1 || by != 1 || bz != 1 || shared != 0 || extra != NULL || params == NULL)
		return 1;
	struct op *o = calloc(1, sizeof *o);
	if (!o)
		return 2;
	o->gx = gx;
	o->gy = gy;
	o->bx = bx;
	if ((uintptr_t)f == 1) {
		o->kind = OP_HPASS;
		for (int i = 0; i < 4; i++)
			o->p[i] = *(void **)params[i];
		return enqueue(stream, o);
	}
	if ((uintptr_t)f == 2) {
		o->kind = OP_VPASS;
		for (int i = 0; i < 5; i++)
			o->p[i] = *(void **)params[i];
		o->layout = *(const pk_i32 *)params[5];
		o->esize = *(const pk_i32 *)params[6];
		if (o->layout < 0 || o->layout > 1 || (o->esize != 1 && o->esize != 2 && o->esize != 4)) {
			free(o);
			return 1;
		}
		return enqueue(stream, o);
	}
	free(o);
	return 400;
}

CUresult cuMemAlloc_v2(uint64_t *p, size_t n)
{
	OWNER_ONLY();
	INJECT("cuMemAlloc_v2");
	void *m = malloc(n + sizeof(size_t));
	if (!m)
		return 2;
	*(size_t *)m = n;
	m = (char *)m + sizeof(size_t);
	memset(m, 0xA5, n); /* device memory is not zeroed */
	live_dev++;
	*p = (uint64_t)(uintptr_t)m;
	return 0;
}
CUresult cuMemFree_v2(uint64_t p)
{
	OWNER_ONLY();
	if (p) {
		/* The driver frees device memory only when the work using it is done; so does this. */
		drain_all();
		char *m = (char *)(uintptr_t)p - sizeof(size_t);
		forget_dead(m + sizeof(size_t), *(size_t *)m);
		memset(m + sizeof(size_t), 0x5A, *(size_t *)m); /* poison: a later read sees garbage */
		free(m);
		live_dev--;
	}
	return 0;
}
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n)
{
	OWNER_ONLY();
	INJECT("cuMemcpyHtoD_v2");
	drain_all();
	memcpy((void *)(uintptr_t)dst, src, n);
	return 0;
}
static CUresult copy_async(void *dst, const void *src, size_t n, void *s, int copy)
{
	struct op *o = calloc(1, sizeof *o);
	if (!o)
		return 2;
	o->kind = OP_COPY;
	o->copy = copy;
	o->dst = dst;
	o->src = src;
	o->n = n;
	return enqueue(s, o);
}
CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t n, void *s)
{
	OWNER_ONLY();
	INJECT("cuMemcpyHtoDAsync_v2");
	return copy_async((void *)(uintptr_t)dst, src, n, s, is_write_combined(src, n) ? COPY_H2D_STAGED : 0);
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t n, void *s)
{
	OWNER_ONLY();
	INJECT("cuMemcpyDtoHAsync_v2");
	/* Until the copy runs, the destination holds nothing a reader may use. */
	memset(dst, 0xE7, n);
	return copy_async(dst, (const void *)(uintptr_t)src, n, s, COPY_D2H);
}

/* Write-combined pinned allocations (CU_MEMHOSTALLOC_WRITECOMBINED): the host's upload
 * staging, whose uploads' ends are scribbled over after waits. */
#define MAX_WC 256
static struct {
	char *p;
	size_t n;
} wc[MAX_WC];
static pthread_mutex_t wc_mu = PTHREAD_MUTEX_INITIALIZER;

static int is_write_combined(const void *p, size_t n)
{
	const char *c = p;
	int r = 0;
	pthread_mutex_lock(&wc_mu);
	for (int i = 0; i < MAX_WC; i++)
		if (wc[i].p && c >= wc[i].p && c + n <= wc[i].p + wc[i].n)
			r = 1;
	pthread_mutex_unlock(&wc_mu);
	return r;
}

/* fakecuda_write_combined reports whether [p, p+n) lies in one write-combined pinned
 * allocation (for the tests of frames staged in pinned memory). */
int fakecuda_write_combined(const void *p, size_t n) { return is_write_combined(p, n); }

CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
	OWNER_ONLY();
	INJECT("cuMemHostAlloc");
	size_t sz = (n + 4095) & ~(size_t)4095;
	void *m = aligned_alloc(4096, sz);
	if (!m)
		return 2;
	memset(m, 0xC3, sz); /* pinned memory is not zeroed either */
	if (flags & 0x04) {
		int i;
		pthread_mutex_lock(&wc_mu);
		for (i = 0; i < MAX_WC && wc[i].p; i++)
			;
		if (i < MAX_WC) {
			wc[i].p = m;
			wc[i].n = sz;
		}
		pthread_mutex_unlock(&wc_mu);
		if (i == MAX_WC) {
			free(m);
			return 2;
		}
	}
	live_host++;
	*p = m;
	return 0;
}
CUresult cuMemFreeHost(void *p)
{
	OWNER_ONLY();
	drain_all(); /* the driver waits for copies from or to the buffer */
	if (p) {
		forget_dead(p, malloc_usable_size(p));
		pthread_mutex_lock(&wc_mu);
		for (int i = 0; i < MAX_WC; i++)
			if (wc[i].p == p)
				wc[i].p = NULL;
		pthread_mutex_unlock(&wc_mu);
		memset(p, 0x5A, malloc_usable_size(p)); /* poison: a later read sees garbage */
	}
	free(p);
	live_host--;
	return 0;
}
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) { OWNER_ONLY(); return p && n ? 0 : 1; }
CUresult cuMemHostUnregister(void *p) { OWNER_ONLY(); return 0; }

CUresult cuStreamCreate(void **sp, unsigned flags)
{
	OWNER_ONLY();
	INJECT("cuStreamCreate");
	int i = 1; /* handles of destroyed streams are reused */
	while (i < MAX_STREAMS && streams[i])
		i++;
	if (i >= MAX_STREAMS)
		return 2;
	struct stream *s = calloc(1, sizeof *s);
	if (!s)
		return 2;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
		free(s);
		return 2;
	}
	streams[i] = s;
	*sp = (void *)(uintptr_t)i;
	return 0;
}
CUresult cuStreamDestroy_v2(void *sh)
{
	OWNER_ONLY();
	uintptr_t i = (uintptr_t)sh;
	if (i == 0 || i >= MAX_STREAMS || !streams[i])
		return 400;
	struct stream *s = streams[i];
	pthread_mutex_lock(&s->mu);
	s->quit = 1; /* the worker finishes the queue first, as the driver does */
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	streams[i] = NULL;
	destroy_stream_state(s);
	return 0;
}
CUresult cuStreamSynchronize(void *sh)
{
	OWNER_ONLY();
	INJECT("cuStreamSynchronize");
	uintptr_t i = (uintptr_t)sh;
	if (i == 0) {
		drain_all();
		scribble_all();
		return 0;
	}
	if (i >= MAX_STREAMS || !streams[i])
		return 400;
	drain(streams[i]);
	scribble(streams[i], i);
	return 0;
}
CUresult cuCtxSynchronize(void)
{
	OWNER_ONLY();
	INJECT("cuCtxSynchronize");
	drain_all();
	scribble_all();
	return 0;
}
CUresult cuEventCreate(void **e, unsigned flags)
{
	OWNER_ONLY();
	INJECT("cuEventCreate");
	int i = 1; /* handles of destroyed events are reused */
	while (i < 64 && event_live[i])
		i++;
	if (i >= 64)
		return 2;
	event_live[i] = 1;
	*e = (void *)(uintptr_t)i;
	return 0;
}
CUresult cuEventDestroy_v2(void *e)
{
	OWNER_ONLY();
	uintptr_t i = (uintptr_t)e;
	if (i == 0 || i >= 64 || !event_live[i])
		return 400;
	drop_event((int)i);
	event_live[i] = 0;
	return 0;
}
CUresult cuEventRecord(void *e, void *s)
{
	OWNER_ONLY();
	INJECT("cuEventRecord");
	int i = (int)((uintptr_t)e % 64);
	struct op *o = calloc(1, sizeof *o);
	if (!o)
		return 2;
	o->kind = OP_EVENT;
	o->event = i;
	drop_event(i);
	pthread_mutex_lock(&ev_mu);
	event_pending[i] = 1;
	event_stream[i] = (uintptr_t)s;
	pthread_mutex_unlock(&ev_mu);
	return enqueue(s, o);
}
CUresult cuEventQuery(void *e)
{
	OWNER_ONLY();
	INJECT("cuEventQuery");
	pthread_mutex_lock(&ev_mu);
	int p = event_pending[(uintptr_t)e % 64];
	pthread_mutex_unlock(&ev_mu);
	if (p)
		return 600; /* CUDA_ERROR_NOT_READY */
	scribble_event((int)((uintptr_t)e % 64));
	return 0;
}
CUresult cuEventSynchronize(void *e)
{
	OWNER_ONLY();
	INJECT("cuEventSynchronize");
	pthread_mutex_lock(&ev_mu);
	while (event_pending[(uintptr_t)e % 64])
		pthread_cond_wait(&ev_cv, &ev_mu);
	pthread_mutex_unlock(&ev_mu);
	scribble_event((int)((uintptr_t)e % 64));
	return 0;
}
CUresult cuEventElapsedTime(float *ms, void *a, void *b) { OWNER_ONLY(); *ms = 0.5f; return 0; }
