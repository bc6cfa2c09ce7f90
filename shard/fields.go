package shard

// Fields: a sample's values beyond its primary array and integer labels (format version 3; see
// FORMAT.md, "Fields"). This file holds the schema types that the sources, the pipeline, the
// outputs and the readers share. The wire format is defined in FORMAT.md.

import (
	"errors"
	"fmt"
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

// AppendFields adds one record with its field values (fields[k] is the raw value of
// WriterOptions.Fields[k]); see AppendShape for the other arguments.
func (w *Writer) AppendFields(data []byte, shape []int, label int64, aux []int64, meta []byte, fields [][]byte) error {
	if len(fields) != len(w.fields) {
		return fmt.Errorf("shard: %d field values for a schema of %d fields", len(fields), len(w.fields))
	}
	if len(fields) > 0 {
		return errFieldsNotBuilt
	}
	return w.AppendShape(data, shape, label, aux, meta)
}

var errFieldsNotBuilt = errors.New("shard: writing fields (format version 3) is not built yet")
