package shard

// Fields: a sample's values beyond its primary array and integer labels (format version 3; see
// FORMAT.md, "Fields"). This file holds the schema types that the sources, the pipeline, the
// outputs and the readers share, the schema's validation, the check of one value against its
// field, and the typed helpers that decode a value. The wire format is defined in FORMAT.md.

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// FieldKind says what a field's value is.
type FieldKind string

// The kinds of field.
const (
	// KindImage is an array of pixels that follows the sample's geometry (a segmentation mask):
	// its height and width are the record's, and it is resized nearest-neighbour and cropped
	// with the sample. Its DType is uint8 and its Shape is given in the sample's layout with -1
	// for height and width ([-1, -1, C] for hwc, [C, -1, -1] for chw).
	KindImage FieldKind = "image"
	// KindNDArray is a little-endian array of DType with Shape; Shape may hold -1 in its first
	// dimension only (a variable number of rows, possibly 0: boxes [-1, 4], labels [-1]).
	KindNDArray FieldKind = "ndarray"
	// KindText is UTF-8 text.
	KindText FieldKind = "text"
	// KindBytes is raw bytes.
	KindBytes FieldKind = "bytes"
	// KindJSON is one UTF-8 JSON value.
	KindJSON FieldKind = "json"
)

// Field geometries: how a field's value changes when the sample's pixels are resized and
// cropped.
const (
	// GeometryMask: the field is a KindImage that is resized nearest-neighbour and cropped
	// exactly as the sample (FORMAT.md and docs/fidelity.md).
	GeometryMask = "mask"
	// GeometryBoxes: the field is a float32 [-1, 4] ndarray of boxes (x0, y0, x1, y1) in the
	// sample's pixel coordinates; boxes are scaled and shifted with the sample, clipped to it,
	// and a box left with no area is dropped, together with the same row of every field whose
	// RowsOf names this field.
	GeometryBoxes = "boxes"
)

// EncodingRaw is the only field encoding of format version 3: the value's bytes as they are.
const EncodingRaw = "raw"

// maxFieldName is the longest field name, in bytes.
const maxFieldName = 64

// Field describes one field of a sample schema.
type Field struct {
	Name     string    `json:"name"`               // [a-z0-9_], 1 to 64 bytes, unique in the schema
	Kind     FieldKind `json:"kind"`               // see FieldKind
	DType    string    `json:"dtype,omitempty"`    // ndarray and image only: FieldDTypes
	Shape    []int     `json:"shape,omitempty"`    // ndarray and image only
	Encoding string    `json:"encoding"`           // EncodingRaw
	Geometry string    `json:"geometry,omitempty"` // "", GeometryMask or GeometryBoxes
	RowsOf   string    `json:"rows_of,omitempty"`  // the boxes field whose rows this ndarray's rows follow
}

// FieldDTypes are the element types an ndarray field may have, with their sizes in bytes.
var FieldDTypes = map[string]int{
	"uint8":   1,
	"int32":   4,
	"int64":   8,
	"float32": 4,
	"float64": 8,
}

// Equal reports whether f and g describe the same field.
func (f Field) Equal(g Field) bool {
	return f.Name == g.Name && f.Kind == g.Kind && f.DType == g.DType && slices.Equal(f.Shape, g.Shape) &&
		f.Encoding == g.Encoding && f.Geometry == g.Geometry && f.RowsOf == g.RowsOf
}

// FieldsString describes a schema in errors: its fields as name:kind (and dtype and shape),
// "none" when empty.
func FieldsString(fields []Field) string {
	if len(fields) == 0 {
		return "none"
	}
	var b []byte
	for k, f := range fields {
		if k > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%s:%s", f.Name, f.Kind)
		if f.DType != "" {
			b = fmt.Appendf(b, " %s%v", f.DType, f.Shape)
		}
	}
	return "[" + string(b) + "]"
}

// FieldsEqual reports whether two schemas are the same, field by field.
func FieldsEqual(a, b []Field) bool { return slices.EqualFunc(a, b, Field.Equal) }

// Fixed reports whether every value of f has the same size (an ndarray without -1).
func (f Field) Fixed() bool { return f.Kind == KindNDArray && !slices.Contains(f.Shape, -1) }

// elemSize is the size of one element of an ndarray or image field (1 for other kinds).
func (f Field) elemSize() int64 {
	if n := FieldDTypes[f.DType]; n > 0 {
		return int64(n)
	}
	return 1
}

// rowBytes is the size of one row (first dimension) of an ndarray field: prod(shape[1:]) × size.
func (f Field) rowBytes() int64 {
	n := f.elemSize()
	for _, d := range f.Shape[1:] {
		n *= int64(d)
	}
	return n
}

// Rows returns the number of rows (the first dimension) of b, a value of the ndarray field f;
// 0 for a field of another kind.
func (f Field) Rows(b []byte) int {
	if f.Kind != KindNDArray || len(f.Shape) == 0 {
		return 0
	}
	if f.Shape[0] >= 0 {
		return f.Shape[0]
	}
	return int(int64(len(b)) / f.rowBytes())
}

