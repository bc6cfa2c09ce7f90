/*
 * resize_body.h: the per-thread bodies of packer's GPU resize, as plain C.
 *
 * This one file is compiled twice: by clang-14 as CUDA device code (resize.cu, to PTX; see
 * scripts/build-ptx.sh) and by the host C compiler through cgo (gpu/internal/kernelhost), whose
 * CPU harness runs every thread of the same grid and is compared byte for byte with the Go
 * reference in package transforms. Keep it free of anything only one side has: no includes, no
 * CUDA intrinsics, no floating point (float outputs come from a lookup table computed on the
 * CPU by package transforms, so the device never rounds a float).
 *
 * The arithmetic is that of transforms.Weights (Pillow's fixed-point resampling): per sample,
 *   acc = 1 << (PK_PRECISION-1); acc += in[tap] * coeff for each tap; out = clip8(acc >> PK_PRECISION)
 * in 32-bit two's-complement integers, horizontal pass into an 8-bit intermediate first, then
 * the vertical pass on that intermediate.
 *
 * A batch is described by a table of jobs, one per image, PK_JOB_WORDS int32 words each (the
 * PK_J_* indices below; gpu/plan.go writes them). Byte offsets locate each image's data in the
 * batch's source (only the region the image's kept pixels read), intermediate and output buffers; int32 offsets locate its weights in the
 * device's weight pool. Offsets are int32, so each buffer is below 2 GiB (gpu/plan.go checks).
 */
#ifndef PACKER_RESIZE_BODY_H
#define PACKER_RESIZE_BODY_H

#ifdef __CUDA_ARCH__
#define PK_FN __attribute__((device)) static inline
#else
#define PK_FN static inline
#endif

typedef __INT32_TYPE__ pk_i32;
typedef __UINT32_TYPE__ pk_u32;
typedef __UINT8_TYPE__ pk_u8;

/* The grid coordinates of one thread, as CUDA's blockIdx/blockDim/threadIdx give them. */
typedef struct {
	pk_u32 bx, by;  /* blockIdx.x, blockIdx.y */
	pk_u32 bdx;     /* blockDim.x */
	pk_u32 tx;      /* threadIdx.x */
} pk_thread;

#define PK_PRECISION 22 /* transforms.PrecisionBits */

/* Job table: int32 words per image. */
#define PK_J_C 0        /* channels (1..4) */
#define PK_J_SRC_W 1    /* width of the uploaded source region (columns [SRC_X0, SRC_X0+SRC_W)) */
#define PK_J_SRC_OFF 2  /* byte offset of the uploaded region: rows [RY0, RY1) of SRC_W*C bytes, HWC */
#define PK_J_XB 3       /* weight-pool offset of the horizontal Bounds (2 per resized column) */
#define PK_J_XC 4       /* weight-pool offset of the horizontal Coeffs (XK per resized column) */
#define PK_J_XK 5       /* horizontal KSize */
#define PK_J_YB 6       /* weight-pool offset of the vertical Bounds (2 per resized row) */
#define PK_J_YC 7       /* weight-pool offset of the vertical Coeffs */
#define PK_J_YK 8       /* vertical KSize */
#define PK_J_X0 9       /* kept resized columns [X0, X1) */
#define PK_J_X1 10
#define PK_J_Y0 11      /* kept resized rows [Y0, Y1) */
#define PK_J_Y1 12
#define PK_J_RY0 13     /* source rows [RY0, RY1) through the horizontal pass */
#define PK_J_RY1 14
#define PK_J_MID_OFF 15 /* byte offset of the intermediate: RY1-RY0 rows of (X1-X0)*C bytes */
#define PK_J_OUT_W 16   /* output (crop) size */
#define PK_J_OUT_H 17
#define PK_J_OFF_X 18   /* output pixel (ox, oy) is resized pixel (ox+OFF_X, oy+OFF_Y); */
#define PK_J_OFF_Y 19   /*   outside [X0,X1)x[Y0,Y1) it is padding (value 0 before conversion) */
#define PK_J_DST_OFF 20 /* byte offset of the output record */
#define PK_J_HWORK 21   /* horizontal-pass threads: (RY1-RY0)*(X1-X0) */
#define PK_J_VWORK 22   /* vertical-pass threads: OUT_W*OUT_H */
#define PK_J_LUT_OFF 23 /* uint32 offset of this image's conversion table in lut (float dtypes) */
#define PK_J_SRC_X0 24  /* first source column of the uploaded region */
#define PK_JOB_WORDS 25 /* words per job */

/* Output layouts and element sizes (kernel parameters). */
#define PK_LAYOUT_HWC 0
#define PK_LAYOUT_CHW 1

PK_FN pk_u8 pk_clip8(pk_i32 v)
{
	return v < 0 ? 0 : (v > 255 ? 255 : (pk_u8)v);
}

PK_FN pk_i32 pk_linear(pk_thread t)
{
	return (pk_i32)(t.bx * t.bdx + t.tx);
}

/*
 * Horizontal pass: one thread per (source row in [RY0,RY1), kept column in [X0,X1)), all
 * channels. Grid: x covers the largest HWORK of the batch, y is the job index.
 */
