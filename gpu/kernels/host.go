//go:build cgo

package kernels

/*
#cgo CFLAGS: -O2
#include "resize_body.h"

static void run_hpass(pk_u32 gx, pk_u32 gy, pk_u32 bd, const pk_i32 *jobs, const pk_u8 *src, const pk_i32 *wts, pk_u8 *mid)
{
	pk_thread t;
	t.bdx = bd;
	for (t.by = 0; t.by < gy; t.by++)
		for (t.bx = 0; t.bx < gx; t.bx++)
			for (t.tx = 0; t.tx < bd; t.tx++)
				pk_hpass(t, jobs, src, wts, mid);
}

static void run_vpass(pk_u32 gx, pk_u32 gy, pk_u32 bd, const pk_i32 *jobs, const pk_u8 *mid, const pk_i32 *wts,
		      const pk_u32 *lut, pk_u8 *dst, pk_i32 layout, pk_i32 esize)
{
	pk_thread t;
	t.bdx = bd;
	for (t.by = 0; t.by < gy; t.by++)
		for (t.bx = 0; t.bx < gx; t.bx++)
			for (t.tx = 0; t.tx < bd; t.tx++)
				pk_vpass(t, jobs, mid, wts, lut, dst, layout, esize);
}

static const int pk_layout_words[] = {
	PK_J_C, PK_J_SRC_W, PK_J_SRC_OFF, PK_J_XB, PK_J_XC, PK_J_XK, PK_J_YB, PK_J_YC, PK_J_YK,
	PK_J_X0, PK_J_X1, PK_J_Y0, PK_J_Y1, PK_J_RY0, PK_J_RY1, PK_J_MID_OFF, PK_J_OUT_W, PK_J_OUT_H,
	PK_J_OFF_X, PK_J_OFF_Y, PK_J_DST_OFF, PK_J_HWORK, PK_J_VWORK, PK_J_LUT_OFF, PK_J_SRC_X0, PK_JOB_WORDS,
	PK_PRECISION, PK_LAYOUT_HWC, PK_LAYOUT_CHW,
};
static int pk_layout_len(void) { return sizeof pk_layout_words / sizeof pk_layout_words[0]; }
static int pk_layout_word(int i) { return pk_layout_words[i]; }
*/
import "C"

import "unsafe"

// one is what an empty buffer points at: the C code never reads it (no job has work there).
var one [8]byte

func u8p(b []byte) *C.pk_u8 {
	if len(b) == 0 {
		return (*C.pk_u8)(unsafe.Pointer(&one[0]))
	}
	return (*C.pk_u8)(unsafe.Pointer(&b[0]))
}

func i32p(b []int32) *C.pk_i32 {
	if len(b) == 0 {
		return (*C.pk_i32)(unsafe.Pointer(&one[0]))
	}
	return (*C.pk_i32)(unsafe.Pointer(&b[0]))
}

func u32p(b []uint32) *C.pk_u32 {
	if len(b) == 0 {
		return (*C.pk_u32)(unsafe.Pointer(&one[0]))
	}
	return (*C.pk_u32)(unsafe.Pointer(&b[0]))
}

// HPass runs packer_hpass's body over a grid of gx×gy blocks of block threads.
func HPass(gx, gy, block uint32, jobs []int32, src []byte, wts []int32, mid []byte) {
	C.run_hpass(C.pk_u32(gx), C.pk_u32(gy), C.pk_u32(block), i32p(jobs), u8p(src), i32p(wts), u8p(mid))
}

// VPass runs packer_vpass's body over a grid of gx×gy blocks of block threads.
func VPass(gx, gy, block uint32, jobs []int32, mid []byte, wts []int32, lut []uint32, dst []byte, layout, esize int32) {
	C.run_vpass(C.pk_u32(gx), C.pk_u32(gy), C.pk_u32(block), i32p(jobs), u8p(mid), i32p(wts), u32p(lut), u8p(dst),
		C.pk_i32(layout), C.pk_i32(esize))
}

// Layout returns the header's constants, in this order: the PK_J_* job-table indices,
// PK_JOB_WORDS, PK_PRECISION, PK_LAYOUT_HWC, PK_LAYOUT_CHW. Package gpu's tests compare
// them with its own.
func Layout() []int {
	n := int(C.pk_layout_len())
	out := make([]int, n)
	for i := range out {
		out[i] = int(C.pk_layout_word(C.int(i)))
	}
	return out
}
