//go:build !cgo

package transforms

import (
	"fmt"
	"image"
)

// Without cgo there is no libjpeg-turbo, and no other JPEG decoder gives Pillow's pixels:
// JPEG files are refused rather than decoded differently.

type jpegHeader struct {
	w, h, comps int
	maxH, maxV  int
}

const jpegCgo = false

func jpegDecodeHeader(data []byte) (jpegHeader, error) {
	return jpegHeader{}, fmt.Errorf("%w: jpeg: this packer was built without cgo (libjpeg-turbo)", ErrUnsupported)
}

func jpegDecode(data []byte, denom int, s *DecodeScratch) (Image, error) {
	return Image{}, fmt.Errorf("%w: jpeg: this packer was built without cgo (libjpeg-turbo)", ErrUnsupported)
}

func jpegDecodeRegion(data []byte, denom int, r image.Rectangle, s *DecodeScratch) (Image, int, error) {
	return Image{}, 0, fmt.Errorf("%w: jpeg: this packer was built without cgo (libjpeg-turbo)", ErrUnsupported)
}

// cgoEnabled reports whether this build uses cgo (libjpeg-turbo, the AVX2 resize passes).
const cgoEnabled = false
