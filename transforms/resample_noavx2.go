//go:build !cgo || !amd64 || purego

package transforms

// Without cgo, off amd64, or built with the purego tag (go test -tags purego: the portable
// loops tested on a machine that would otherwise take the AVX2 passes) the Go loops do every
// pass.

const simdPrecision = PrecisionBits

var useAVX2 = false

func (r *resampler) hrgbAVX2(out []byte, outStride int, in []byte, inStride, inLen, rows int, w *Weights, x0, x1, off int) bool {
	return false
}

func (r *resampler) vertAVX2(out []byte, outStride int, mid []byte, midStride, midOff, width, y0, y1 int, w *Weights) bool {
	return false
}
