/*
 * resize.cu: packer's GPU resize kernels. The work is in resize_body.h, shared with the CPU
 * harness; these entry points only turn CUDA's built-in coordinates into a pk_thread.
 *
 * Compiled to PTX by scripts/build-ptx.sh with clang-14 alone (-nocudainc -nocudalib: no CUDA
 * toolkit), so the few CUDA declarations needed are spelled out here. The kernels use integer
 * arithmetic only; there is no floating point to contract into FMAs (the script still passes
 * -ffp-contract=off so that a future float operation would round like the host's).
 *
 * Entry points (their .param lists are checked against gpu/launch.go by TestPTXParams):
 *   packer_hpass(jobs, src, wts, mid)
 *   packer_vpass(jobs, mid, wts, lut, dst, layout, esize)
 */
#include "__clang_cuda_builtin_vars.h"
#include "resize_body.h"

#define PK_GLOBAL extern "C" __attribute__((global))

__attribute__((device)) static inline pk_thread pk_this_thread(void)
{
	pk_thread t;
	t.bx = blockIdx.x;
	t.by = blockIdx.y;
	t.bdx = blockDim.x;
	t.tx = threadIdx.x;
	return t;
}

PK_GLOBAL void packer_hpass(const pk_i32 *__restrict__ jobs, const pk_u8 *__restrict__ src,
			    const pk_i32 *__restrict__ wts, pk_u8 *__restrict__ mid)
{
	pk_hpass(pk_this_thread(), jobs, src, wts, mid);
}

PK_GLOBAL void packer_vpass(const pk_i32 *__restrict__ jobs, const pk_u8 *__restrict__ mid,
			    const pk_i32 *__restrict__ wts, const pk_u32 *__restrict__ lut,
			    pk_u8 *__restrict__ dst, pk_i32 layout, pk_i32 esize)
{
	pk_vpass(pk_this_thread(), jobs, mid, wts, lut, dst, layout, esize);
}
