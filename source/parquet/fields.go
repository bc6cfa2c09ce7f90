package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	pq "github.com/parquet-go/parquet-go"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
)

// Fields (--fields COLUMN,...): further columns carried with each row.
//
//   - a string column (BYTE_ARRAY) → text, which must be UTF-8 (a row with another is a
//     reported skip);
//   - an integer or floating-point column → an ndarray of shape [1] (int64 or float64);
//   - a list of integers → int64 [-1] (multi-label), a list of numbers → float64 [-1];
//   - the Hugging Face object-detection layout, a struct column with a "bbox" list of 4-number
//     lists and a "category" list of integers (datasets' Sequence({"bbox": ..., "category":
//     ...})) → two fields, COLUMN_bbox (float32 [-1, 4], geometry boxes; Hugging Face writes
//     COCO's x, y, width, height, converted to x0, y0, x1, y1) and COLUMN_category (int64 [-1],
//     rows_of COLUMN_bbox).
//
// Anything else (maps, structs of another shape, lists of strings) is refused at open, naming
// the column and its type. A null value, a null list element or a box of other than four
// numbers is a reported skip naming the column.

// fieldLeaf is one leaf column a field reads, and how.
type fieldLeaf struct {
	path   []string
	maxDef int
	maxRep int
	float  bool // a floating-point leaf
}

// pqField is one requested field: its schema entries and the leaves it reads.
type pqField struct {
	column string
	kind   int // pqText, pqScalar, pqList, pqObjects
	leaves []fieldLeaf
	schema []shard.Field
}

const (
	pqText = iota
	pqScalar
	pqList
	pqObjects
)

// resolveFields finds each requested column in the schema and decides its fields.
func (s *Source) resolveFields(schema *pq.Schema) error {
	names, err := source.CheckFieldNames(s.opts.Fields)
	if err != nil {
		return fmt.Errorf("parquet: --fields: %w", err)
	}
	for i, col := range s.opts.Fields {
		if col == s.opts.LabelColumn || len(s.imagePath) > 0 && col == s.imagePath[0] {
			return fmt.Errorf("parquet: --fields %s: that column is the sample's image or label", col)
		}
		if err := once(schema, []string{col}); err != nil {
			return fmt.Errorf("parquet: %s: %w", s.files[0], err)
		}
		f, err := s.resolveField(schema, col, names[i])
		if err != nil {
			return fmt.Errorf("parquet: %s: --fields %s: %w", s.files[0], col, err)
		}
		s.pqFields = append(s.pqFields, f)
	}
	seen := map[string]bool{}
	for _, f := range s.pqFields {
		for _, sf := range f.schema {
			if seen[sf.Name] {
				return fmt.Errorf("parquet: --fields: two fields named %q", sf.Name)
			}
			seen[sf.Name] = true
		}
	}
	return nil
}

func leavesUnder(schema *pq.Schema, col string) []pq.LeafColumn {
	var out []pq.LeafColumn
	for _, path := range schema.Columns() {
		if path[0] == col {
			if l, ok := schema.Lookup(path...); ok {
				l.Path = append([]string(nil), path...)
				out = append(out, l)
			}
		}
	}
	return out
}

func numeric(k pq.Kind) (isNum, isFloat bool) {
	switch k {
	case pq.Int32, pq.Int64:
		return true, false
	case pq.Float, pq.Double:
		return true, true
	}
	return false, false
}

