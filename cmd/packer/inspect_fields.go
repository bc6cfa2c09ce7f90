package main

// What inspect shows of a dataset's fields (shard.Field): the schema, and with --records each
// record's values, short: text and JSON cut to a line, arrays as their shape and first values,
// bytes as their length and first bytes.

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/packer-dev/packer/shard"
)

// fieldTextMax is how many characters of a text or JSON value inspect prints; fieldValuesMax
// how many elements of an array, fieldBytesMax how many bytes of a bytes value.
const (
	fieldTextMax   = 60
	fieldValuesMax = 8
	fieldBytesMax  = 16
)

// describeField says what a field of the schema is: "ndarray float32 [-1 4], boxes",
// "ndarray int64 [-1], rows of boxes", "text".
func describeField(f shard.Field) string {
	s := string(f.Kind)
	if f.DType != "" {
		s += " " + f.DType
	}
	if f.Shape != nil {
		s += fmt.Sprintf(" %v", f.Shape)
	}
	if f.Encoding != "" && f.Encoding != shard.EncodingRaw {
		s += ", encoding " + f.Encoding
	}
	if f.Geometry != "" {
		s += ", " + f.Geometry
	}
	if f.RowsOf != "" {
		s += ", rows of " + f.RowsOf
	}
	return s
}

// fieldValue is a record's value of one field as inspect --json shows it: Text for text (cut
// to fieldTextMax characters, Cut set), JSON for json (the value, whole), and for the other
// kinds Bytes (the value's length), Shape (arrays: their shape for this record) and First (the
// first fieldValuesMax elements; for bytes, the first fieldBytesMax bytes in hex).
type fieldValue struct {
	Text  *string         `json:"text,omitempty"`
	JSON  json.RawMessage `json:"json,omitempty"`
	Bytes int             `json:"bytes"`
	Shape []int           `json:"shape,omitempty"`
	First any             `json:"first,omitempty"`
	Cut   bool            `json:"cut,omitempty"`
}

// valueOf is record value b of field f as inspect shows it; sample is the record's own sample
// shape and layout, which give an image field's height and width.
func valueOf(f shard.Field, b []byte, sample shard.SampleSpec) fieldValue {
	v := fieldValue{Bytes: len(b)}
	switch f.Kind {
	case shard.KindText:
		s, cut := cutText(string(b), fieldTextMax)
		v.Text, v.Cut = &s, cut
	case shard.KindJSON:
		if json.Valid(b) {
			v.JSON = json.RawMessage(b)
		} else {
			s, cut := cutText(string(b), fieldTextMax)
			v.Text, v.Cut = &s, cut
		}
	case shard.KindBytes:
		if n := min(len(b), fieldBytesMax); n > 0 {
			v.First, v.Cut = hex.EncodeToString(b[:n]), n < len(b)
		}
	case shard.KindNDArray, shard.KindImage:
		v.Shape = valueShape(f, len(b), sample)
		v.First, v.Cut = firstValues(f.DType, b, fieldValuesMax)
	}
	return v
}

// String is the value on one line, for inspect's text output.
func (v fieldValue) String() string {
	more := ""
	if v.Cut {
		more = "…"
	}
	switch {
	case v.Text != nil:
		return fmt.Sprintf("%q%s", *v.Text, more)
	case v.JSON != nil:
		s, cut := cutText(compactRaw(v.JSON), fieldTextMax)
		if cut {
			s += "…"
		}
		return s
	case v.Shape != nil:
		return fmt.Sprintf("%v %v%s", v.Shape, v.First, more)
	case v.First != nil:
		return fmt.Sprintf("%d bytes %v%s", v.Bytes, v.First, more)
	}
	return fmt.Sprintf("%d bytes", v.Bytes)
}

// cutText returns s cut to at most n characters (runes; an invalid byte counts as one), and
// whether it was cut.
func cutText(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	k := 0
	for i := range s {
		if k == n {
			return s[:i], true
		}
		k++
	}
	return s, false
}

// compactRaw is a JSON value without its insignificant spaces.
func compactRaw(b json.RawMessage) string {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return string(b)
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

// valueShape is the shape of an array value of n bytes of field f: the first dimension of a
// variable ndarray from its length; an image's height and width from the record's sample.
func valueShape(f shard.Field, n int, sample shard.SampleSpec) []int {
	size := shard.FieldDTypes[f.DType]
	if size == 0 || len(f.Shape) == 0 {
		return nil
	}
	shape := append([]int(nil), f.Shape...)
	if f.Kind == shard.KindImage {
		h, w := sampleHW(sample)
		for i, d := range shape {
			if d < 0 {
				shape[i] = h
				h = w // the second -1 is the width
			}
		}
		return shape
	}
	if shape[0] < 0 {
		row := size
		for _, d := range shape[1:] {
			row *= d
		}
		if row > 0 {
			shape[0] = n / row
		}
	}
	return shape
}

// sampleHW returns a sample shape's height and width by its layout ("hwc", "chw"; -1 when the
// layout does not name them).
func sampleHW(s shard.SampleSpec) (h, w int) {
	h, w = -1, -1
	if len(s.Layout) != len(s.Shape) {
		return h, w
	}
	for i, c := range s.Layout {
		switch c {
		case 'h':
			h = s.Shape[i]
		case 'w':
			w = s.Shape[i]
		}
	}
	return h, w
}

// firstValues decodes up to n little-endian elements of dtype from b, and says whether b holds
// more.
func firstValues(dtype string, b []byte, n int) ([]any, bool) {
	size := shard.FieldDTypes[dtype]
	if size == 0 {
		return nil, false
	}
	count := len(b) / size
	out := make([]any, 0, min(n, count))
	for i := 0; i < count && i < n; i++ {
		e := b[i*size:]
		switch dtype {
		case "uint8":
			out = append(out, e[0])
		case "int32":
			out = append(out, int32(binary.LittleEndian.Uint32(e)))
		case "int64":
			out = append(out, int64(binary.LittleEndian.Uint64(e)))
		case "float32":
			out = append(out, finite(float64(math.Float32frombits(binary.LittleEndian.Uint32(e)))))
		case "float64":
			out = append(out, finite(math.Float64frombits(binary.LittleEndian.Uint64(e))))
		}
	}
	return out, count > n
}

// finite is f, or for NaN and the infinities their name (JSON has no number for them).
func finite(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Sprint(f)
	}
	return f
}

// recordFields are a record's field values as inspect shows them, in schema order; as JSON,
// an object with one member per field, in that order.
type recordFields []namedValue

type namedValue struct {
	Name  string
	Value fieldValue
}

func (r recordFields) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, nv := range r {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(nv.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(nv.Value)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// fieldsOf returns record i's field values as inspect shows them (schema m.Fields): nil for a
// dataset without fields.
func fieldsOf(ds anyDataset, m *shard.Manifest, i int64) (recordFields, error) {
	if len(m.Fields) == 0 {
		return nil, nil
	}
	vals, err := ds.Fields(i)
	if err != nil {
		return nil, err
	}
	if len(vals) != len(m.Fields) {
		return nil, fmt.Errorf("record %d has %d field values, the schema %d fields", i, len(vals), len(m.Fields))
	}
	shape, err := ds.RecordShape(i)
	if err != nil {
		return nil, err
	}
	sample := m.Sample
	sample.Shape = shape
	out := make(recordFields, len(vals))
	for k, f := range m.Fields {
		out[k] = namedValue{f.Name, valueOf(f, vals[k], sample)}
	}
	return out, nil
}
