package transforms

import "fmt"

// Resize returns src resized to w×h with filter f, byte-identical to Pillow 9.4's
// Image.resize((w, h), f) on an "L" (C=1) or "RGB" (C=3) image. It allocates the result;
// Workers use the allocation-free region form internally.
func Resize(src Image, w, h int, f Filter) (Image, error) {
	if err := checkImage(src); err != nil {
		return Image{}, err
	}
	if w < 1 || h < 1 || w > MaxResampleSize || h > MaxResampleSize {
		return Image{}, fmt.Errorf("transforms: resize to %dx%d: size out of range", w, h)
	}
	if !f.Valid() {
		return Image{}, fmt.Errorf("transforms: invalid filter %d", int(f))
	}
	out := Image{W: w, H: h, C: src.C, Pix: make([]byte, w*h*src.C)}
	var r resampler
	r.resizeRegion(out.Pix, w*src.C, wholeImage(src), w, h, f, 0, 0, w, h)
	return out, nil
}

func checkImage(src Image) error {
	if src.W < 1 || src.H < 1 || src.C < 1 || src.C > 4 {
		return fmt.Errorf("transforms: invalid image %dx%dx%d", src.W, src.H, src.C)
	}
	if src.W > MaxResampleSize || src.H > MaxResampleSize {
		return fmt.Errorf("transforms: image %dx%d too large", src.W, src.H)
	}
	if len(src.Pix) < src.W*src.H*src.C {
		return fmt.Errorf("transforms: image %dx%dx%d has %d bytes, want %d", src.W, src.H, src.C, len(src.Pix), src.W*src.H*src.C)
	}
	return nil
}

// resampler holds the scratch memory of region resizes, reused across images so that the
// hot path does not allocate once the buffers have grown to the working size.
type resampler struct {
	tmp []byte  // horizontal pass output: the source rows the kept output rows need
	acc []int32 // vertical pass accumulators: one output row
	tab []int32 // coefficient table of the AVX2 horizontal pass
}

// coeffsSplit16 reports whether every coefficient splits into the two 16-bit halves the AVX2
// horizontal pass multiplies (|c| < 2^26; real weights stay below about 2^23).
func (w *Weights) coeffsSplit16() bool {
	for _, c := range w.Coeffs {
		if c < -(1<<26) || c >= 1<<26 {
			return false
		}
	}
	return true
}