func (s *Source) resolveField(schema *pq.Schema, col, name string) (pqField, error) {
	leaves := leavesUnder(schema, col)
	if len(leaves) == 0 {
		var cols []string
		for _, f := range schema.Fields() {
			cols = append(cols, f.Name())
		}
		return pqField{}, fmt.Errorf("no such column (the columns are %s)", strings.Join(cols, ", "))
	}
	leaf := func(l pq.LeafColumn) fieldLeaf {
		_, fl := numeric(l.Node.Type().Kind())
		return fieldLeaf{path: l.Path, maxDef: l.MaxDefinitionLevel, maxRep: l.MaxRepetitionLevel, float: fl}
	}
	f := pqField{column: col}
	if len(leaves) == 1 {
		l := leaves[0]
		kind := l.Node.Type().Kind()
		isNum, isFloat := numeric(kind)
		dtype := "int64"
		if isFloat {
			dtype = "float64"
		}
		switch {
		case l.MaxRepetitionLevel == 0 && kind == pq.ByteArray:
			f.kind, f.schema = pqText, []shard.Field{source.ScalarField(name, shard.KindText)}
		case l.MaxRepetitionLevel == 0 && isNum:
			f.kind = pqScalar
			f.schema = []shard.Field{{Name: name, Kind: shard.KindNDArray, DType: dtype, Shape: []int{1}, Encoding: shard.EncodingRaw}}
		case l.MaxRepetitionLevel == 1 && isNum:
			f.kind = pqList
			f.schema = []shard.Field{{Name: name, Kind: shard.KindNDArray, DType: dtype, Shape: []int{-1}, Encoding: shard.EncodingRaw}}
		default:
			return pqField{}, fmt.Errorf("a column of %s (nested %d deep) is not a string, a number or a list of numbers", l.Node.Type(), l.MaxRepetitionLevel)
		}
		f.leaves = []fieldLeaf{leaf(l)}
		return f, nil
	}
	var bbox, cat *pq.LeafColumn
	for i := range leaves {
		if len(leaves[i].Path) < 2 {
			continue
		}
		switch leaves[i].Path[1] {
		case "bbox":
			bbox = &leaves[i]
		case "category":
			cat = &leaves[i]
		}
	}
	if len(leaves) == 2 && bbox != nil && cat != nil && bbox.MaxRepetitionLevel == 2 && cat.MaxRepetitionLevel == 1 {
		bn, _ := numeric(bbox.Node.Type().Kind())
		cn, cf := numeric(cat.Node.Type().Kind())
		if bn && cn && !cf {
			f.kind = pqObjects
			f.leaves = []fieldLeaf{leaf(*bbox), leaf(*cat)}
			f.schema = []shard.Field{
				{Name: name + "_bbox", Kind: shard.KindNDArray, DType: "float32", Shape: []int{-1, 4}, Encoding: shard.EncodingRaw, Geometry: shard.GeometryBoxes},
				{Name: name + "_category", Kind: shard.KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: shard.EncodingRaw, RowsOf: name + "_bbox"},
			}
			return f, nil
		}
	}
	var paths []string
	for _, l := range leaves {
		paths = append(paths, strings.Join(l.Path, ".")+" "+l.Node.Type().String())
	}
	return pqField{}, fmt.Errorf("a struct column of %s is not the object-detection layout {bbox: list of 4-number lists, category: list of integers}", strings.Join(paths, ", "))
}

// rowReader reads a leaf column row by row: every value up to the next one that starts a row.
type rowReader struct {
	c      *cursor
	leaf   fieldLeaf
	peeked *pq.Value
	vals   []pq.Value
}

// next returns the values of the next row (copied: valid until the next call).
func (r *rowReader) next() ([]pq.Value, error) {
	r.vals = r.vals[:0]
	for {
		if r.peeked == nil {
			v, err := r.c.next()
			if err == io.EOF {
				if len(r.vals) == 0 {
					return nil, io.EOF
				}
				return r.vals, nil
			}
			if err != nil {
				return nil, err
			}
			v = v.Clone()
			r.peeked = &v
		}
		if len(r.vals) > 0 && r.peeked.RepetitionLevel() == 0 {
			return r.vals, nil
		}
		r.vals = append(r.vals, *r.peeked)
		r.peeked = nil
	}
}

var errFieldValue = errors.New("bad field")

