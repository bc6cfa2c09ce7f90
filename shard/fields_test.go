package shard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fieldsRecord is one record of a shard with fields, for tests.
type fieldsRecord struct {
	data   []byte
	shape  []int
	label  int64
	fields [][]byte
}

// testSchema has a field of every kind: a fixed and a variable ndarray, boxes with their
// categories (rows_of), text, bytes, json and a mask image.
func testSchema() []Field {
	return []Field{
		{Name: "caption", Kind: KindText, Encoding: EncodingRaw},
		{Name: "boxes", Kind: KindNDArray, DType: "float32", Shape: []int{-1, 4}, Encoding: EncodingRaw, Geometry: GeometryBoxes},
		{Name: "category", Kind: KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: EncodingRaw, RowsOf: "boxes"},
		{Name: "embedding", Kind: KindNDArray, DType: "float64", Shape: []int{2, 3}, Encoding: EncodingRaw},
		{Name: "raw", Kind: KindBytes, Encoding: EncodingRaw},
		{Name: "info", Kind: KindJSON, Encoding: EncodingRaw},
		{Name: "mask", Kind: KindImage, DType: "uint8", Shape: []int{-1, -1, 1}, Encoding: EncodingRaw, Geometry: GeometryMask},
	}
}

// leBytes encodes numbers as little-endian bytes.
func leBytes[T int64 | int32 | float32 | float64 | uint8](v ...T) []byte {
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, v)
	return buf.Bytes()
}

// testFieldsRecords makes n records of testSchema for an hwc uint8 sample [-1, -1, 3]
// (hwShape) or [4, 5, 3]: record i has i%3 boxes (0 included) and an empty caption when i%4 == 0.
func testFieldsRecords(n int, varShape bool) []fieldsRecord {
	recs := make([]fieldsRecord, n)
	for i := range recs {
		h, w := 4, 5
		if varShape {
			h, w = 1+i%3, 2+i%4
		}
		data := make([]byte, h*w*3)
		for j := range data {
			data[j] = byte(i*7 + j)
		}
		k := i % 3
		var boxes []float32
		var cats []int64
		for b := range k {
			boxes = append(boxes, float32(b), 0.5, float32(b)+1.25, float32(w))
			cats = append(cats, int64(10*i+b))
		}
		caption := strings.Repeat("é ", i%4)
		mask := make([]byte, h*w)
		for j := range mask {
			mask[j] = byte(j % 2)
		}
		recs[i] = fieldsRecord{data: data, shape: []int{h, w, 3}, label: int64(i) - 1, fields: [][]byte{
			[]byte(caption), leBytes(boxes...), leBytes(cats...), leBytes(1.5, -2, float64(i), 4, 5, math.Pi),
			{byte(i), 0, 255}, []byte(`{"i":` + string(rune('0'+i%10)) + `,"s":"x"}`), mask,
		}}
	}
	return recs
}

// buildFieldsShard writes recs with opts into memory and returns the file bytes.
func buildFieldsShard(t testing.TB, opts WriterOptions, recs []fieldsRecord) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.AppendFields(r.data, r.shape, r.label, nil, nil, r.fields); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func fieldsOpts(varShape bool) WriterOptions {
	spec := SampleSpec{Shape: []int{4, 5, 3}, DType: Uint8, Layout: "hwc"}
	if varShape {
		spec.Shape = []int{-1, -1, 3}
	}
	return WriterOptions{Sample: spec, Fields: testSchema()}
}

