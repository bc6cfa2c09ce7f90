package output

// Fields (shard.Field): what every output checks of a schema before a build decodes anything
// (Entry.CheckFields), and the layout of one field's values in a dataset of a fixed sample
// shape (FieldLayoutOf), which the columnar formats (npy, hdf5) store.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/packer-dev/packer/shard"
)

// ErrFieldNotHeld is wrapped by the error of Entry.CheckFields when an output cannot hold a
// field of the schema (or the schema itself is malformed): a usage error, found before
// anything is decoded.
var ErrFieldNotHeld = errors.New("field cannot be stored")

// CheckFields refuses a schema the format cannot hold, naming the field and the format: a
// malformed field (an unknown kind or dtype, an encoding other than raw, a -1 outside an
// ndarray's first dimension, an image field that is not uint8 with -1 for its height and
// width), then whatever the format's FieldCheck refuses. A format without FieldCheck holds no
// fields. An empty schema is always accepted.
func (e Entry) CheckFields(fields []shard.Field) error {
	if len(fields) == 0 {
		return nil
	}
	if e.FieldCheck == nil {
		return fmt.Errorf("--format %s: field %q: %w: the format stores no fields beside the sample and its labels", e.Name, fields[0].Name, ErrFieldNotHeld)
	}
	seen := map[string]bool{}
	for _, f := range fields {
		err := checkField(f)
		if err == nil && seen[f.Name] {
			err = errors.New("the name is used twice")
		}
		if err == nil {
			err = e.FieldCheck(f)
		}
		if err != nil {
			return fmt.Errorf("--format %s: field %q: %w: %v", e.Name, f.Name, ErrFieldNotHeld, err)
		}
		seen[f.Name] = true
	}
	return nil
}

// checkField checks what every output relies on in one field's description.
func checkField(f shard.Field) error {
	if f.Name == "" || len(f.Name) > 64 || strings.Trim(f.Name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		return errors.New("a name must be 1 to 64 characters of a-z, 0-9 and _")
	}
	if f.Name == "sample" || f.Name == "label" {
		return errors.New("the name is reserved")
	}
	if f.Encoding != shard.EncodingRaw {
		return fmt.Errorf("encoding %q (want %q)", f.Encoding, shard.EncodingRaw)
	}
	switch f.Kind {
	case shard.KindText, shard.KindBytes, shard.KindJSON:
		return nil
	case shard.KindNDArray:
		if shard.FieldDTypes[f.DType] == 0 {
			return fmt.Errorf("dtype %q (want one of uint8, int32, int64, float32, float64)", f.DType)
		}
		for i, d := range f.Shape {
			if d < -1 || d == -1 && i > 0 {
				return fmt.Errorf("shape %v: only the first dimension may be -1", f.Shape)
			}
		}
		return nil
	case shard.KindImage:
		if f.DType != "uint8" {
			return fmt.Errorf("an image field is uint8, not %q", f.DType)
		}
		if len(f.Shape) != 3 || countVar(f.Shape) != 2 || slices.Min(f.Shape) < -1 || slices.Max(f.Shape) < 1 {
			return fmt.Errorf("an image field's shape is [-1, -1, C] or [C, -1, -1], not %v", f.Shape)
		}
		return nil
	}
	return fmt.Errorf("unknown kind %q", f.Kind)
}

func countVar(shape []int) int {
	n := 0
	for _, d := range shape {
		if d == -1 {
			n++
		}
	}
	return n
}

// FieldLayout is how one field's values are stored by a format of fixed sample shape.
type FieldLayout struct {
	Field shard.Field
	// Shape is a record's value's shape: the field's, with an image field's height and width
	// those of the sample. Shape[0] is -1 for a variable ndarray; nil for text, bytes and json.
	Shape []int
	// Fixed: every record's value has RowBytes bytes (a fixed ndarray, an image field).
	Fixed bool
	// ElemSize is the byte size of one element (1 for text, bytes and json).
	ElemSize int
	// RowBytes is the byte size of a fixed value, of one row (shape[1:]) of a variable ndarray,
	// and 1 for text, bytes and json (a row is a byte).
	RowBytes int
}

// FieldLayoutOf is f's layout in a dataset whose records have the fixed sample spec s (an
// image field takes s's height and width, by s's layout: hwc, chw).
func FieldLayoutOf(f shard.Field, s shard.SampleSpec) (FieldLayout, error) {
	l := FieldLayout{Field: f, ElemSize: 1, RowBytes: 1}
	switch f.Kind {
	case shard.KindText, shard.KindBytes, shard.KindJSON:
		return l, nil
	case shard.KindImage:
		hi, wi := strings.IndexByte(s.Layout, 'h'), strings.IndexByte(s.Layout, 'w')
		if hi < 0 || wi < 0 || len(s.Layout) != len(s.Shape) || !s.Fixed() {
			return l, fmt.Errorf("field %q: an image field needs a fixed sample of known height and width, not %v %q", f.Name, s.Shape, s.Layout)
		}
		dims := []int{s.Shape[hi], s.Shape[wi]}
		for _, d := range f.Shape {
			if d == -1 && len(dims) > 0 {
				d, dims = dims[0], dims[1:]
			}
			l.Shape = append(l.Shape, d)
		}
	case shard.KindNDArray:
		l.Shape = slices.Clone(f.Shape)
	default:
		return l, fmt.Errorf("field %q: unknown kind %q", f.Name, f.Kind)
	}
	l.ElemSize = shard.FieldDTypes[f.DType]
	if l.ElemSize == 0 {
		return l, fmt.Errorf("field %q: unknown dtype %q", f.Name, f.DType)
	}
	l.Fixed = len(l.Shape) == 0 || l.Shape[0] >= 0
	l.RowBytes = l.ElemSize
	for i, d := range l.Shape {
		if i > 0 || l.Fixed {
			l.RowBytes *= d
		}
	}
	return l, nil
}

// Check checks a record's value of the field: a fixed value's size, a variable ndarray's whole
// rows, valid UTF-8 text, one JSON value.
func (l FieldLayout) Check(b []byte) error {
	switch {
	case l.Fixed && len(b) != l.RowBytes:
		return fmt.Errorf("field %q: value of %d bytes, want %d for shape %v %s", l.Field.Name, len(b), l.RowBytes, l.Shape, l.Field.DType)
	case !l.Fixed && l.RowBytes > 0 && len(b)%l.RowBytes != 0:
		return fmt.Errorf("field %q: value of %d bytes is not whole rows of %d bytes (shape %v %s)", l.Field.Name, len(b), l.RowBytes, l.Shape, l.Field.DType)
	case !l.Fixed && l.RowBytes == 0 && len(b) != 0:
		return fmt.Errorf("field %q: value of %d bytes for rows of 0 bytes", l.Field.Name, len(b))
	case l.Field.Kind == shard.KindText && !utf8.Valid(b):
		return fmt.Errorf("field %q: text is not valid UTF-8", l.Field.Name)
	}
	return nil
}

// FieldLayouts is FieldLayoutOf for every field of a schema.
func FieldLayouts(fields []shard.Field, s shard.SampleSpec) ([]FieldLayout, error) {
	out := make([]FieldLayout, len(fields))
	for k, f := range fields {
		var err error
		if out[k], err = FieldLayoutOf(f, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}