// fieldValues turns one row's values of every field's leaves into field values, or says why
// the row cannot be packed.
func (s *Source) fieldValues(rows [][][]pq.Value) ([]source.FieldValue, error) {
	var out []source.FieldValue
	le := binary.LittleEndian
	for i, f := range s.pqFields {
		vals := rows[i]
		switch f.kind {
		case pqText:
			v := vals[0][0]
			if v.IsNull() {
				return nil, fmt.Errorf("%w: %s is null", errFieldValue, f.column)
			}
			b := append([]byte(nil), v.ByteArray()...)
			if !utf8.Valid(b) {
				return nil, fmt.Errorf("%w: %s is not UTF-8 text", errFieldValue, f.column)
			}
			out = append(out, source.FieldValue{Bytes: b})
		case pqScalar, pqList:
			var b []byte
			for _, v := range vals[0] {
				if v.DefinitionLevel() < f.leaves[0].maxDef {
					if f.kind == pqScalar || v.DefinitionLevel() == f.leaves[0].maxDef-1 && v.RepetitionLevel() > 0 {
						return nil, fmt.Errorf("%w: %s holds a null", errFieldValue, f.column)
					}
					continue // a null or empty list: no element
				}
				b = appendNumber(b, v, f.leaves[0].float)
			}
			out = append(out, source.FieldValue{Bytes: b})
		case pqObjects:
			boxes, err := objectBoxes(f, vals[0])
			if err != nil {
				return nil, err
			}
			var cats []byte
			for _, v := range vals[1] {
				if v.DefinitionLevel() < f.leaves[1].maxDef {
					continue
				}
				cats = le.AppendUint64(cats, uint64(intOf(v)))
			}
			if len(cats)/8 != len(boxes)/16 {
				return nil, fmt.Errorf("%w: %s has %d boxes and %d categories", errFieldValue, f.column, len(boxes)/16, len(cats)/8)
			}
			out = append(out, source.FieldValue{Bytes: boxes}, source.FieldValue{Bytes: cats})
		}
	}
	return out, nil
}

// objectBoxes reads one row's bbox values (a list of lists): each inner list is one box of
// four numbers x, y, width, height, converted to x0, y0, x1, y1.
func objectBoxes(f pqField, vals []pq.Value) ([]byte, error) {
	var boxes [][]float64
	for _, v := range vals {
		if v.DefinitionLevel() < f.leaves[0].maxDef {
			if v.RepetitionLevel() == 1 || v.RepetitionLevel() == 2 {
				return nil, fmt.Errorf("%w: %s.bbox holds a null box or number", errFieldValue, f.column)
			}
			continue // no boxes
		}
		if v.RepetitionLevel() <= 1 || len(boxes) == 0 {
			boxes = append(boxes, nil)
		}
		x := float64(0)
		if k := v.Kind(); k == pq.Float {
			x = float64(v.Float())
		} else if k == pq.Double {
			x = v.Double()
		} else {
			x = float64(intOf(v))
		}
		boxes[len(boxes)-1] = append(boxes[len(boxes)-1], x)
	}
	var out []byte
	for i, b := range boxes {
		if len(b) != 4 {
			return nil, fmt.Errorf("%w: %s.bbox box %d has %d numbers, want 4 (x, y, width, height)", errFieldValue, f.column, i, len(b))
		}
		for _, x := range b {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%w: %s.bbox box %d is %v", errFieldValue, f.column, i, b)
			}
		}
		for _, x := range []float64{b[0], b[1], b[0] + b[2], b[1] + b[3]} {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(x)))
		}
	}
	return out, nil
}

func intOf(v pq.Value) int64 {
	if v.Kind() == pq.Int32 {
		return int64(v.Int32())
	}
	return v.Int64()
}

func appendNumber(b []byte, v pq.Value, float bool) []byte {
	le := binary.LittleEndian
	if !float {
		return le.AppendUint64(b, uint64(intOf(v)))
	}
	x := v.Double()
	if v.Kind() == pq.Float {
		x = float64(v.Float())
	}
	return le.AppendUint64(b, math.Float64bits(x))
}

// fieldSchema is the schema of every requested field, in order.
func (s *Source) fieldSchema() []shard.Field {
	var out []shard.Field
	for _, f := range s.pqFields {
		out = append(out, f.schema...)
	}
	return out
}
