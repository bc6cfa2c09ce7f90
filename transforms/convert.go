package transforms

import (
	"encoding/binary"
	"math"
)

// Float16Bits returns the IEEE 754 binary16 encoding of f rounded to nearest, ties to even,
// as torch's Tensor.half() and numpy's astype(float16) convert: values beyond the largest
// half (65504) round to infinity unless they are within half a unit of it, small values
// become subnormal halves or signed zero, and NaNs stay (quiet) NaNs with the sign kept.
func Float16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased half exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 { // below half the smallest subnormal (2^-25): rounds to zero
			return sign
		}
		m := mant | 0x800000 // implicit bit; value = m * 2^(exp-150), unit = 2^-24
		shift := uint(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++ // may carry into the smallest normal (0x400): still the right encoding
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, up to infinity (0x7c00): correct
	}
	return sign | uint16(h)
}

// Float16ToFloat32 decodes an IEEE 754 binary16 value (exactly).
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// normLUT maps a pixel value to its float32 output for one channel:
// v = float32(p) / 255, then, with normalisation, (v - float32(mean)) / float32(std), every
// operation rounded to float32 (torchvision's ToTensor then Normalize on float32 tensors).
type normLUT [256]float32

func makeNormLUT(mean, std float64, normalize bool) normLUT {
	var l normLUT
	m, s := float32(mean), float32(std)
	for p := range l {
		v := float32(p) / 255
		if normalize {
			v = (v - m) / s
		}
		l[p] = v
	}
	return l
}

// frameLUTs holds the per-channel float tables of a Worker (up to 4 channels).
type frameLUTs struct {
	f32 [4]normLUT
	f16 [4][256]uint16
}

func makeFrameLUTs(mean, std []float64) *frameLUTs {
	l := new(frameLUTs)
	for ch := 0; ch < 4; ch++ {
		m, s := 0.0, 1.0
		if len(mean) > 0 {
			m, s = mean[min(ch, len(mean)-1)], std[min(ch, len(std)-1)]
		}
		l.f32[ch] = makeNormLUT(m, s, len(mean) > 0)
		for p, v := range l.f32[ch] {
			l.f16[ch][p] = Float16Bits(v)
		}
	}
	return l
}

// writeFrame converts an 8-bit HWC frame of w×h×c into dst in the given layout and dtype,
// little-endian for the float types.
func writeFrame(dst, frame []byte, w, h, c int, chw bool, dtype DType, luts *frameLUTs) {
	n := w * h
	frame = frame[:n*c]
	switch dtype {
	case Uint8:
		if !chw {
			copy(dst, frame)
			return
		}
		for ch := 0; ch < c; ch++ {
			plane := dst[ch*n : (ch+1)*n]
			src := frame[ch:]
			for i := range plane {
				plane[i] = src[i*c]
			}
		}
	case Float32:
		dst = dst[:4*n*c]
		if chw {
			for ch := 0; ch < c; ch++ {
				lut := &luts.f32[ch]
				plane := dst[4*ch*n : 4*(ch+1)*n]
				src := frame[ch:]
				for i := 0; i < n; i++ {
					binary.LittleEndian.PutUint32(plane[4*i:], math.Float32bits(lut[src[i*c]]))
				}
			}
			return
		}
		for ch := 0; ch < c; ch++ {
			lut := &luts.f32[ch]
			for i := ch; i < len(frame); i += c {
				binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(lut[frame[i]]))
			}
		}
	case Float16:
		dst = dst[:2*n*c]
		if chw {
			for ch := 0; ch < c; ch++ {
				lut := &luts.f16[ch]
				plane := dst[2*ch*n : 2*(ch+1)*n]
				src := frame[ch:]
				for i := 0; i < n; i++ {
					binary.LittleEndian.PutUint16(plane[2*i:], lut[src[i*c]])
				}
			}
			return
		}
		for ch := 0; ch < c; ch++ {
			lut := &luts.f16[ch]
			for i := ch; i < len(frame); i += c {
				binary.LittleEndian.PutUint16(dst[2*i:], lut[frame[i]])
			}
		}
	}
}