PK_FN void pk_hpass(pk_thread t, const pk_i32 *jobs, const pk_u8 *src, const pk_i32 *wts, pk_u8 *mid)
{
	const pk_i32 *j = jobs + (pk_i32)t.by * PK_JOB_WORDS;
	pk_i32 i = pk_linear(t);
	if (i >= j[PK_J_HWORK])
		return;
	pk_i32 C = j[PK_J_C];
	pk_i32 kw = j[PK_J_X1] - j[PK_J_X0];
	pk_i32 r = i / kw, xi = i - r * kw;
	pk_i32 x = j[PK_J_X0] + xi;
	pk_i32 sy = j[PK_J_RY0] + r;
	const pk_i32 *b = wts + j[PK_J_XB] + 2 * x;
	pk_i32 s = b[0], n = b[1];
	const pk_i32 *k = wts + j[PK_J_XC] + x * j[PK_J_XK];
	/* Only the source region under the kept pixels' support is uploaded: rows [RY0, RY1),
	 * columns [SRC_X0, SRC_X0+SRC_W). Every tap of a kept column lies inside it. */
	const pk_u8 *in = src + j[PK_J_SRC_OFF] + ((sy - j[PK_J_RY0]) * j[PK_J_SRC_W] + (s - j[PK_J_SRC_X0])) * C;
	pk_u8 *out = mid + j[PK_J_MID_OFF] + (r * kw + xi) * C;
	if (C == 3) {
		pk_i32 a0 = 1 << (PK_PRECISION - 1), a1 = a0, a2 = a0;
		for (pk_i32 q = 0; q < n; q++) {
			pk_i32 c = k[q];
			a0 += (pk_i32)in[3 * q] * c;
			a1 += (pk_i32)in[3 * q + 1] * c;
			a2 += (pk_i32)in[3 * q + 2] * c;
		}
		out[0] = pk_clip8(a0 >> PK_PRECISION);
		out[1] = pk_clip8(a1 >> PK_PRECISION);
		out[2] = pk_clip8(a2 >> PK_PRECISION);
		return;
	}
	for (pk_i32 ch = 0; ch < C; ch++) {
		pk_i32 a = 1 << (PK_PRECISION - 1);
		for (pk_i32 q = 0; q < n; q++)
			a += (pk_i32)in[q * C + ch] * k[q];
		out[ch] = pk_clip8(a >> PK_PRECISION);
	}
}

/*
 * pk_store writes element e of the output record: the byte v itself (esize 1), or the
 * little-endian esize-byte value lut[ch*256+v] (float16/float32 bits computed by transforms).
 * Bytes are stored one by one, so the record needs no alignment and the host harness gives
 * the same bytes on any byte order.
 */
PK_FN void pk_store(pk_u8 *rec, pk_i32 e, pk_i32 esize, const pk_u32 *lut, pk_i32 ch, pk_u8 v)
{
	if (esize == 1) {
		rec[e] = v;
		return;
	}
	pk_u32 bits = lut[ch * 256 + v];
	pk_u8 *p = rec + e * esize;
	p[0] = (pk_u8)bits;
	p[1] = (pk_u8)(bits >> 8);
	if (esize == 4) {
		p[2] = (pk_u8)(bits >> 16);
		p[3] = (pk_u8)(bits >> 24);
	}
}

/*
 * Vertical pass, crop/pad, layout and element type: one thread per output pixel, all channels.
 * Grid: x covers the largest VWORK of the batch, y is the job index.
 */
PK_FN void pk_vpass(pk_thread t, const pk_i32 *jobs, const pk_u8 *mid, const pk_i32 *wts, const pk_u32 *lut,
		    pk_u8 *dst, pk_i32 layout, pk_i32 esize)
{
	const pk_i32 *j = jobs + (pk_i32)t.by * PK_JOB_WORDS;
	pk_i32 i = pk_linear(t);
	if (i >= j[PK_J_VWORK])
		return;
	pk_i32 C = j[PK_J_C];
	pk_i32 ow = j[PK_J_OUT_W], oh = j[PK_J_OUT_H];
	pk_i32 oy = i / ow, ox = i - oy * ow;
	pk_i32 x = ox + j[PK_J_OFF_X], y = oy + j[PK_J_OFF_Y];
	pk_u8 *rec = dst + j[PK_J_DST_OFF];
	pk_i32 inside = x >= j[PK_J_X0] && x < j[PK_J_X1] && y >= j[PK_J_Y0] && y < j[PK_J_Y1];
	pk_i32 s = 0, n = 0;
	const pk_i32 *k = wts;
	const pk_u8 *col = mid;
	pk_i32 stride = (j[PK_J_X1] - j[PK_J_X0]) * C;
	if (inside) {
		const pk_i32 *b = wts + j[PK_J_YB] + 2 * y;
		s = b[0];
		n = b[1];
		k = wts + j[PK_J_YC] + y * j[PK_J_YK];
		col = mid + j[PK_J_MID_OFF] + (s - j[PK_J_RY0]) * stride + (x - j[PK_J_X0]) * C;
	}
	for (pk_i32 ch = 0; ch < C; ch++) {
		pk_u8 v = 0;
		if (inside) {
			pk_i32 a = 1 << (PK_PRECISION - 1);
			for (pk_i32 q = 0; q < n; q++)
				a += (pk_i32)col[q * stride + ch] * k[q];
			v = pk_clip8(a >> PK_PRECISION);
		}
		pk_i32 e = layout == PK_LAYOUT_CHW ? ch * ow * oh + i : i * C + ch;
		pk_store(rec, e, esize, lut + j[PK_J_LUT_OFF], ch, v);
	}
}

#endif