// checkFieldsRecords reads every record of b back and compares it with recs.
func checkFieldsRecords(t *testing.T, b []byte, recs []fieldsRecord) *Reader {
	t.Helper()
	r, err := NewReader(bytes.NewReader(b), int64(len(b)), "f.pks")
	if err != nil {
		t.Fatal(err)
	}
	if r.Version() != 3 || !FieldsEqual(r.Fields(), testSchema()) {
		t.Fatalf("version %d, fields %+v", r.Version(), r.Fields())
	}
	if r.Len() != len(recs) {
		t.Fatalf("Len %d, want %d", r.Len(), len(recs))
	}
	for i, want := range recs {
		sample, fields, err := r.RecordFields(i)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sample, want.data) || r.Label(i) != want.label || int64(len(sample)) != r.SampleLen(i) {
			t.Fatalf("record %d: sample or label differs", i)
		}
		if s, err := r.RecordShape(i); err != nil || !slices.Equal(s, want.shape) {
			t.Fatalf("record %d: shape %v (%v), want %v", i, s, err, want.shape)
		}
		for k := range fields {
			if !bytes.Equal(fields[k], want.fields[k]) {
				t.Fatalf("record %d field %d: %q, want %q", i, k, fields[k], want.fields[k])
			}
		}
		if text, err := FieldText(fields[0]); err != nil || text != string(want.fields[0]) {
			t.Fatalf("record %d: FieldText %q %v", i, text, err)
		}
		if rows := r.h.schema[1].Rows(fields[1]); rows != i%3 || len(FieldFloat32s(fields[1])) != 4*rows || len(FieldInt64s(fields[2])) != rows {
			t.Fatalf("record %d: %d box rows, want %d", i, rows, i%3)
		}
		if FieldInt64s(fields[2])[:0] == nil || (i%3 > 0 && FieldInt64s(fields[2])[0] != int64(10*i)) {
			t.Fatalf("record %d: categories %v", i, FieldInt64s(fields[2]))
		}
		if e := FieldFloat64s(fields[3]); e[5] != math.Pi || e[2] != float64(i) {
			t.Fatalf("record %d: embedding %v", i, e)
		}
	}
	return r
}

func TestFieldsRoundTrip(t *testing.T) {
	for _, varShape := range []bool{false, true} {
		recs := testFieldsRecords(9, varShape)
		b := buildFieldsShard(t, fieldsOpts(varShape), recs)
		checkFieldsRecords(t, b, recs)
		if err := Scan(bytes.NewReader(b), int64(len(b)), "f.pks", nil); err != nil {
			t.Fatalf("Scan: %v", err)
		}
	}
}

