package transforms

import (
	"fmt"
	"math"
	"slices"

	"github.com/packer-dev/packer/shard"
)

// Layout is the axis order of a transformed frame. The zero value is HWC. In text (flags,
// manifests) a layout is its name, "hwc" or "chw".
type Layout int

// The layouts of a frame.
const (
	HWC Layout = iota // height, width, channels (interleaved, as decoded)
	CHW               // channels, height, width (planar, as PyTorch's tensors)
)

var layoutNames = [...]string{HWC: "hwc", CHW: "chw"}

// String returns the layout's name, "hwc" or "chw".
func (l Layout) String() string {
	if l >= 0 && int(l) < len(layoutNames) {
		return layoutNames[l]
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// MarshalText returns the layout's name.
func (l Layout) MarshalText() ([]byte, error) {
	if l < 0 || int(l) >= len(layoutNames) {
		return nil, fmt.Errorf("transforms: invalid layout %d", int(l))
	}
	return []byte(l.String()), nil
}

// UnmarshalText sets l from a layout name, as ParseLayout; the empty text is HWC.
func (l *Layout) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*l = HWC
		return nil
	}
	v, err := ParseLayout(string(text))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// ParseLayout returns the layout named s (hwc|chw).
func ParseLayout(s string) (Layout, error) {
	for i, n := range layoutNames {
		if n == s {
			return Layout(i), nil
		}
	}
	return 0, fmt.Errorf("transforms: unknown layout %q (want hwc or chw)", s)
}

// DType is the element type of a transformed frame. The zero value is Uint8. In text (flags,
// manifests) a type is its name, as the shard format writes it: "uint8", "float16" or
// "float32".
type DType int

// The element types a transform produces.
const (
	Uint8   DType = iota // the 8-bit pixels themselves
	Float16              // IEEE binary16, little-endian (torch's Tensor.half())
	Float32              // IEEE binary32, little-endian
)

var dtypeNames = [...]shard.DType{Uint8: shard.Uint8, Float16: shard.Float16, Float32: shard.Float32}

// Sample returns the shard format's name of the type (shard.Uint8, ...).
func (d DType) Sample() shard.DType {
	if d >= 0 && int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return ""
}

// Size returns the size in bytes of one element, or 0 for an invalid type.
func (d DType) Size() int { return d.Sample().Size() }

// String returns the type's name, "uint8", "float16" or "float32".
func (d DType) String() string {
	if s := d.Sample(); s != "" {
		return string(s)
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// MarshalText returns the type's name.
func (d DType) MarshalText() ([]byte, error) {
	if d.Sample() == "" {
		return nil, fmt.Errorf("transforms: invalid dtype %d", int(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText sets d from a type name, as ParseDType; the empty text is Uint8.
func (d *DType) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*d = Uint8
		return nil
	}
	v, err := ParseDType(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseDType returns the type named s (uint8|float16|float32).
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if string(n) == s {
			return DType(i), nil
		}
	}
	return 0, fmt.Errorf("transforms: unknown dtype %q (want uint8, float16 or float32)", s)
}

// Compiled is a Spec that Compile has normalised and validated: the form of a transform that
// NewWorker, the GPU path (gpu.NewResizer) and the build engine (pipeline.Options) take, so
// that a transform is checked once, where it is parsed, and never again. It is immutable;
// copies share its mean and std. The zero Compiled is the identity in HWC uint8.
type Compiled struct {
	s Spec // normalised: Filter is set when the spec resizes
}

// Compile normalises the spec (the filter of a spec that resizes defaults to Bilinear,
// torchvision's default) and validates it: every error a transform can have is reported
// here, with the flag-level name of what is wrong.
func (s Spec) Compile() (Compiled, error) {
	if s.Filter == 0 && (s.Resize > 0 || s.Width > 0) {
		s.Filter = Bilinear
	}
	if err := s.validate(); err != nil {
		return Compiled{}, err
	}
	s.Mean, s.Std = slices.Clip(slices.Clone(s.Mean)), slices.Clip(slices.Clone(s.Std))
	return Compiled{s: s}, nil
}

// MustCompile is Compile for a spec written in the program (a test's table, say), as
// regexp.MustCompile: it panics if the spec is invalid. A spec from flags or a file goes
// through Compile.
func (s Spec) MustCompile() Compiled {
	c, err := s.Compile()
	if err != nil {
		panic(err)
	}
	return c
}

func (s Spec) validate() error {
	if s.Layout < 0 || int(s.Layout) >= len(layoutNames) {
		return fmt.Errorf("transforms: invalid layout %d (want hwc or chw)", int(s.Layout))
	}
	if s.DType.Sample() == "" {
		return fmt.Errorf("transforms: invalid dtype %d (want uint8, float16 or float32)", int(s.DType))
	}
	if s.Filter != 0 && !s.Filter.Valid() {
		return fmt.Errorf("transforms: invalid filter %d (want nearest, box, bilinear, hamming, bicubic or lanczos)", int(s.Filter))
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
		if s.DType == Uint8 {
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

// Spec returns the normalised spec, as a manifest records it. Its Mean and Std are the
// Compiled's own: do not modify them.
func (c Compiled) Spec() Spec { return c.s }

// Filter returns the resampling filter: the zero Filter when the spec does not resize.
func (c Compiled) Filter() Filter { return c.s.Filter }

// Layout returns the frame layout.
func (c Compiled) Layout() Layout { return c.s.Layout }

// DType returns the element type.
func (c Compiled) DType() DType { return c.s.DType }

// Fast reports whether the spec allows reduced-scale JPEG decoding (DraftSize).
func (c Compiled) Fast() bool { return c.s.Fast }

// ResampleFilter is the filter the resize passes run with: Filter, or Bilinear for a spec
// that does not resize, whose passes are identity copies that give the same bytes whatever
// the filter.
func (c Compiled) ResampleFilter() Filter {
	if c.s.Filter == 0 {
		return Bilinear
	}
	return c.s.Filter
}

// Conversion returns the transform's element conversion alone: no resize or crop, HWC, the
// same dtype, mean and std (what the GPU path's lookup tables are computed from). It needs no
// check of its own: it is valid whenever c is.
func (c Compiled) Conversion() Compiled {
	return Compiled{s: Spec{DType: c.s.DType, Mean: c.s.Mean, Std: c.s.Std}}
}