// channels is the C of an image field's shape (the one dimension that is not -1).
func (f Field) channels() int64 {
	for _, d := range f.Shape {
		if d > 0 {
			return int64(d)
		}
	}
	return 0
}

// DatasetVersion is the format version of the shards a writer writes for sample spec spec and
// schema fields (the manifest's format_version, FORMAT.md "Versioning"): 3 with fields, else 1
// for a fixed-size spec and 2 for a variable-size one (with shapes, as packer writes them).
func DatasetVersion(spec SampleSpec, fields []Field) int {
	switch {
	case len(fields) > 0:
		return 3
	case spec.Fixed():
		return 1
	}
	return 2
}

// ValidateFields checks a schema against FORMAT.md ("Fields") and the sample spec it goes with.
// Errors name the field.
func ValidateFields(fields []Field, spec SampleSpec) error {
	if len(fields) > MaxFields {
		return fmt.Errorf("shard: %d fields, more than the limit %d", len(fields), MaxFields)
	}
	seen := make(map[string]int, len(fields))
	for k, f := range fields {
		if err := validName(f.Name); err != nil {
			return fmt.Errorf("shard: field %d: %w", k, err)
		}
		if _, dup := seen[f.Name]; dup {
			return fmt.Errorf("shard: field %q: named twice in the schema", f.Name)
		}
		seen[f.Name] = k
		if err := f.validate(spec); err != nil {
			return fmt.Errorf("shard: field %q: %w", f.Name, err)
		}
	}
	for _, f := range fields {
		if f.RowsOf == "" {
			continue
		}
		j, ok := seen[f.RowsOf]
		if !ok || fields[j].Geometry != GeometryBoxes {
			return fmt.Errorf("shard: field %q: rows_of %q is not a boxes field of the schema", f.Name, f.RowsOf)
		}
	}
	return nil
}

// validName checks a field name: [a-z0-9_], 1 to 64 bytes, not sample or label.
func validName(name string) error {
	if name == "" || len(name) > maxFieldName {
		return fmt.Errorf("name %q: want 1 to %d bytes", name, maxFieldName)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("name %q: only a-z, 0-9 and _ are allowed", name)
		}
	}
	if name == "sample" || name == "label" {
		return fmt.Errorf("name %q is reserved", name)
	}
	return nil
}

// validate checks one field's kind, encoding, dtype, shape, geometry and rows_of.
func (f Field) validate(spec SampleSpec) error {
	if f.Encoding != EncodingRaw {
		return fmt.Errorf("encoding %q: format version 3 knows only %q", f.Encoding, EncodingRaw)
	}
	switch f.Kind {
	case KindText, KindBytes, KindJSON:
		if f.DType != "" || f.Shape != nil || f.Geometry != "" || f.RowsOf != "" {
			return fmt.Errorf("a %s field has no dtype, shape, geometry or rows_of", f.Kind)
		}
		return nil
	case KindNDArray:
		return f.validateNDArray()
	case KindImage:
		return f.validateImage(spec)
	}
	return fmt.Errorf("unknown kind %q (want image, ndarray, text, bytes or json)", f.Kind)
}

func (f Field) validateNDArray() error {
	if FieldDTypes[f.DType] == 0 {
		return fmt.Errorf("dtype %q: want uint8, int32, int64, float32 or float64", f.DType)
	}
	if len(f.Shape) == 0 || len(f.Shape) > 8 {
		return fmt.Errorf("shape %v: want 1 to 8 dimensions", f.Shape)
	}
	n := f.elemSize()
	for i, d := range f.Shape {
		if d == -1 && i == 0 {
			continue
		}
		if d < 1 {
			return fmt.Errorf("shape %v: dimension %d is %d (only the first may be -1, the others ≥ 1)", f.Shape, i, d)
		}
		if n *= int64(d); n > MaxRecordSize {
			return fmt.Errorf("shape %v is more than the record size limit %d", f.Shape, MaxRecordSize)
		}
	}
	switch f.Geometry {
	case "":
	case GeometryBoxes:
		if f.DType != "float32" || !slices.Equal(f.Shape, []int{-1, 4}) || f.RowsOf != "" {
			return fmt.Errorf("a boxes field is float32 [-1, 4] without rows_of, not %s %v", f.DType, f.Shape)
		}
	default:
		return fmt.Errorf("geometry %q for an ndarray (want none or %q)", f.Geometry, GeometryBoxes)
	}
	if f.RowsOf != "" && f.Shape[0] != -1 {
		return fmt.Errorf("rows_of %q needs a variable row count (shape [-1, ...]), not %v", f.RowsOf, f.Shape)
	}
	return nil
}

