package transforms

import (
	"fmt"

	"github.com/packer-dev/packer/shard"
)

// Image is an 8-bit image with interleaved channels: C is 1 (grey) or 3 (RGB), and row y
// occupies Pix[y*W*C : (y+1)*W*C].
type Image struct {
	W, H, C int
	Pix     []byte
}

// Spec is the full, serialisable transform chain applied to every frame: resize, crop, layout,
// element type and normalisation. The zero value is the identity in HWC uint8.
type Spec struct {
	Resize  int       `json:"resize,omitempty"`   // shorter side to Resize (torchvision Resize(N))
	Width   int       `json:"width,omitempty"`    // exact output size (--size WxH), with Height
	Height  int       `json:"height,omitempty"`   //
	MaxSize int       `json:"max_size,omitempty"` // longer side cap with Resize, as torchvision's max_size
	Filter  string    `json:"filter,omitempty"`   // nearest|box|bilinear|hamming|bicubic|lanczos
	CropW   int       `json:"crop_w,omitempty"`   // centre crop (torchvision CenterCrop), with CropH
	CropH   int       `json:"crop_h,omitempty"`   //
	Layout  string    `json:"layout"`             // "hwc" or "chw"
	DType   string    `json:"dtype"`              // "uint8", "float16" or "float32"
	Mean    []float64 `json:"mean,omitempty"`     // per-channel mean (on the 0..1 scale)
	Std     []float64 `json:"std,omitempty"`      // per-channel std
	Fast    bool      `json:"fast,omitempty"`     // allow reduced-scale JPEG decoding
}

// Normalized returns the spec with defaults filled in.
func (s Spec) Normalized() Spec {
	if s.Layout == "" {
		s.Layout = "hwc"
	}
	if s.DType == "" {
		s.DType = "uint8"
	}
	if s.Filter == "" && (s.Resize > 0 || s.Width > 0) {
		s.Filter = "bilinear"
	}
	return s
}

// Validate reports whether the spec is usable.
func (s Spec) Validate() error {
	s = s.Normalized()
	if s.Layout != "hwc" && s.Layout != "chw" {
		return fmt.Errorf("transforms: unknown layout %q (want hwc or chw)", s.Layout)
	}
	if shard.DType(s.DType).Size() == 0 {
		return fmt.Errorf("transforms: unknown dtype %q (want uint8, float16 or float32)", s.DType)
	}
	if s.Resize > 0 || s.Width > 0 || s.CropW > 0 {
		return fmt.Errorf("transforms: resize and crop are not implemented yet")
	}
	if s.DType != "uint8" {
		return fmt.Errorf("transforms: dtype %s is not implemented yet", s.DType)
	}
	return nil
}

// OutputSpec returns the spec of one transformed frame for a source image of w×h×c.
func (s Spec) OutputSpec(w, h, c int) shard.SampleSpec {
	s = s.Normalized()
	shape := []int{h, w, c}
	if s.Layout == "chw" {
		shape = []int{c, h, w}
	}
	return shard.SampleSpec{Shape: shape, DType: shard.DType(s.DType), Layout: s.Layout}
}

// Worker applies a Spec. A Worker holds scratch buffers and is not safe for concurrent use;
// give each goroutine its own.
type Worker struct {
	spec Spec
}

// NewWorker returns a Worker for the spec, which must be valid.
func (s Spec) NewWorker() *Worker { return &Worker{spec: s.Normalized()} }

// Apply transforms src into dst, which must be exactly OutputSpec(src.W, src.H, src.C).Size() bytes.
func (w *Worker) Apply(src Image, dst []byte) error {
	out := w.spec.OutputSpec(src.W, src.H, src.C)
	if int64(len(dst)) != out.Size() {
		return fmt.Errorf("transforms: destination is %d bytes, want %d", len(dst), out.Size())
	}
	if w.spec.Layout == "chw" {
		plane := src.W * src.H
		for i := 0; i < plane; i++ {
			for ch := 0; ch < src.C; ch++ {
				dst[ch*plane+i] = src.Pix[i*src.C+ch]
			}
		}
		return nil
	}
	copy(dst, src.Pix)
	return nil
}