func growBytes(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// window is a source image of which only part may be present: img holds the pixels
// [x, x+img.W) × [y, y+img.H) of a fullW×fullH image.
type window struct {
	img          Image
	x, y         int
	fullW, fullH int
}

func wholeImage(img Image) window { return window{img: img, fullW: img.W, fullH: img.H} }

// sourceSpan returns the source range [lo, hi) that outputs [o0, o1) of w read.
func sourceSpan(w *Weights, o0, o1 int) (lo, hi int) {
	lo, hi = w.InSize, 0
	for o := o0; o < o1; o++ {
		s, n := int(w.Bounds[2*o]), int(w.Bounds[2*o+1])
		if n == 0 {
			continue
		}
		lo, hi = min(lo, s), max(hi, s+n)
	}
	if hi <= lo { // every output maps outside the source (NEAREST only): black
		return 0, 0
	}
	return lo, hi
}

// resizeRegion writes the rectangle [x0,x1)×[y0,y1) of "the full source resized to rw×rh
// with f" into dst, whose rows are dstStride bytes apart (the rectangle's first pixel at
// dst[0]). Each output pixel depends only on its own row's and column's weights, so the
// rectangle is byte-identical to the same pixels of the full resize; only the source rows
// under the kept rows' filter support go through the horizontal pass, and only the kept
// columns are computed. The rectangle must lie inside rw×rh and be non-empty; the window
// must be valid and cover the source span of the rectangle.
func (r *resampler) resizeRegion(dst []byte, dstStride int, src window, rw, rh int, f Filter, x0, y0, x1, y1 int) {
	C := src.img.C
	rowBytes := (x1 - x0) * C
	srcStride := src.img.W * C
	pix := src.img.Pix
	if rw == src.fullW && rh == src.fullH {
		// Image.resize returns a copy when the size is unchanged.
		for y := y0; y < y1; y++ {
			o := (y-src.y)*srcStride + (x0-src.x)*C
			copy(dst[(y-y0)*dstStride:(y-y0)*dstStride+rowBytes], pix[o:o+rowBytes])
		}
		return
	}
	wx := CachedWeights(src.fullW, rw, f)
	wy := CachedWeights(src.fullH, rh, f)

	// Horizontal pass into tmp (or a view of src when Pillow skips it), over the source rows
	// the kept output rows read.
	var mid []byte
	var midStride, midOff int // row y of the intermediate starts at mid[(y-midOff)*midStride]
	if wx.Identity {
		mid, midStride, midOff = pix[(x0-src.x)*C:], srcStride, src.y
	} else {
		ry0, ry1 := y0, y1
		if !wy.Identity {
			ry0, ry1 = sourceSpan(wy, y0, y1)
		}
		r.tmp = growBytes(r.tmp, (ry1-ry0)*rowBytes)
		avx := C == 3 && ry1 > ry0 &&
			r.hrgbAVX2(r.tmp, rowBytes, pix[(ry0-src.y)*srcStride:], srcStride, srcStride, ry1-ry0, wx, x0, x1, src.x)
		for y := ry0; y < ry1 && !avx; y++ {
			o := (y - src.y) * srcStride
			in := pix[o : o+srcStride]
			out := r.tmp[(y-ry0)*rowBytes : (y-ry0+1)*rowBytes]
			horizontal(out, in, wx, x0, x1, C, src.x)
		}
		mid, midStride, midOff = r.tmp, rowBytes, ry0
	}

	// Vertical pass.
	if wy.Identity {
		for y := y0; y < y1; y++ {
			o := (y - midOff) * midStride
			copy(dst[(y-y0)*dstStride:(y-y0)*dstStride+rowBytes], mid[o:o+rowBytes])
		}
		return
	}
	if cap(r.acc) < rowBytes {
		r.acc = make([]int32, rowBytes)
	}
	if r.vertAVX2(dst, dstStride, mid, midStride, midOff, rowBytes, y0, y1, wy) {
		return
	}
	acc := r.acc[:rowBytes]
	for y := y0; y < y1; y++ {
		s, n := int(wy.Bounds[2*y]), int(wy.Bounds[2*y+1])
		k := wy.Coeffs[y*wy.KSize : y*wy.KSize+n]
		out := dst[(y-y0)*dstStride : (y-y0)*dstStride+rowBytes]
		vertical(out, acc, mid, midStride, s-midOff, k)
	}
}

// horizontal computes output columns [x0,x1) of one row; in holds source samples from
// index off on.
func horizontal(out, in []byte, w *Weights, x0, x1, C, off int) {
	ks := w.KSize
	const half = int32(1) << (PrecisionBits - 1)
	bounds := w.Bounds[2*x0 : 2*x1]
	switch C {
	case 3:
		out = out[:(x1-x0)*3]
		if horizontalRGBFixed(out, in, w, x0, off) {
			return
		}
		for j := 0; j < x1-x0; j++ {
			s, n := int(bounds[2*j])-off, int(bounds[2*j+1])
			if n == 0 {
				s = 0 // no taps (NEAREST outside the source): the sum is 0
			}
			k := w.Coeffs[(x0+j)*ks : (x0+j)*ks+n]
			p := in[s*3 : (s+n)*3]
			a0, a1, a2 := half, half, half
			for len(k) >= 2 {
				c := (*[2]int32)(k)
				q := (*[6]byte)(p)
				a0 += int32(q[0])*c[0] + int32(q[3])*c[1]
				a1 += int32(q[1])*c[0] + int32(q[4])*c[1]
				a2 += int32(q[2])*c[0] + int32(q[5])*c[1]
				k, p = k[2:], p[6:]
			}
			if len(k) == 1 {
				c := k[0]
				q := (*[3]byte)(p)
				a0 += int32(q[0]) * c
				a1 += int32(q[1]) * c
				a2 += int32(q[2]) * c
			}
			o := (*[3]byte)(out[3*j:])
			o[0] = clip8(a0 >> PrecisionBits)
			o[1] = clip8(a1 >> PrecisionBits)
			o[2] = clip8(a2 >> PrecisionBits)
		}
	case 1:
		out = out[:x1-x0]
		for j := range out {
			s, n := int(bounds[2*j])-off, int(bounds[2*j+1])
			if n == 0 {
				s = 0
			}
			k := w.Coeffs[(x0+j)*ks : (x0+j)*ks+n]
			p := in[s : s+n]
			p = p[:len(k)]
			a := half
			for t, c := range k {
				a += int32(p[t]) * c
			}
			out[j] = clip8(a >> PrecisionBits)
		}
	default:
		for x := x0; x < x1; x++ {
			s, n := int(w.Bounds[2*x])-off, int(w.Bounds[2*x+1])
			for ch := 0; ch < C; ch++ {
				acc := half
				for t, c := range w.Coeffs[x*ks : x*ks+n] {
					acc += int32(in[(s+t)*C+ch]) * c
				}
				out[(x-x0)*C+ch] = clip8(acc >> PrecisionBits)
			}
		}
	}
}

// horizontalRGBPixel computes output pixel x of an RGB row by the per-tap loop.
func horizontalRGBPixel(o, in []byte, w *Weights, x, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	s, n := int(w.Bounds[2*x])-off, int(w.Bounds[2*x+1])
	if n == 0 {
		s = 0
	}
	a0, a1, a2 := half, half, half
	for t, c := range w.Coeffs[x*w.KSize : x*w.KSize+n] {
		q := (*[3]byte)(in[3*(s+t):])
		a0 += int32(q[0]) * c
		a1 += int32(q[1]) * c
		a2 += int32(q[2]) * c
	}
	o[0] = clip8(a0 >> PrecisionBits)
	o[1] = clip8(a1 >> PrecisionBits)
	o[2] = clip8(a2 >> PrecisionBits)
}

// vertical computes one output row from the intermediate rows s, s+1, ... (row i at
// mid[i*stride]) with coefficients k, accumulating whole rows, four taps at a time (integer
// sums are order-independent, so this equals Pillow's per-pixel loop).
func vertical(out []byte, acc []int32, mid []byte, stride, s int, k []int32) {
	const half = int32(1) << (PrecisionBits - 1)
	n := len(out)
	acc = acc[:n]
	row := func(t int) []byte { return mid[(s+t)*stride : (s+t)*stride+n] }
	t := 0
	switch {
	case len(k) >= 2:
		r0, r1 := row(0), row(1)
		r0, r1 = r0[:len(acc)], r1[:len(acc)]
		c0, c1 := k[0], k[1]
		for i := range acc {
			acc[i] = half + int32(r0[i])*c0 + int32(r1[i])*c1
		}
		t = 2
	case len(k) == 1:
		r0 := row(0)[:len(acc)]
		c0 := k[0]
		for i := range acc {
			acc[i] = half + int32(r0[i])*c0
		}
		t = 1
	default:
		for i := range acc {
			acc[i] = half
		}
	}
	for ; t+4 <= len(k); t += 4 {
		r0, r1, r2, r3 := row(t), row(t+1), row(t+2), row(t+3)
		r0, r1, r2, r3 = r0[:len(acc)], r1[:len(acc)], r2[:len(acc)], r3[:len(acc)]
		c0, c1, c2, c3 := k[t], k[t+1], k[t+2], k[t+3]
		for i := range acc {
			acc[i] += int32(r0[i])*c0 + int32(r1[i])*c1 + int32(r2[i])*c2 + int32(r3[i])*c3
		}
	}
	for ; t+2 <= len(k); t += 2 {
		r0, r1 := row(t), row(t+1)
		r0, r1 = r0[:len(acc)], r1[:len(acc)]
		c0, c1 := k[t], k[t+1]
		for i := range acc {
			acc[i] += int32(r0[i])*c0 + int32(r1[i])*c1
		}
	}
	if t < len(k) {
		r0 := row(t)[:len(acc)]
		c0 := k[t]
		for i := range acc {
			acc[i] += int32(r0[i]) * c0
		}
	}
	out = out[:n]
	for i, a := range acc {
		out[i] = clip8(a >> PrecisionBits)
	}
}
