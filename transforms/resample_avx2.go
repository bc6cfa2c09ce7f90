//go:build cgo && amd64 && !purego

package transforms

/*
#cgo CFLAGS: -O2
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

// The vector bodies of both resampling passes, with AVX2. They compute exactly the per-sample
// formula of Weights: sums of 32-bit two's-complement products, the rounding offset, an
// arithmetic shift and a clip to 0..255. Integer sums do not depend on their order, so the
// results are the bytes of the Go loops, which do the edges. Go calls these functions only on
// CPUs that have AVX2.

#define PK_PREC 22

// pk_hrgb_table packs the coefficients of outputs [x0, x0+n) for pk_hrgb: per output and per
// group of four taps, two vectors of eight 32-bit words, the high and the low part of the
// coefficients (c = hi*2^11 + lo, 0 <= lo < 2^11, |hi| < 2^15), as pairs of 16-bit halves
// for vpmaddwd: words 0-2 hold (tap 4g, tap 4g+1) and words 4-6 (tap 4g+2, tap 4g+3) for the
// R, G and B lanes; words 3 and 7 are 0. Taps at or beyond ks are 0.
static void pk_hrgb_table(int32_t *tab, const int32_t *coeffs, int ks, int groups, int x0, int n) {
	for (int j = 0; j < n; j++) {
		const int32_t *k = coeffs + (int64_t)(x0 + j) * ks;
		for (int g = 0; g < groups; g++) {
			int32_t *hv = tab + ((int64_t)j * groups + g) * 16;
			int32_t *lv = hv + 8;
			for (int half = 0; half < 2; half++) {
				int t = 4 * g + 2 * half;
				int32_t c0 = t < ks ? k[t] : 0, c1 = t + 1 < ks ? k[t + 1] : 0;
				uint32_t h = (uint32_t)(uint16_t)(c0 >> 11) | (uint32_t)(uint16_t)(c1 >> 11) << 16;
				uint32_t l = (uint32_t)(c0 & 0x7ff) | (uint32_t)(c1 & 0x7ff) << 16;
				for (int c = 0; c < 3; c++) {
					hv[4 * half + c] = (int32_t)h;
					lv[4 * half + c] = (int32_t)l;
				}
				hv[4 * half + 3] = 0;
				lv[4 * half + 3] = 0;
			}
		}
	}
}

// pk_hsum accumulates one output's taps from p (its first tap's pixel): the sums over the high
// and the low coefficient parts, each split across the two 128-bit halves.
__attribute__((target("avx2")))
static inline void pk_hsum(const uint8_t *p, const int32_t *tab, int groups, __m256i shuf, __m256i *hi, __m256i *lo) {
	const __m256i *tv = (const __m256i *)tab;
	__m256i h = _mm256_setzero_si256(), l = _mm256_setzero_si256();
	for (int g = 0; g < groups; g++) {
		__m256i px = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p + 12 * g)));
		px = _mm256_shuffle_epi8(px, shuf);
		h = _mm256_add_epi32(h, _mm256_madd_epi16(px, _mm256_loadu_si256(tv + 2 * g)));
		l = _mm256_add_epi32(l, _mm256_madd_epi16(px, _mm256_loadu_si256(tv + 2 * g + 1)));
	}
	*hi = h;
	*lo = l;
}

// pk_hrgb is the horizontal pass over rows of RGB pixels for outputs [x0, x0+n): row r of the
// input starts at in + r*inStride, its pixel i being source pixel i+off; row r of the output
// (its pixel 0 being output x0) at out + r*outStride. Every output's 16-byte loads
// (ceil(taps/4) of them, 12 bytes apart, from its first tap) must lie inside the row: the
// caller leaves the others out of [x0, x0+n). tab is scratch of n*ceil(taps/4)*16 words.
__attribute__((target("avx2")))
static void pk_hrgb(uint8_t *out, int64_t outStride, const uint8_t *in, int64_t inStride, int rows,
                    const int32_t *bounds, const int32_t *coeffs, int ks, int taps, int x0, int n, int off,
                    int32_t *tab) {
	const int groups = (taps + 3) / 4;
	pk_hrgb_table(tab, coeffs, ks, groups, x0, n);
	const __m256i shuf = _mm256_setr_epi8(
		0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
		6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
	const __m256i half = _mm256_set1_epi32(1 << (PK_PREC - 1));
	// Four outputs' R, G, B bytes (dwords 0, 4, 1, 5 after the packs, each R G B 0) gathered
	// into the low 12 bytes.
	const __m256i quad = _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0);
	const __m128i pack12 = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
	const int n4 = n & ~3;
	for (int r = 0; r < rows; r++) {
		const uint8_t *row = in + (int64_t)r * inStride;
		uint8_t *o = out + (int64_t)r * outStride;
		for (int j = 0; j < n4; j += 4) {
			// Each output's sum is hi*2^11 + lo; the two 128-bit halves of each output's sum
			// (taps 4g, 4g+1 and 4g+2, 4g+3) are added across the lanes for two outputs at once.
			__m256i s[4];
			for (int q = 0; q < 4; q++) {
				__m256i hi, lo;
				pk_hsum(row + 3 * ((int64_t)bounds[2 * (x0 + j + q)] - off), tab + (int64_t)(j + q) * groups * 16, groups, shuf, &hi, &lo);
				s[q] = _mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo);
			}
			__m256i a01 = _mm256_add_epi32(_mm256_permute2x128_si256(s[0], s[1], 0x20), _mm256_permute2x128_si256(s[0], s[1], 0x31));
			__m256i a23 = _mm256_add_epi32(_mm256_permute2x128_si256(s[2], s[3], 0x20), _mm256_permute2x128_si256(s[2], s[3], 0x31));
			a01 = _mm256_srai_epi32(_mm256_add_epi32(a01, half), PK_PREC);
			a23 = _mm256_srai_epi32(_mm256_add_epi32(a23, half), PK_PREC);
			// packs/packus work within lanes: dword 0 is output j, 1 is j+2, 4 is j+1, 5 is j+3.
			__m256i b = _mm256_packus_epi16(_mm256_packs_epi32(a01, a23), _mm256_setzero_si256());
			__m128i v = _mm_shuffle_epi8(_mm256_castsi256_si128(_mm256_permutevar8x32_epi32(b, quad)), pack12);
			_mm_storel_epi64((__m128i *)(o + 3 * j), v);
			uint32_t last = (uint32_t)_mm_extract_epi32(v, 2);
			memcpy(o + 3 * j + 8, &last, 4);
		}
		for (int j = n4; j < n; j += 2) {
			// Two outputs side by side, j in the low 128 bits (an odd last one pairs with
			// itself). Adding the halves of each output's sums crosses the lanes once.
			int j1 = j + 1 < n ? j + 1 : j;
			__m256i hi0, lo0, hi1, lo1;
			pk_hsum(row + 3 * ((int64_t)bounds[2 * (x0 + j)] - off), tab + (int64_t)j * groups * 16, groups, shuf, &hi0, &lo0);
			pk_hsum(row + 3 * ((int64_t)bounds[2 * (x0 + j1)] - off), tab + (int64_t)j1 * groups * 16, groups, shuf, &hi1, &lo1);
			__m256i h = _mm256_add_epi32(_mm256_permute2x128_si256(hi0, hi1, 0x20), _mm256_permute2x128_si256(hi0, hi1, 0x31));
			__m256i l = _mm256_add_epi32(_mm256_permute2x128_si256(lo0, lo1, 0x20), _mm256_permute2x128_si256(lo0, lo1, 0x31));
			__m256i a = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h, 11), l), half);
			a = _mm256_srai_epi32(a, PK_PREC);
			a = _mm256_packs_epi32(a, a);
			a = _mm256_packus_epi16(a, a);
			uint32_t v0 = (uint32_t)_mm256_extract_epi32(a, 0), v1 = (uint32_t)_mm256_extract_epi32(a, 4);
			memcpy(o + 3 * j, &v0, 3);
			memcpy(o + 3 * j1, &v1, 3);
		}
	}
}

// pk_vert is the vertical pass over bytes [0, width) of output rows [y0, y1), width a multiple
// of 32: output row y at out + (y-y0)*outStride, intermediate row i at
// mid + (i-midOff)*midStride.
__attribute__((target("avx2")))
static void pk_vert(uint8_t *out, int64_t outStride, const uint8_t *mid, int64_t midStride, int midOff,
                    int64_t width, int y0, int y1, const int32_t *bounds, const int32_t *coeffs, int ks) {
	const __m256i half = _mm256_set1_epi32(1 << (PK_PREC - 1));
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (int y = y0; y < y1; y++) {
		const uint8_t *base = mid + ((int64_t)bounds[2 * y] - midOff) * midStride;
		int n = bounds[2 * y + 1];
		const int32_t *k = coeffs + (int64_t)y * ks;
		uint8_t *o = out + (int64_t)(y - y0) * outStride;
		for (int64_t x = 0; x < width; x += 32) {
			__m256i a0 = half, a1 = half, a2 = half, a3 = half;
			const uint8_t *p = base + x;
			for (int t = 0; t < n; t++, p += midStride) {
				__m256i c = _mm256_set1_epi32(k[t]);
				a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)), c));
				a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8))), c));
				a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 16))), c));
				a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 24))), c));
			}
			a0 = _mm256_srai_epi32(a0, PK_PREC);
			a1 = _mm256_srai_epi32(a1, PK_PREC);
			a2 = _mm256_srai_epi32(a2, PK_PREC);
			a3 = _mm256_srai_epi32(a3, PK_PREC);
			// packs/packus work within 128-bit lanes; the permute puts the bytes back in order.
			__m256i b = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
			_mm256_storeu_si256((__m256i *)(o + x), _mm256_permutevar8x32_epi32(b, order));
		}
	}
}
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// simdPrecision is the shift the C passes use; a test checks it equals PrecisionBits.
const simdPrecision = C.PK_PREC

// useAVX2 selects the AVX2 passes; tests turn it off to compare them with the Go loops.
var useAVX2 = cpu.X86.HasAVX2

// hrgbAVX2 runs the horizontal pass over rows rows of RGB pixels (row r of in at r*inStride,
// inLen bytes, its pixel i being source pixel i+off; row r of out at r*outStride) for outputs
// [x0, x1): pk_hrgb for the outputs whose vector loads stay inside the row, horizontalRGBPixel
// for the others. It reports false, doing nothing, when AVX2 is off or the coefficients do not
// fit the 16-bit split.
func (r *resampler) hrgbAVX2(out []byte, outStride int, in []byte, inStride, inLen, rows int, w *Weights, x0, x1, off int) bool {
	if !useAVX2 || !w.split16 || rows <= 0 || x1 <= x0 {
		return false
	}
	groups := (max(w.MaxTaps, 1) + 3) / 4
	safe := func(x int) bool {
		s := int(w.Bounds[2*x]) - off
		return s >= 0 && 3*s+12*(groups-1)+16 <= inLen
	}
	// [a, b): the first run of outputs pk_hrgb may compute (first taps only grow with x).
	a := x0
	for a < x1 && !safe(a) {
		a++
	}
	b := a
	for b < x1 && safe(b) {
		b++
	}
	if b > a {
		_ = in[(rows-1)*inStride+inLen-1] // pk_hrgb's reads stay below this (checked by safe)
		_ = out[(rows-1)*outStride+3*(b-x0)-1]
		need := (b - a) * groups * 16
		if cap(r.tab) < need {
			r.tab = make([]int32, need)
		}
		C.pk_hrgb((*C.uint8_t)(unsafe.Pointer(&out[3*(a-x0)])), C.int64_t(outStride),
			(*C.uint8_t)(unsafe.Pointer(&in[0])), C.int64_t(inStride), C.int(rows),
			(*C.int32_t)(unsafe.Pointer(&w.Bounds[0])), (*C.int32_t)(unsafe.Pointer(&w.Coeffs[0])),
			C.int(w.KSize), C.int(max(w.MaxTaps, 1)), C.int(a), C.int(b-a), C.int(off),
			(*C.int32_t)(unsafe.Pointer(&r.tab[0])))
	}
	for y := 0; y < rows; y++ {
		row, o := in[y*inStride:y*inStride+inLen], out[y*outStride:]
		for x := x0; x < x1; x++ {
			if x == a && b > a {
				x = b - 1 // done by pk_hrgb
				continue
			}
			horizontalRGBPixel(o[3*(x-x0):], row, w, x, off)
		}
	}
	return true
}

// vertAVX2 runs the vertical pass for output rows [y0, y1), each width bytes (see
// resizeRegion): pk_vert for the whole 32-byte blocks of every row, the Go loop for the rest.
// It reports false, doing nothing, when AVX2 is off.
func (r *resampler) vertAVX2(out []byte, outStride int, mid []byte, midStride, midOff, width, y0, y1 int, w *Weights) bool {
	if !useAVX2 || y1 <= y0 || width < 32 {
		return false
	}
	body := width &^ 31
	// The last output byte, and the last intermediate row any output row reads.
	_ = out[(y1-y0-1)*outStride+width-1]
	last := -1
	for y := y0; y < y1; y++ {
		if n := int(w.Bounds[2*y+1]); n > 0 {
			last = max(last, int(w.Bounds[2*y])+n-1-midOff)
		}
	}
	if last < 0 {
		return false // no row reads the intermediate (NEAREST entirely outside): the Go loop
	}
	_ = mid[last*midStride+width-1]
	C.pk_vert((*C.uint8_t)(unsafe.Pointer(&out[0])), C.int64_t(outStride),
		(*C.uint8_t)(unsafe.Pointer(&mid[0])), C.int64_t(midStride), C.int(midOff),
		C.int64_t(body), C.int(y0), C.int(y1),
		(*C.int32_t)(unsafe.Pointer(&w.Bounds[0])), (*C.int32_t)(unsafe.Pointer(&w.Coeffs[0])), C.int(w.KSize))
	if body < width {
		for y := y0; y < y1; y++ {
			s, n := int(w.Bounds[2*y]), int(w.Bounds[2*y+1])
			o := out[(y-y0)*outStride+body : (y-y0)*outStride+width]
			vertical(o, r.acc, mid[body:], midStride, s-midOff, w.Coeffs[y*w.KSize:y*w.KSize+n])
		}
	}
	return true
}
