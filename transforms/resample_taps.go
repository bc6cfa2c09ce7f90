package transforms

// Unrolled horizontal kernels for RGB rows, one per tap count T = Weights.MaxTaps from 1 to
// 12: every upscale, and downscales by up to about 5x with bilinear, 2.7x with bicubic and
// 1.8x with lanczos. Each output pixel reads T source pixels from its first tap and T
// coefficients; the coefficients past a pixel's own tap count are zero (see Weights), so they
// add nothing and the sums are exactly those of the per-tap loop. Pixels whose T source
// pixels are not all inside the row (near the right edge, or outside a decoded window) use
// the per-tap loop. The functions are written out from one pattern; keep them identical.

func horizontalRGBFixed(out, in []byte, w *Weights, x0, off int) bool {
	switch w.MaxTaps {
	case 1:
		horizontalRGB1(out, in, w, x0, off)
	case 2:
		horizontalRGB2(out, in, w, x0, off)
	case 3:
		horizontalRGB3(out, in, w, x0, off)
	case 4:
		horizontalRGB4(out, in, w, x0, off)
	case 5:
		horizontalRGB5(out, in, w, x0, off)
	case 6:
		horizontalRGB6(out, in, w, x0, off)
	case 7:
		horizontalRGB7(out, in, w, x0, off)
	case 8:
		horizontalRGB8(out, in, w, x0, off)
	case 9:
		horizontalRGB9(out, in, w, x0, off)
	case 10:
		horizontalRGB10(out, in, w, x0, off)
	case 11:
		horizontalRGB11(out, in, w, x0, off)
	case 12:
		horizontalRGB12(out, in, w, x0, off)
	default:
		return false
	}
	return true
}

func horizontalRGB1(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-1
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[3]byte)(in[3*s:])
		c := (*[1]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0]
		a1 := half + int32(q[1])*c[0]
		a2 := half + int32(q[2])*c[0]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB2(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-2
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[6]byte)(in[3*s:])
		c := (*[2]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB3(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-3
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[9]byte)(in[3*s:])
		c := (*[3]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1] + int32(q[6])*c[2]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1] + int32(q[7])*c[2]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1] + int32(q[8])*c[2]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB4(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-4
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[12]byte)(in[3*s:])
		c := (*[4]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1] + int32(q[6])*c[2] + int32(q[9])*c[3]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1] + int32(q[7])*c[2] + int32(q[10])*c[3]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1] + int32(q[8])*c[2] + int32(q[11])*c[3]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB5(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-5
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[15]byte)(in[3*s:])
		c := (*[5]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1] + int32(q[6])*c[2] + int32(q[9])*c[3] + int32(q[12])*c[4]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1] + int32(q[7])*c[2] + int32(q[10])*c[3] + int32(q[13])*c[4]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1] + int32(q[8])*c[2] + int32(q[11])*c[3] + int32(q[14])*c[4]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB6(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-6
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[18]byte)(in[3*s:])
		c := (*[6]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1] + int32(q[6])*c[2] + int32(q[9])*c[3] + int32(q[12])*c[4] + int32(q[15])*c[5]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1] + int32(q[7])*c[2] + int32(q[10])*c[3] + int32(q[13])*c[4] + int32(q[16])*c[5]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1] + int32(q[8])*c[2] + int32(q[11])*c[3] + int32(q[14])*c[4] + int32(q[17])*c[5]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB7(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-7
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[21]byte)(in[3*s:])
		c := (*[7]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1] + int32(q[6])*c[2] + int32(q[9])*c[3] + int32(q[12])*c[4] + int32(q[15])*c[5] + int32(q[18])*c[6]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1] + int32(q[7])*c[2] + int32(q[10])*c[3] + int32(q[13])*c[4] + int32(q[16])*c[5] + int32(q[19])*c[6]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1] + int32(q[8])*c[2] + int32(q[11])*c[3] + int32(q[14])*c[4] + int32(q[17])*c[5] + int32(q[20])*c[6]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB8(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-8
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[24]byte)(in[3*s:])
		c := (*[8]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1] + int32(q[6])*c[2] + int32(q[9])*c[3] + int32(q[12])*c[4] + int32(q[15])*c[5] + int32(q[18])*c[6] + int32(q[21])*c[7]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1] + int32(q[7])*c[2] + int32(q[10])*c[3] + int32(q[13])*c[4] + int32(q[16])*c[5] + int32(q[19])*c[6] + int32(q[22])*c[7]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1] + int32(q[8])*c[2] + int32(q[11])*c[3] + int32(q[14])*c[4] + int32(q[17])*c[5] + int32(q[20])*c[6] + int32(q[23])*c[7]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB9(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-9
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[27]byte)(in[3*s:])
		c := (*[9]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1] + int32(q[6])*c[2] + int32(q[9])*c[3] + int32(q[12])*c[4] + int32(q[15])*c[5] + int32(q[18])*c[6] + int32(q[21])*c[7] + int32(q[24])*c[8]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1] + int32(q[7])*c[2] + int32(q[10])*c[3] + int32(q[13])*c[4] + int32(q[16])*c[5] + int32(q[19])*c[6] + int32(q[22])*c[7] + int32(q[25])*c[8]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1] + int32(q[8])*c[2] + int32(q[11])*c[3] + int32(q[14])*c[4] + int32(q[17])*c[5] + int32(q[20])*c[6] + int32(q[23])*c[7] + int32(q[26])*c[8]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB10(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-10
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[30]byte)(in[3*s:])
		c := (*[10]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1] + int32(q[6])*c[2] + int32(q[9])*c[3] + int32(q[12])*c[4] + int32(q[15])*c[5] + int32(q[18])*c[6] + int32(q[21])*c[7] + int32(q[24])*c[8] + int32(q[27])*c[9]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1] + int32(q[7])*c[2] + int32(q[10])*c[3] + int32(q[13])*c[4] + int32(q[16])*c[5] + int32(q[19])*c[6] + int32(q[22])*c[7] + int32(q[25])*c[8] + int32(q[28])*c[9]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1] + int32(q[8])*c[2] + int32(q[11])*c[3] + int32(q[14])*c[4] + int32(q[17])*c[5] + int32(q[20])*c[6] + int32(q[23])*c[7] + int32(q[26])*c[8] + int32(q[29])*c[9]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB11(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-11
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[33]byte)(in[3*s:])
		c := (*[11]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1] + int32(q[6])*c[2] + int32(q[9])*c[3] + int32(q[12])*c[4] + int32(q[15])*c[5] + int32(q[18])*c[6] + int32(q[21])*c[7] + int32(q[24])*c[8] + int32(q[27])*c[9] + int32(q[30])*c[10]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1] + int32(q[7])*c[2] + int32(q[10])*c[3] + int32(q[13])*c[4] + int32(q[16])*c[5] + int32(q[19])*c[6] + int32(q[22])*c[7] + int32(q[25])*c[8] + int32(q[28])*c[9] + int32(q[31])*c[10]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1] + int32(q[8])*c[2] + int32(q[11])*c[3] + int32(q[14])*c[4] + int32(q[17])*c[5] + int32(q[20])*c[6] + int32(q[23])*c[7] + int32(q[26])*c[8] + int32(q[29])*c[9] + int32(q[32])*c[10]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}

