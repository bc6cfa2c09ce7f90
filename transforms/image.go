package transforms

import (
	"fmt"
	"image"
	"math"

	"github.com/packer-dev/packer/shard"
)

// Image is an 8-bit image with interleaved channels: C is 1 (grey) or 3 (RGB), and row y
// occupies Pix[y*W*C : (y+1)*W*C].
type Image struct {
	W, H, C int
	Pix     []byte
}

// Spec is the full, serialisable transform chain applied to every frame: resize, crop, layout,
// element type and normalisation, in that order (torchvision's Resize, CenterCrop, ToTensor,
// Normalize). The zero value is the identity in HWC uint8.
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

// Normalized returns the spec with defaults filled in: layout hwc, dtype uint8, and filter
// bilinear (torchvision's default) when the spec resizes.
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

// Identity reports whether the spec leaves frames unchanged: no resize or crop, uint8 HWC,
// no normalisation. Worker.Apply then copies the source pixels, so a caller may decode
// straight into the destination instead.
func (s Spec) Identity() bool {
	s = s.Normalized()
	return s.Resize == 0 && s.Width == 0 && s.Height == 0 && s.CropW == 0 && s.CropH == 0 &&
		s.Layout == "hwc" && s.DType == "uint8" && len(s.Mean) == 0 && len(s.Std) == 0
}

// Validate reports whether the spec is usable.
func (s Spec) Validate() error {
	s = s.Normalized()
	if s.Layout != "hwc" && s.Layout != "chw" {
		return fmt.Errorf("transforms: unknown layout %q (want hwc or chw)", s.Layout)
	}
	switch s.DType {
	case "uint8", "float16", "float32":
	default:
		return fmt.Errorf("transforms: unknown dtype %q (want uint8, float16 or float32)", s.DType)
	}
	if s.Filter != "" {
		if _, err := ParseFilter(s.Filter); err != nil {
			return err
		}
	}
	if s.Resize < 0 || s.Width < 0 || s.Height < 0 || s.MaxSize < 0 || s.CropW < 0 || s.CropH < 0 {
		return fmt.Errorf("transforms: sizes must not be negative")
	}
	if s.Resize > 0 && (s.Width > 0 || s.Height > 0) {
		return fmt.Errorf("transforms: resize %d and size %dx%d are exclusive", s.Resize, s.Width, s.Height)
	}
	if (s.Width > 0) != (s.Height > 0) {
		return fmt.Errorf("transforms: size needs both width and height, got %dx%d", s.Width, s.Height)
	}
	if s.MaxSize > 0 {
		if s.Resize == 0 {
			return fmt.Errorf("transforms: max size applies only with resize N (torchvision refuses it with an exact size)")
		}
		if s.MaxSize <= s.Resize {
			return fmt.Errorf("transforms: max size %d must be larger than resize %d", s.MaxSize, s.Resize)
		}
	}
	if (s.CropW > 0) != (s.CropH > 0) {
		return fmt.Errorf("transforms: crop needs both width and height, got %dx%d", s.CropW, s.CropH)
	}
	for _, v := range []int{s.Resize, s.Width, s.Height, s.MaxSize, s.CropW, s.CropH} {
		if v > MaxResampleSize {
			return fmt.Errorf("transforms: size %d is too large (max %d)", v, MaxResampleSize)
		}
	}
	if len(s.Mean) != len(s.Std) {
		return fmt.Errorf("transforms: %d mean values but %d std values", len(s.Mean), len(s.Std))
	}
	if len(s.Mean) > 0 {
		if s.DType == "uint8" {
			return fmt.Errorf("transforms: mean/std normalisation needs a float dtype (float16 or float32)")
		}
		if len(s.Mean) != 1 && len(s.Mean) != 3 {
			return fmt.Errorf("transforms: mean/std need 1 or 3 values, got %d", len(s.Mean))
		}
		for i := range s.Mean {
			if float32(s.Std[i]) == 0 || math.IsNaN(s.Std[i]) || math.IsInf(s.Std[i], 0) ||
				math.IsNaN(s.Mean[i]) || math.IsInf(s.Mean[i], 0) {
				return fmt.Errorf("transforms: mean %v / std %v: std must be finite and non-zero", s.Mean[i], s.Std[i])
			}
		}
	}
	return nil
}

// filter returns the spec's filter (bilinear when unset).
func (s Spec) filter() Filter {
	f, err := ParseFilter(s.Filter)
	if err != nil {
		return Bilinear
	}
	return f
}

