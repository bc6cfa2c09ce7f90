//go:build cgo && amd64

package transforms

/*
#cgo CFLAGS: -O2
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

// Both passes compute exactly the per-sample formula of Weights with AVX2: sums of 32-bit
// two's-complement products, the rounding offset, an arithmetic shift and a clip to 0..255.
// Integer sums do not depend on their order, so the results are the bytes of the Go loops.
// The functions carry the avx2 target attribute; Go calls them only on CPUs that have AVX2.

#define PK_PREC 22

// pk_hrgb_table packs the coefficients of outputs [x0, x0+n) for pk_hrgb: per output and per
// group of four taps, two vectors of eight 32-bit words, the high and the low part of the
// coefficients (c = hi*2^11 + lo, 0 <= lo < 2^11, |hi| < 2^12), as pairs of 16-bit halves
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
				uint32_t h = ((uint32_t)(uint16_t)(int16_t)(c0 >> 11)) | ((uint32_t)(uint16_t)(int16_t)(c1 >> 11) << 16);
				uint32_t l = ((uint32_t)(c0 & 0x7ff)) | ((uint32_t)(c1 & 0x7ff) << 16);
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

static inline uint8_t pk_clip8(int32_t v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v; }

// pk_hsafe reports whether the 16-byte loads of an output whose first tap is source pixel s
// (relative to the row) stay inside a row of inLen bytes.
static inline int pk_hsafe(int64_t s, int groups, int64_t inLen) {
	return s >= 0 && 3 * s + 12 * (int64_t)(groups - 1) + 16 <= inLen;
}

// pk_hpixel computes one RGB output pixel with the per-tap loop.
static void pk_hpixel(uint8_t *o, const uint8_t *row, int64_t s, int cnt, const int32_t *k) {
	if (cnt == 0) s = 0;
	int32_t a0 = 1 << (PK_PREC - 1), a1 = a0, a2 = a0;
	for (int t = 0; t < cnt; t++) {
		const uint8_t *q = row + 3 * (s + t);
		a0 += (int32_t)q[0] * k[t];
		a1 += (int32_t)q[1] * k[t];
		a2 += (int32_t)q[2] * k[t];
	}
	o[0] = pk_clip8(a0 >> PK_PREC);
	o[1] = pk_clip8(a1 >> PK_PREC);
	o[2] = pk_clip8(a2 >> PK_PREC);
}

// pk_hsum accumulates one output's taps from p (its first tap's pixel): the sums of the high
// and the low coefficient parts, each split over the two 128-bit halves.
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

// pk_hrgb is the horizontal pass over rows of RGB pixels: output pixels [x0, x0+n) of each of
// rows rows. Row r of the input starts at in + r*inStride and holds inLen bytes, its pixel i
// being source pixel i+off; row r of the output starts at out + r*outStride. taps is
// Weights.MaxTaps; tab is scratch of n*ceil(taps/4)*16 words. An output whose taps' 16-byte
// loads would leave the row uses the per-tap loop.
__attribute__((target("avx2")))
static void pk_hrgb(uint8_t *out, int64_t outStride, const uint8_t *in, int64_t inStride, int64_t inLen, int rows,
                    const int32_t *bounds, const int32_t *coeffs, int ks, int taps, int x0, int n, int off,
                    int32_t *tab) {
	const int groups = (taps + 3) / 4;
	pk_hrgb_table(tab, coeffs, ks, groups, x0, n);
	const __m256i shuf = _mm256_setr_epi8(
		0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
		6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
	const __m128i half = _mm_set1_epi32(1 << (PK_PREC - 1));
	const __m256i half2 = _mm256_set1_epi32(1 << (PK_PREC - 1));
	for (int r = 0; r < rows; r++) {
		const uint8_t *row = in + (int64_t)r * inStride;
		uint8_t *o = out + (int64_t)r * outStride;
		for (int j = 0; j < n;) {
			int64_t s = (int64_t)bounds[2 * (x0 + j)] - off;
			if (!pk_hsafe(s, groups, inLen)) {
				pk_hpixel(o + 3 * j, row, s, bounds[2 * (x0 + j) + 1], coeffs + (int64_t)(x0 + j) * ks);
				j++;
				continue;
			}
			__m256i hi0, lo0;
			pk_hsum(row + 3 * s, tab + (int64_t)j * groups * 16, groups, shuf, &hi0, &lo0);
			int64_t s1 = j + 1 < n ? (int64_t)bounds[2 * (x0 + j + 1)] - off : -1;
			if (!pk_hsafe(s1, groups, inLen)) {
				// One pixel: add the two halves of its sums.
				__m128i h = _mm_add_epi32(_mm256_castsi256_si128(hi0), _mm256_extracti128_si256(hi0, 1));
				__m128i l = _mm_add_epi32(_mm256_castsi256_si128(lo0), _mm256_extracti128_si256(lo0, 1));
				__m128i a = _mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(h, 11), l), half);
				a = _mm_srai_epi32(a, PK_PREC);
				a = _mm_packs_epi32(a, a);
				a = _mm_packus_epi16(a, a);
				uint32_t v = (uint32_t)_mm_cvtsi128_si32(a);
				memcpy(o + 3 * j, &v, 3);
				j++;
				continue;
			}
			// Two pixels: their sums side by side, pixel j in the low 128 bits.
			__m256i hi1, lo1;
			pk_hsum(row + 3 * s1, tab + (int64_t)(j + 1) * groups * 16, groups, shuf, &hi1, &lo1);
			__m256i h = _mm256_add_epi32(_mm256_permute2x128_si256(hi0, hi1, 0x20), _mm256_permute2x128_si256(hi0, hi1, 0x31));
			__m256i l = _mm256_add_epi32(_mm256_permute2x128_si256(lo0, lo1, 0x20), _mm256_permute2x128_si256(lo0, lo1, 0x31));
			__m256i a = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h, 11), l), half2);
			a = _mm256_srai_epi32(a, PK_PREC);
			a = _mm256_packs_epi32(a, a);
			a = _mm256_packus_epi16(a, a);
			uint32_t v0 = (uint32_t)_mm256_extract_epi32(a, 0), v1 = (uint32_t)_mm256_extract_epi32(a, 4);
			memcpy(o + 3 * j, &v0, 3);
			memcpy(o + 3 * j + 3, &v1, 3);
			j += 2;
		}
	}
}

// pk_vert is the vertical pass: output rows [y0, y1), each of width bytes, row y at
// out + (y-y0)*outStride, from intermediate rows (row i at mid + (i-midOff)*midStride).
__attribute__((target("avx2")))
static void pk_vert(uint8_t *out, int64_t outStride, const uint8_t *mid, int64_t midStride, int midOff,
                    int64_t width, int y0, int y1, const int32_t *bounds, const int32_t *coeffs, int ks) {
	const __m256i half = _mm256_set1_epi32(1 << (PK_PREC - 1));
	for (int y = y0; y < y1; y++) {
		const uint8_t *base = mid + ((int64_t)bounds[2 * y] - midOff) * midStride;
		int n = bounds[2 * y + 1];
		const int32_t *k = coeffs + (int64_t)y * ks;
		uint8_t *o = out + (int64_t)(y - y0) * outStride;
		int64_t x = 0;
		for (; x + 32 <= width; x += 32) {
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
			__m256i w01 = _mm256_packs_epi32(a0, a1), w23 = _mm256_packs_epi32(a2, a3);
			__m256i b = _mm256_packus_epi16(w01, w23);
			b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
			_mm256_storeu_si256((__m256i *)(o + x), b);
		}
		for (; x < width; x++) {
			int32_t a = 1 << (PK_PREC - 1);
			const uint8_t *p = base + x;
			for (int t = 0; t < n; t++, p += midStride) a += (int32_t)*p * k[t];
			o[x] = pk_clip8(a >> PK_PREC);
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

// hrgbAVX2 runs the horizontal pass over rows rows of RGB pixels (see pk_hrgb). It reports
// false when AVX2 is off or the weights' coefficients do not fit its 2x16-bit split.
func (r *resampler) hrgbAVX2(out []byte, outStride int, in []byte, inStride, inLen, rows int, w *Weights, x0, x1, off int) bool {
	n := x1 - x0
	if !useAVX2 || !w.simdOK() || rows <= 0 || n <= 0 {
		return false
	}
	// Bounds of the last row and output pixel, so that the C code stays inside the slices.
	_ = in[(rows-1)*inStride+inLen-1]
	_ = out[(rows-1)*outStride+3*n-1]
	groups := (w.MaxTaps + 3) / 4
	need := n * max(groups, 1) * 16
	if cap(r.tab) < need {
		r.tab = make([]int32, need)
	}
	C.pk_hrgb((*C.uint8_t)(unsafe.Pointer(&out[0])), C.int64_t(outStride),
		(*C.uint8_t)(unsafe.Pointer(&in[0])), C.int64_t(inStride), C.int64_t(inLen), C.int(rows),
		(*C.int32_t)(unsafe.Pointer(&w.Bounds[0])), (*C.int32_t)(unsafe.Pointer(&w.Coeffs[0])),
		C.int(w.KSize), C.int(max(w.MaxTaps, 1)), C.int(x0), C.int(n), C.int(off),
		(*C.int32_t)(unsafe.Pointer(&r.tab[0])))
	return true
}

// vertAVX2 runs the vertical pass for output rows [y0, y1) (see pk_vert).
func vertAVX2(out []byte, outStride int, mid []byte, midStride, midOff, width, y0, y1 int, w *Weights) bool {
	if !useAVX2 || y1 <= y0 || width <= 0 {
		return false
	}
	// Bounds: the last output byte, and the last intermediate row any output row reads.
	_ = out[(y1-y0-1)*outStride+width-1]
	last := 0
	for y := y0; y < y1; y++ {
		if n := int(w.Bounds[2*y+1]); n > 0 {
			last = max(last, int(w.Bounds[2*y])+n-1-midOff)
		}
	}
	_ = mid[last*midStride+width-1]
	C.pk_vert((*C.uint8_t)(unsafe.Pointer(&out[0])), C.int64_t(outStride),
		(*C.uint8_t)(unsafe.Pointer(&mid[0])), C.int64_t(midStride), C.int(midOff),
		C.int64_t(width), C.int(y0), C.int(y1),
		(*C.int32_t)(unsafe.Pointer(&w.Bounds[0])), (*C.int32_t)(unsafe.Pointer(&w.Coeffs[0])), C.int(w.KSize))
	return true
}