// TestFieldsImageCHW: an image field of a chw sample has the record's height and width.
func TestFieldsImageCHW(t *testing.T) {
	opts := WriterOptions{
		Sample: SampleSpec{Shape: []int{3, -1, -1}, DType: Float32, Layout: "chw"},
		Fields: []Field{{Name: "mask", Kind: KindImage, DType: "uint8", Shape: []int{2, -1, -1}, Encoding: EncodingRaw}},
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AppendFields(make([]byte, 3*2*5*4), []int{3, 2, 5}, 1, nil, nil, [][]byte{make([]byte, 2*5*2)}); err != nil {
		t.Fatal(err)
	}
	if err := w.AppendFields(make([]byte, 3*2*5*4), []int{3, 2, 5}, 1, nil, nil, [][]byte{make([]byte, 2*5*3)}); err == nil || !strings.Contains(err.Error(), `"mask"`) {
		t.Fatalf("a mask of another size: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "chw.pks")
	if err != nil {
		t.Fatal(err)
	}
	if _, f, err := r.RecordFields(0); err != nil || len(f[0]) != 20 {
		t.Fatalf("mask %d bytes, %v", len(f[0]), err)
	}
}

// TestFieldsWriterRefuses: values that do not fit their kind are refused, naming the field,
// and leave the writer usable.
func TestFieldsWriterRefuses(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, fieldsOpts(true))
	if err != nil {
		t.Fatal(err)
	}
	good := testFieldsRecords(3, true)[2]
	bad := func(k int, v []byte, want string) {
		t.Helper()
		fields := slices.Clone(good.fields)
		fields[k] = v
		err := w.AppendFields(good.data, good.shape, 0, nil, nil, fields)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("field %d = %q: error %v, want %q", k, v, err, want)
		}
	}
	bad(0, []byte{'a', 0xff, 'b'}, `field "caption": text is not valid UTF-8`)
	bad(1, make([]byte, 17), `field "boxes"`)
	bad(2, leBytes[int64](1), `field "category" has 1 rows, its rows_of field "boxes" has 2`)
	bad(3, leBytes[float64](1), `field "embedding"`)
	bad(5, []byte(`{"a":`), `field "info": not one valid JSON value`)
	bad(6, make([]byte, 3), `field "mask"`)
	if err := w.AppendFields(good.data, good.shape, 0, nil, nil, good.fields[:2]); err == nil {
		t.Fatal("2 values for 7 fields accepted")
	}
	if err := w.AppendShape(good.data, good.shape, 0, nil, nil); err == nil {
		t.Fatal("AppendShape on a schema accepted")
	}
	if err := w.AppendFields(good.data, good.shape, 0, nil, nil, good.fields); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Len() != 1 {
		t.Fatalf("%d records", w.Len())
	}
}

func TestFieldsBadSchema(t *testing.T) {
	spec := SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}
	nd := func(name, dtype string, shape ...int) Field {
		return Field{Name: name, Kind: KindNDArray, DType: dtype, Shape: shape, Encoding: EncodingRaw}
	}
	for _, c := range []struct {
		f    []Field
		want string
	}{
		{[]Field{nd("Caps", "int64", -1)}, `name "Caps"`},
		{[]Field{nd("", "int64", -1)}, `name ""`},
		{[]Field{nd(strings.Repeat("a", 65), "int64", -1)}, `want 1 to 64 bytes`},
		{[]Field{nd("label", "int64", -1)}, `reserved`},
		{[]Field{nd("a", "int64", -1), nd("a", "int64", -1)}, `"a": named twice`},
		{[]Field{nd("a", "int16", -1)}, `field "a": dtype "int16"`},
		{[]Field{nd("a", "int64", 4, -1)}, `field "a": shape [4 -1]: dimension 1 is -1`},
		{[]Field{nd("a", "int64")}, `field "a": shape []`},
		{[]Field{nd("a", "int64", 0)}, `field "a": shape [0]`},
		{[]Field{{Name: "t", Kind: KindText}}, `field "t": encoding ""`},
		{[]Field{{Name: "t", Kind: KindText, Encoding: "zstd"}}, `field "t": encoding "zstd"`},
		{[]Field{{Name: "t", Kind: "string", Encoding: EncodingRaw}}, `field "t": unknown kind "string"`},
		{[]Field{{Name: "t", Kind: KindText, DType: "uint8", Encoding: EncodingRaw}}, `field "t": a text field has no dtype`},
		{[]Field{{Name: "m", Kind: KindImage, DType: "uint8", Shape: []int{1, -1, -1}, Encoding: EncodingRaw}}, `field "m": shape [1 -1 -1]`},
		{[]Field{{Name: "m", Kind: KindImage, DType: "float32", Shape: []int{-1, -1, 1}, Encoding: EncodingRaw}}, `field "m": dtype "float32"`},
		{[]Field{{Name: "b", Kind: KindNDArray, DType: "float32", Shape: []int{-1, 5}, Encoding: EncodingRaw, Geometry: GeometryBoxes}}, `field "b": a boxes field`},
		{[]Field{nd("c", "int64", -1), {Name: "d", Kind: KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: EncodingRaw, RowsOf: "c"}}, `field "d": rows_of "c" is not a boxes field`},
		{[]Field{nd("c", "int64", 3), {Name: "d", Kind: KindNDArray, DType: "int64", Shape: []int{3}, Encoding: EncodingRaw, RowsOf: "c"}}, `field "d": rows_of "c" needs a variable row count`},
	} {
		_, err := NewWriter(&bytes.Buffer{}, WriterOptions{Sample: spec, Fields: c.f})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("schema %+v: error %v, want %q", c.f, err, c.want)
		}
	}
	many := make([]Field, MaxFields+1)
	for i := range many {
		many[i] = nd("f"+strings.Repeat("x", i), "uint8", 1)
	}
	if _, err := NewWriter(&bytes.Buffer{}, WriterOptions{Sample: spec, Fields: many}); err == nil {
		t.Error("65 fields accepted")
	}
	video := SampleSpec{Shape: []int{4, -1, -1, 3}, DType: Uint8, Layout: "thwc"}
	if _, err := NewWriter(&bytes.Buffer{}, WriterOptions{Sample: video, Fields: []Field{{Name: "m", Kind: KindImage, DType: "uint8", Shape: []int{-1, -1, 1}, Encoding: EncodingRaw}}}); err == nil {
		t.Error("an image field of a video sample accepted")
	}
	if _, err := NewWriter(&bytes.Buffer{}, WriterOptions{Sample: spec, NoShapes: true, Fields: []Field{nd("a", "int64", -1)}}); err == nil {
		t.Error("NoShapes with fields accepted")
	}
}