// ResizedSize returns the size a w×h source has after the spec's resize step (the source size
// when the spec does not resize).
func (s Spec) ResizedSize(w, h int) (rw, rh int, err error) {
	switch {
	case s.Resize > 0:
		return ResizeOutputSize(w, h, s.Resize, s.MaxSize)
	case s.Width > 0:
		return s.Width, s.Height, nil
	}
	return w, h, nil
}

// FrameSize returns the width and height of the output frame for a w×h source: the crop
// size when the spec crops, otherwise the resized size.
func (s Spec) FrameSize(w, h int) (fw, fh int, err error) {
	g, err := s.geometry(w, h)
	return g.ow, g.oh, err
}

// FixedSize reports the output frame size when it does not depend on the source size (the
// spec crops, or resizes to an exact size).
func (s Spec) FixedSize() (w, h int, ok bool) {
	switch {
	case s.CropW > 0:
		return s.CropW, s.CropH, true
	case s.Width > 0:
		return s.Width, s.Height, true
	}
	return 0, 0, false
}

func (s Spec) geometry(w, h int) (geometry, error) {
	if w < 1 || h < 1 {
		return geometry{}, fmt.Errorf("transforms: empty image %dx%d", w, h)
	}
	rw, rh, err := s.ResizedSize(w, h)
	if err != nil {
		return geometry{}, err
	}
	g := geometry{rw: rw, rh: rh, ow: rw, oh: rh}
	if s.CropW > 0 {
		g.ow, g.oh = s.CropW, s.CropH
		g.ox, g.oy = CenterCropOffset(rw, s.CropW), CenterCropOffset(rh, s.CropH)
	}
	return g, nil
}

// Plan is the geometry and weights of one Spec for one source size: everything another
// implementation of Apply (the GPU kernels) needs to produce the same bytes.
//
// Output pixel (x, y), 0 <= x < OutW, 0 <= y < OutH, is pixel (x+OffX, y+OffY) of the source
// resized to ResizedW×ResizedH with weights X then Y (horizontal pass into an 8-bit
// intermediate, then vertical; see [Weights]), or 0 in every channel where that falls
// outside the resized image (CenterCrop's padding). When the spec does not resize, X and Y
// are identity weights.
type Plan struct {
	SrcW, SrcH         int
	ResizedW, ResizedH int
	OutW, OutH         int
	OffX, OffY         int
	X, Y               *Weights // shared (cached): do not modify
}

// Visible returns the output rectangle [x0,x1)×[y0,y1) that is not padding.
func (p Plan) Visible() (x0, y0, x1, y1 int) {
	g := geometry{rw: p.ResizedW, rh: p.ResizedH, ow: p.OutW, oh: p.OutH, ox: p.OffX, oy: p.OffY}
	return g.visible()
}

// SourceRect returns the source rectangle [x0,x1)×[y0,y1) that the output depends on: a
// decoder may skip everything else (see [Worker.ApplyWindow]). It is empty (x1 <= x0) only
// when no output pixel reads the source.
func (p Plan) SourceRect() (x0, y0, x1, y1 int) {
	g := geometry{rw: p.ResizedW, rh: p.ResizedH, ow: p.OutW, oh: p.OutH, ox: p.OffX, oy: p.OffY}
	return g.sourceRectWeights(p.X, p.Y)
}

// Region is the source rectangle Plan(w, h) reads, in the form DecodeFileRegion takes: an
// empty rectangle (decode everything) when the spec cannot be planned for that size, so that
// Apply then reports why.
func (s Spec) Region(w, h int) image.Rectangle {
	p, err := s.Plan(w, h)
	if err != nil {
		return image.Rectangle{}
	}
	x0, y0, x1, y1 := p.SourceRect()
	return image.Rect(x0, y0, x1, y1)
}

// Plan returns the plan for a w×h source.
func (s Spec) Plan(w, h int) (Plan, error) {
	s = s.Normalized()
	g, err := s.geometry(w, h)
	if err != nil {
		return Plan{}, err
	}
	f := s.filter()
	return Plan{SrcW: w, SrcH: h, ResizedW: g.rw, ResizedH: g.rh, OutW: g.ow, OutH: g.oh, OffX: g.ox, OffY: g.oy,
		X: CachedWeights(w, g.rw, f), Y: CachedWeights(h, g.rh, f)}, nil
}