func (f Field) validateImage(spec SampleSpec) error {
	if f.DType != "uint8" {
		return fmt.Errorf("dtype %q: an image field is uint8", f.DType)
	}
	if f.Geometry != "" && f.Geometry != GeometryMask {
		return fmt.Errorf("geometry %q for an image (want none or %q)", f.Geometry, GeometryMask)
	}
	if f.RowsOf != "" {
		return fmt.Errorf("rows_of %q: only an ndarray field follows a boxes field's rows", f.RowsOf)
	}
	var want []int
	switch spec.Layout {
	case "hwc":
		want = []int{-1, -1, 0}
	case "chw":
		want = []int{0, -1, -1}
	default:
		return fmt.Errorf("an image field needs an hwc or chw sample, not %q", spec.Layout)
	}
	if len(f.Shape) != 3 {
		return fmt.Errorf("shape %v: want %s with -1 for height and width", f.Shape, imageShapeHint(spec.Layout))
	}
	for i, d := range f.Shape {
		if (want[i] == -1) != (d == -1) || (d != -1 && (d < 1 || d > 4096)) {
			return fmt.Errorf("shape %v: want %s with -1 for height and width and 1 to 4096 channels", f.Shape, imageShapeHint(spec.Layout))
		}
	}
	return nil
}

func imageShapeHint(layout string) string {
	if layout == "chw" {
		return "[C, -1, -1]"
	}
	return "[-1, -1, C]"
}

// sampleHW returns the height and width of a record whose sample has shape (hwc or chw), or
// 0, 0 for another layout.
func sampleHW(layout string, shape []int) (h, w int64) {
	switch {
	case layout == "hwc" && len(shape) == 3:
		return int64(shape[0]), int64(shape[1])
	case layout == "chw" && len(shape) == 3:
		return int64(shape[1]), int64(shape[2])
	}
	return 0, 0
}

// checkLen checks the length n of a value of f in a record of height h and width w.
func (f Field) checkLen(n, h, w int64) error {
	switch f.Kind {
	case KindNDArray:
		if f.Shape[0] >= 0 {
			if want := int64(f.Shape[0]) * f.rowBytes(); n != want {
				return fmt.Errorf("%d bytes, a %s %v value has %d", n, f.DType, f.Shape, want)
			}
		} else if n%f.rowBytes() != 0 {
			return fmt.Errorf("%d bytes is not a whole number of %d-byte rows of %s %v", n, f.rowBytes(), f.DType, f.Shape)
		}
	case KindImage:
		if want := h * w * f.channels(); n != want {
			return fmt.Errorf("%d bytes, an image of the record's %d×%d×%d has %d", n, h, w, f.channels(), want)
		}
	}
	return nil
}

// checkValue checks a value's bytes against its kind: text is UTF-8, json one valid JSON
// value. (Lengths are checked by checkLen.)
func (f Field) checkValue(b []byte) error {
	switch f.Kind {
	case KindText:
		if !utf8.Valid(b) {
			return fmt.Errorf("text is not valid UTF-8")
		}
	case KindJSON:
		if !json.Valid(b) {
			return fmt.Errorf("not one valid JSON value")
		}
	}
	return nil
}

// CheckFieldValue checks the value b of field f in a record whose sample has shape recShape
// (the record's own shape, no -1): its length against the kind, text as UTF-8, json as one
// valid JSON value. rows_of is a property of the record; see Writer.AppendFields.
func CheckFieldValue(f Field, spec SampleSpec, recShape []int, b []byte) error {
	h, w := sampleHW(spec.Layout, recShape)
	if err := f.checkLen(int64(len(b)), h, w); err != nil {
		return err
	}
	return f.checkValue(b)
}

// rowsOfIndex returns, for each field, the position of the field its RowsOf names, or -1.
func rowsOfIndex(fields []Field) []int {
	out := make([]int, len(fields))
	for k, f := range fields {
		out[k] = -1
		if f.RowsOf != "" {
			out[k] = slices.IndexFunc(fields, func(g Field) bool { return g.Name == f.RowsOf })
		}
	}
	return out
}

// FieldText returns a text value as a string; it is an error when b is not UTF-8.
func FieldText(b []byte) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("shard: text field value is not valid UTF-8")
	}
	return string(b), nil
}

// FieldInt64s decodes a little-endian int64 ndarray value (a trailing partial element is ignored).
func FieldInt64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(le.Uint64(b[i*8:]))
	}
	return out
}

// FieldInt32s decodes a little-endian int32 ndarray value.
func FieldInt32s(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(le.Uint32(b[i*4:]))
	}
	return out
}

// FieldFloat32s decodes a little-endian float32 ndarray value (boxes: x0, y0, x1, y1 per row).
func FieldFloat32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(le.Uint32(b[i*4:]))
	}
	return out
}

// FieldFloat64s decodes a little-endian float64 ndarray value.
func FieldFloat64s(b []byte) []float64 {
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(le.Uint64(b[i*8:]))
	}
	return out
}