// TestFieldsVersionByteIdentity: without fields the writer writes versions 1 and 2, and
// AppendFields with no values is AppendShape.
func TestFieldsVersionByteIdentity(t *testing.T) {
	for _, spec := range []SampleSpec{{Shape: []int{2, 2, 3}, DType: Uint8, Layout: "hwc"}, {Shape: []int{-1, 2, 3}, DType: Uint8, Layout: "hwc"}} {
		opts := WriterOptions{Sample: spec, HasMeta: true}
		recs := randomRecords(opts, 5, 3)
		want := buildShard(t, opts, recs)
		var buf bytes.Buffer
		w, err := NewWriter(&buf, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.AppendFields(r.data, r.shape, r.label, r.aux, r.meta, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("%v: AppendFields without fields wrote other bytes", spec.Shape)
		}
		if v := le.Uint16(want[hdrVersionOff:]); v > 2 {
			t.Fatalf("%v: version %d without fields", spec.Shape, v)
		}
		r, err := NewReader(bytes.NewReader(want), int64(len(want)), "x.pks")
		if err != nil {
			t.Fatal(err)
		}
		if r.Fields() != nil {
			t.Fatal("fields in a shard without fields")
		}
		s, f, err := r.RecordFields(1)
		if err != nil || !bytes.Equal(s, recs[1].data) || f != nil {
			t.Fatalf("RecordFields of a v%d shard: %v", r.Version(), err)
		}
	}
}

var _ = errors.Is

// TestFieldsAppendFrom: records of shards with fields appended in runs (AppendFrom, as merge
// does) give the bytes of one writer given every record; through the record-by-record path
// (a writer with metadata) the fields come along too; another schema is refused.
func TestFieldsAppendFrom(t *testing.T) {
	opts := fieldsOpts(true)
	recs := testFieldsRecords(11, true)
	want := buildFieldsShard(t, opts, recs)
	var srcs []*Reader
	for _, part := range [][]fieldsRecord{recs[:4], recs[4:]} {
		b := buildFieldsShard(t, opts, part)
		r, err := NewReader(bytes.NewReader(b), int64(len(b)), "part.pks")
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, r)
	}
	appendAll := func(opts WriterOptions, step int) ([]byte, error) {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, opts)
		if err != nil {
			return nil, err
		}
		for _, r := range srcs {
			for i := 0; i < r.Len(); i += step {
				j := min(r.Len(), i+step)
				_, n := r.DataRange(i, j)
				data, err := r.ReadRecords(i, j, make([]byte, n))
				if err != nil {
					return nil, err
				}
				if err := w.AppendFrom(r, i, j, data); err != nil {
					return nil, err
				}
			}
		}
		err = w.Close()
		return buf.Bytes(), err
	}
	for _, step := range []int{1, 3, 100} {
		got, err := appendAll(opts, step)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("runs of %d: other bytes than one writer (%v)", step, err)
		}
	}
	withMeta := opts
	withMeta.HasMeta = true
	got, err := appendAll(withMeta, 2)
	if err != nil {
		t.Fatal(err)
	}
	checkFieldsRecords(t, got, recs)
	other := opts
	other.Fields = slices.Clone(opts.Fields)
	other.Fields[0].Name = "text"
	if _, err := appendAll(other, 2); err == nil || !strings.Contains(err.Error(), "fields [caption:text") {
		t.Fatalf("another schema: %v", err)
	}
}