// OutputSpec returns the spec of one transformed frame for a source image of w×h×c. When the
// size is unusable (a resize that would produce an empty image), the shape has a zero
// dimension, which shard.SampleSpec.Validate rejects and Apply reports as an error.
func (s Spec) OutputSpec(w, h, c int) shard.SampleSpec {
	s = s.Normalized()
	fw, fh, err := s.FrameSize(w, h)
	if err != nil {
		fw, fh = 0, 0
	}
	shape := []int{fh, fw, c}
	if s.Layout == "chw" {
		shape = []int{c, fh, fw}
	}
	return shard.SampleSpec{Shape: shape, DType: shard.DType(s.DType), Layout: s.Layout}
}

// Worker applies a Spec. A Worker holds scratch buffers and is not safe for concurrent use;
// give each goroutine its own. After the first images, Apply does not allocate (the
// resampling weights come from a shared cache, computed once per size pair).
type Worker struct {
	spec   Spec
	filter Filter
	rs     resampler
	frame  []byte     // 8-bit HWC frame when dst is not one
	luts   *frameLUTs // float outputs
}

// NewWorker returns a Worker for the spec, which must be valid.
func (s Spec) NewWorker() *Worker {
	s = s.Normalized()
	w := &Worker{spec: s, filter: s.filter()}
	if s.DType != "uint8" {
		w.luts = makeFrameLUTs(s.Mean, s.Std)
	}
	return w
}

// Apply transforms src into dst, which must be exactly OutputSpec(src.W, src.H, src.C).Size()
// bytes: resize (Pillow's Image.resize with the spec's filter), centre crop with zero padding
// (torchvision's CenterCrop), then layout and element type. Only the output pixels that
// survive the crop are computed; the bytes are those of resizing fully and cropping after.
func (w *Worker) Apply(src Image, dst []byte) error {
	return w.ApplyWindow(src, 0, 0, src.W, src.H, dst)
}

// ApplyWindow is Apply for a source of which only a window was decoded (a decoder that can
// skip scanlines or crop them): src holds the pixels [x, x+src.W) × [y, y+src.H) of a
// fullW×fullH image, and must cover Plan(fullW, fullH).SourceRect(). dst must be
// OutputSpec(fullW, fullH, src.C).Size() bytes. The result is byte-identical to Apply on the
// full image.
func (w *Worker) ApplyWindow(src Image, x, y, fullW, fullH int, dst []byte) error {
	if err := checkImage(src); err != nil {
		return err
	}
	s := &w.spec
	g, err := s.geometry(fullW, fullH)
	if err != nil {
		return err
	}
	if want := int64(g.ow) * int64(g.oh) * int64(src.C) * int64(shard.DType(s.DType).Size()); int64(len(dst)) != want {
		return fmt.Errorf("transforms: destination is %d bytes, want %d", len(dst), want)
	}
	if len(s.Mean) > 1 && len(s.Mean) != src.C {
		return fmt.Errorf("transforms: %d mean/std values for a %d-channel image", len(s.Mean), src.C)
	}
	x0, y0, x1, y1 := g.visible()
	if x != 0 || y != 0 || fullW != src.W || fullH != src.H {
		sx0, sy0, sx1, sy1 := g.sourceRect(w.filter, fullW, fullH)
		if x < 0 || y < 0 || x+src.W > fullW || y+src.H > fullH ||
			(sx1 > sx0 && (sx0 < x || sy0 < y || sx1 > x+src.W || sy1 > y+src.H)) {
			return fmt.Errorf("transforms: window %dx%d at (%d,%d) of %dx%d does not cover the source rectangle [%d,%d)x[%d,%d)",
				src.W, src.H, x, y, fullW, fullH, sx0, sx1, sy0, sy1)
		}
	}
	C := src.C
	frameBytes := g.ow * g.oh * C
	frame := dst
	direct := s.DType == "uint8" && s.Layout == "hwc"
	if !direct {
		w.frame = growBytes(w.frame, frameBytes)
		frame = w.frame
	}
	if g.padded() {
		clear(frame[:frameBytes])
	}
	if x1 > x0 && y1 > y0 {
		stride := g.ow * C
		win := window{img: src, x: x, y: y, fullW: fullW, fullH: fullH}
		w.rs.resizeRegion(frame[y0*stride+x0*C:], stride, win, g.rw, g.rh, w.filter,
			x0+g.ox, y0+g.oy, x1+g.ox, y1+g.oy)
	}
	if !direct {
		writeFrame(dst, frame, g.ow, g.oh, C, s.Layout == "chw", s.DType, w.luts)
	}
	return nil
}