func horizontalRGB12(out, in []byte, w *Weights, x0, off int) {
	const half = int32(1) << (PrecisionBits - 1)
	ks, n, limit := w.KSize, len(out)/3, len(in)/3-12
	bounds := w.Bounds[2*x0 : 2*(x0+n)]
	for j := 0; j < n; j++ {
		s := int(bounds[2*j]) - off
		if s < 0 || s > limit {
			horizontalRGBPixel(out[3*j:3*j+3], in, w, x0+j, off)
			continue
		}
		q := (*[36]byte)(in[3*s:])
		c := (*[12]int32)(w.Coeffs[(x0+j)*ks:])
		o := (*[3]byte)(out[3*j:])
		a0 := half + int32(q[0])*c[0] + int32(q[3])*c[1] + int32(q[6])*c[2] + int32(q[9])*c[3] + int32(q[12])*c[4] + int32(q[15])*c[5] + int32(q[18])*c[6] + int32(q[21])*c[7] + int32(q[24])*c[8] + int32(q[27])*c[9] + int32(q[30])*c[10] + int32(q[33])*c[11]
		a1 := half + int32(q[1])*c[0] + int32(q[4])*c[1] + int32(q[7])*c[2] + int32(q[10])*c[3] + int32(q[13])*c[4] + int32(q[16])*c[5] + int32(q[19])*c[6] + int32(q[22])*c[7] + int32(q[25])*c[8] + int32(q[28])*c[9] + int32(q[31])*c[10] + int32(q[34])*c[11]
		a2 := half + int32(q[2])*c[0] + int32(q[5])*c[1] + int32(q[8])*c[2] + int32(q[11])*c[3] + int32(q[14])*c[4] + int32(q[17])*c[5] + int32(q[20])*c[6] + int32(q[23])*c[7] + int32(q[26])*c[8] + int32(q[29])*c[9] + int32(q[32])*c[10] + int32(q[35])*c[11]
		o[0] = clip8(a0 >> PrecisionBits)
		o[1] = clip8(a1 >> PrecisionBits)
		o[2] = clip8(a2 >> PrecisionBits)
	}
}
