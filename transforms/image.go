package transforms

import (
	"fmt"
	"image"

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
// Normalize). The zero value is the identity in HWC uint8. A Spec is compiled (Spec.Compile)
// before anything applies it; its JSON form is the manifest's "transform".
type Spec struct {
	Resize  int       `json:"resize,omitempty"`   // shorter side to Resize (torchvision Resize(N))
	Width   int       `json:"width,omitempty"`    // exact output size (--size WxH), with Height
	Height  int       `json:"height,omitempty"`   //
	MaxSize int       `json:"max_size,omitempty"` // longer side cap with Resize, as torchvision's max_size
	Filter  Filter    `json:"filter,omitempty"`   // nearest|box|bilinear|hamming|bicubic|lanczos; zero: bilinear when resizing
	CropW   int       `json:"crop_w,omitempty"`   // centre crop (torchvision CenterCrop), with CropH
	CropH   int       `json:"crop_h,omitempty"`   //
	Layout  Layout    `json:"layout"`             // "hwc" (the zero value) or "chw"
	DType   DType     `json:"dtype"`              // "uint8" (the zero value), "float16" or "float32"
	Mean    []float64 `json:"mean,omitempty"`     // per-channel mean (on the 0..1 scale)
	Std     []float64 `json:"std,omitempty"`      // per-channel std
	Fast    bool      `json:"fast,omitempty"`     // allow reduced-scale JPEG decoding
}

// Identity reports whether the transform leaves frames unchanged: no resize or crop, uint8
// HWC, no normalisation. Worker.Apply then copies the source pixels, so a caller may decode
// straight into the destination instead.
func (c Compiled) Identity() bool {
	s := &c.s
	return s.Resize == 0 && s.Width == 0 && s.Height == 0 && s.CropW == 0 && s.CropH == 0 &&
		s.Layout == HWC && s.DType == Uint8 && len(s.Mean) == 0 && len(s.Std) == 0
}

// ResizedSize returns the size a w×h source has after the spec's resize step (the source size
// when the spec does not resize).
func (c Compiled) ResizedSize(w, h int) (rw, rh int, err error) {
	s := &c.s
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
func (c Compiled) FrameSize(w, h int) (fw, fh int, err error) {
	g, err := c.geometry(w, h)
	return g.ow, g.oh, err
}

// FixedSize reports the output frame size when it does not depend on the source size (the
// spec crops, or resizes to an exact size).
func (c Compiled) FixedSize() (w, h int, ok bool) {
	s := &c.s
	switch {
	case s.CropW > 0:
		return s.CropW, s.CropH, true
	case s.Width > 0:
		return s.Width, s.Height, true
	}
	return 0, 0, false
}

func (c Compiled) geometry(w, h int) (geometry, error) {
	s := &c.s
	if w < 1 || h < 1 {
		return geometry{}, fmt.Errorf("transforms: empty image %dx%d", w, h)
	}
	rw, rh, err := c.ResizedSize(w, h)
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
func (c Compiled) Region(w, h int) image.Rectangle {
	p, err := c.Plan(w, h)
	if err != nil {
		return image.Rectangle{}
	}
	x0, y0, x1, y1 := p.SourceRect()
	return image.Rect(x0, y0, x1, y1)
}

// Plan returns the plan for a w×h source.
func (c Compiled) Plan(w, h int) (Plan, error) {
	g, err := c.geometry(w, h)
	if err != nil {
		return Plan{}, err
	}
	f := c.ResampleFilter()
	return Plan{SrcW: w, SrcH: h, ResizedW: g.rw, ResizedH: g.rh, OutW: g.ow, OutH: g.oh, OffX: g.ox, OffY: g.oy,
		X: CachedWeights(w, g.rw, f), Y: CachedWeights(h, g.rh, f)}, nil
}

// OutputSpec returns the spec of one transformed frame for a source image of w×h×c. When the
// size is unusable (a resize that would produce an empty image), the shape has a zero
// dimension, which shard.SampleSpec.Validate rejects and Apply reports as an error.
func (t Compiled) OutputSpec(w, h, c int) shard.SampleSpec {
	fw, fh, err := t.FrameSize(w, h)
	if err != nil {
		fw, fh = 0, 0
	}
	shape := []int{fh, fw, c}
	if t.s.Layout == CHW {
		shape = []int{c, fh, fw}
	}
	return shard.SampleSpec{Shape: shape, DType: t.s.DType.Sample(), Layout: t.s.Layout.String()}
}

// Worker applies a compiled Spec. A Worker holds scratch buffers and is not safe for concurrent use;
// give each goroutine its own. After the first images, Apply does not allocate (the
// resampling weights come from a shared cache, computed once per size pair).
type Worker struct {
	t      Compiled
	filter Filter
	rs     resampler
	frame  []byte     // 8-bit HWC frame when dst is not one
	luts   *frameLUTs // float outputs
}

// NewWorker returns a Worker for the transform.
func (c Compiled) NewWorker() *Worker {
	w := &Worker{t: c, filter: c.ResampleFilter()}
	if c.s.DType != Uint8 {
		w.luts = makeFrameLUTs(c.s.Mean, c.s.Std)
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
	s := &w.t.s
	g, err := w.t.geometry(fullW, fullH)
	if err != nil {
		return err
	}
	if want := int64(g.ow) * int64(g.oh) * int64(src.C) * int64(s.DType.Size()); int64(len(dst)) != want {
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
	direct := s.DType == Uint8 && s.Layout == HWC
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
		writeFrame(dst, frame, g.ow, g.oh, C, s.Layout == CHW, s.DType, w.luts)
	}
	return nil
}
