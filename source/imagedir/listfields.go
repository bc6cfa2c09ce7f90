package imagedir

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
)

// Fields of a list (--fields KEY,...): further keys of each JSON Lines object, or further
// columns of the CSV, carried with the record. A field's kind is decided from every line when
// the list is opened, so that it is known before anything is decoded:
//
//   - every value a string → text (a CSV cell is always a string: CSV fields are text);
//   - every value an integer → int64 ndarray of shape [1];
//   - every value an array of integers → int64 ndarray of shape [-1] (a multi-label list);
//   - every value an array of numbers → float64 ndarray of shape [-1];
//   - anything else (objects, mixed types, booleans) → json, the value as the line has it.
//
// A line without the key (or with null) is a bad input, reported with the key's name. The
// field's name is the key lower-cased with bytes outside [a-z0-9_] replaced by '_'
// (source.FieldName).

// listKind is what a list field holds.
type listKind int

const (
	listText listKind = iota
	listInt
	listIntList
	listNumList
	listJSON
)

// listField is one requested key with its kind.
type listField struct {
	key  string
	name string
	kind listKind
}

// fieldInference watches every line's values to decide each field's kind.
type fieldInference struct {
	keys                                    []string
	str, integer, intList, numList, present []bool
}

func newFieldInference(keys []string) *fieldInference {
	n := len(keys)
	f := &fieldInference{keys: keys, str: make([]bool, n), integer: make([]bool, n), intList: make([]bool, n), numList: make([]bool, n), present: make([]bool, n)}
	for i := range keys {
		f.str[i], f.integer[i], f.intList[i], f.numList[i] = true, true, true, true
	}
	return f
}

func (f *fieldInference) add(values []json.RawMessage) {
	for i, v := range values {
		if v == nil {
			continue
		}
		f.present[i] = true
		k := classify(v)
		f.str[i] = f.str[i] && k == listText
		f.integer[i] = f.integer[i] && k == listInt
		f.intList[i] = f.intList[i] && k == listIntList
		f.numList[i] = f.numList[i] && (k == listIntList || k == listNumList)
	}
}

// fields returns the inferred kinds.
func (f *fieldInference) fields() []listField {
	var out []listField
	for i, k := range f.keys {
		name, _ := source.FieldName(k) // checked by OpenList's caller
		lf := listField{key: k, name: name, kind: listJSON}
		switch {
		case !f.present[i]:
			lf.kind = listText
		case f.str[i]:
			lf.kind = listText
		case f.integer[i]:
			lf.kind = listInt
		case f.intList[i]:
			lf.kind = listIntList
		case f.numList[i]:
			lf.kind = listNumList
		}
		out = append(out, lf)
	}
	return out
}

// classify says what one JSON value is.
func classify(v json.RawMessage) listKind {
	switch v[0] {
	case '"':
		return listText
	case '[':
		var ints []int64
		if json.Unmarshal(v, &ints) == nil {
			return listIntList
		}
		var nums []float64
		if json.Unmarshal(v, &nums) == nil {
			return listNumList
		}
	default:
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return listInt
		}
	}
	return listJSON
}

// listSchema is the schema of a list's fields.
func listSchema(fields []listField) []shard.Field {
	var out []shard.Field
	for _, f := range fields {
		sf := shard.Field{Name: f.name, Encoding: shard.EncodingRaw}
		switch f.kind {
		case listText:
			sf.Kind = shard.KindText
		case listInt:
			sf.Kind, sf.DType, sf.Shape = shard.KindNDArray, "int64", []int{1}
		case listIntList:
			sf.Kind, sf.DType, sf.Shape = shard.KindNDArray, "int64", []int{-1}
		case listNumList:
			sf.Kind, sf.DType, sf.Shape = shard.KindNDArray, "float64", []int{-1}
		default:
			sf.Kind = shard.KindJSON
		}
		out = append(out, sf)
	}
	return out
}

// fieldNote is what Enumerate hands Decode: a list line's field values, or why they are bad.
type fieldNote struct {
	values []source.FieldValue
	err    error
}

// fieldNote encodes a line's values as its fields' bytes.
func (s *Source) fieldNote(values []json.RawMessage) fieldNote {
	out := make([]source.FieldValue, len(s.fields))
	for i, f := range s.fields {
		v := values[i]
		if v == nil {
			return fieldNote{err: fmt.Errorf("no %q (--fields)", f.key)}
		}
		b, err := encodeListValue(f.kind, v)
		if err != nil {
			return fieldNote{err: fmt.Errorf("%q: %w", f.key, err)}
		}
		out[i] = source.FieldValue{Bytes: b}
	}
	return fieldNote{values: out}
}

func encodeListValue(kind listKind, v json.RawMessage) ([]byte, error) {
	le := binary.LittleEndian
	switch kind {
	case listText:
		var t string
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, fmt.Errorf("not a string: %s", abbreviate(v))
		}
		return []byte(t), nil
	case listInt:
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("not an integer: %s", abbreviate(v))
		}
		return le.AppendUint64(nil, uint64(n)), nil
	case listIntList:
		var ints []int64
		if err := json.Unmarshal(v, &ints); err != nil {
			return nil, fmt.Errorf("not a list of integers: %s", abbreviate(v))
		}
		out := make([]byte, 0, 8*len(ints))
		for _, n := range ints {
			out = le.AppendUint64(out, uint64(n))
		}
		return out, nil
	case listNumList:
		var nums []float64
		if err := json.Unmarshal(v, &nums); err != nil {
			return nil, fmt.Errorf("not a list of numbers: %s", abbreviate(v))
		}
		out := make([]byte, 0, 8*len(nums))
		for _, n := range nums {
			out = le.AppendUint64(out, math.Float64bits(n))
		}
		return out, nil
	}
	return append([]byte(nil), v...), nil
}

func abbreviate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