// buildFieldsDataset writes recs into a dataset of shards of the given record counts.
func buildFieldsDataset(t *testing.T, opts WriterOptions, recs []fieldsRecord, counts []int) string {
	return buildDatasetWith(t, opts, counts, func(w *Writer, i int) error {
		r := recs[i]
		return w.AppendFields(r.data, r.shape, r.label, nil, nil, r.fields)
	})
}

// TestFieldsDatasetLoader: a dataset with fields gives each record's sample and field values
// through Dataset.RecordFields and through the Loader's batches (by field name), in order and
// shuffled, for fixed and variable sample shapes.
func TestFieldsDatasetLoader(t *testing.T) {
	for _, varShape := range []bool{false, true} {
		opts := fieldsOpts(varShape)
		opts.Label = LabelSpec{DType: "int64"}
		recs := testFieldsRecords(23, varShape)
		dir := buildFieldsDataset(t, opts, recs, []int{10, 13})
		d, err := OpenDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !FieldsEqual(d.Fields(), testSchema()) {
			t.Fatalf("Dataset.Fields %+v", d.Fields())
		}
		for i, want := range recs {
			sample, fields, err := d.RecordFields(int64(i))
			if err != nil || !bytes.Equal(sample, want.data) || !bytes.Equal(fields[6], want.fields[6]) {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		for _, shuffle := range []bool{false, true} {
			l, err := d.NewLoader(LoaderOptions{BatchSize: 4, ReadSize: 1, Shuffle: shuffle, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for l.Next() {
				b := l.Batch()
				if b.BatchShape() != nil {
					t.Fatal("BatchShape of records with fields")
				}
				if _, err := b.Uint8(); err == nil {
					t.Fatal("a uint8 view of records with fields")
				}
				captions, err := b.FieldValues("caption")
				if err != nil {
					t.Fatal(err)
				}
				for k := range b.Len() {
					want := recs[b.Indices[k]]
					if !bytes.Equal(b.Sample(k), want.data) || !slices.Equal(b.Shape(k), want.shape) || b.Labels[k] != want.label {
						t.Fatalf("record %d: sample or shape %v differs", b.Indices[k], b.Shape(k))
					}
					for f, fd := range testSchema() {
						v, err := b.Field(k, fd.Name)
						if err != nil || !bytes.Equal(v, want.fields[f]) {
							t.Fatalf("record %d field %q: %q, want %q (%v)", b.Indices[k], fd.Name, v, want.fields[f], err)
						}
					}
					if string(captions[k]) != string(want.fields[0]) {
						t.Fatalf("record %d: caption %q", b.Indices[k], captions[k])
					}
					seen++
				}
				if _, err := b.Field(0, "nope"); err == nil {
					t.Fatal("an unknown field name accepted")
				}
			}
			if err := l.Close(); err != nil || l.Err() != nil || seen != len(recs) {
				t.Fatalf("read %d records: %v %v", seen, l.Err(), err)
			}
		}
		d.Close()
	}
}

// TestFieldsDatasetSchemaMismatch: a shard whose schema differs from the manifest's is
// refused, the error naming the shard and both schemas.
func TestFieldsDatasetSchemaMismatch(t *testing.T) {
	opts := fieldsOpts(true)
	dir := buildFieldsDataset(t, opts, testFieldsRecords(4, true), []int{2, 2})
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, edit := range []func(m *Manifest){
		func(m *Manifest) { m.Fields[2].DType = "int32" },
		func(m *Manifest) { m.Fields = m.Fields[:6] },
		func(m *Manifest) { m.Fields = nil },
	} {
		mm := *m
		mm.Fields = slices.Clone(m.Fields)
		edit(&mm)
		b, err := mm.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ManifestName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := OpenDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Record(0)
		d.Close()
		if err == nil || !strings.Contains(err.Error(), "shard-00000.pks: fields [caption:text") || !strings.Contains(err.Error(), "the manifest says") {
			t.Fatalf("Record(0) = %v, want the schema mismatch naming the shard", err)
		}
	}
}
