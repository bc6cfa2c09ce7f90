package shard

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// The shared fixture of format version 3, testdata/fields-v3: a dataset of two shards with a
// field of every kind, written by this package's writer, and expected.json, the records'
// values as plain JSON (FORMAT.md "Fields"), written from the values given to the writer (not
// from a reader). The Python reader's tests read both. go test -run TestFieldsFixture -update
// rewrites them.

// fixtureDir is the fixture's folder under testdata.
const fixtureDir = "fields-v3"

// fixtureSchema has a field of every kind; the sample is an hwc uint8 image of varying size.
func fixtureSchema() []Field {
	return []Field{
		{Name: "caption", Kind: KindText, Encoding: EncodingRaw},
		{Name: "boxes", Kind: KindNDArray, DType: "float32", Shape: []int{-1, 4}, Encoding: EncodingRaw, Geometry: GeometryBoxes},
		{Name: "category", Kind: KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: EncodingRaw, RowsOf: "boxes"},
		{Name: "embedding", Kind: KindNDArray, DType: "float64", Shape: []int{2, 3}, Encoding: EncodingRaw},
		{Name: "tags", Kind: KindNDArray, DType: "int32", Shape: []int{-1}, Encoding: EncodingRaw},
		{Name: "thumb", Kind: KindNDArray, DType: "uint8", Shape: []int{2, 2}, Encoding: EncodingRaw},
		{Name: "raw", Kind: KindBytes, Encoding: EncodingRaw},
		{Name: "info", Kind: KindJSON, Encoding: EncodingRaw},
		{Name: "mask", Kind: KindImage, DType: "uint8", Shape: []int{-1, -1, 1}, Encoding: EncodingRaw, Geometry: GeometryMask},
	}
}

// fixtureRecord is one record of the fixture, as typed values.
type fixtureRecord struct {
	h, w     int
	label    int64
	caption  string
	boxes    [][4]float32
	category []int64
	emb      [2][3]float64
	tags     []int32
	thumb    [2][2]uint8
	raw      []byte
	info     string // JSON text
}

func fixtureRecords() []fixtureRecord {
	return []fixtureRecord{
		{h: 2, w: 3, label: 0, caption: "a cat on a mat", boxes: [][4]float32{{0, 0.5, 2, 1.75}}, category: []int64{17},
			emb: [2][3]float64{{1, -2.5, 0.125}, {3, 4, 5}}, tags: []int32{1, -2, 3}, thumb: [2][2]uint8{{0, 255}, {7, 8}}, raw: []byte{0, 1, 2, 255}, info: `{"id":1,"src":"coco"}`},
		{h: 1, w: 1, label: -1, caption: "", boxes: nil, category: nil,
			emb: [2][3]float64{{0, 0, 0}, {0, 0, -1}}, tags: nil, thumb: [2][2]uint8{{1, 1}, {1, 1}}, raw: nil, info: `[]`},
		{h: 4, w: 2, label: 5, caption: "éte\u00e9 ☃ 日本語", boxes: [][4]float32{{0, 0, 1, 1}, {0.25, 0.5, 1.5, 3.75}, {1, 1, 2, 4}}, category: []int64{1, 2, -9007199254740993},
			emb: [2][3]float64{{1e-3, 2e10, -0.5}, {1, 2, 3}}, tags: []int32{2147483647}, thumb: [2][2]uint8{{9, 8}, {7, 6}}, raw: []byte("\x00\xff"), info: `{"nested":{"a":[1,2.5,null,true]},"s":"\u00e9"}`},
		{h: 3, w: 3, label: 2, caption: "line one\nline two\t\"quoted\"", boxes: nil, category: nil,
			emb: [2][3]float64{{-1, -1, -1}, {1, 1, 1}}, tags: []int32{0, 0}, thumb: [2][2]uint8{{0, 0}, {0, 0}}, raw: []byte("text"), info: `"just a string"`},
		{h: 2, w: 2, label: 1, caption: "two boxes", boxes: [][4]float32{{0, 0, 2, 2}, {0.5, 0.5, 1, 1}}, category: []int64{3, 4},
			emb: [2][3]float64{{0.1, 0.2, 0.3}, {0.4, 0.5, 0.6}}, tags: []int32{-2147483648}, thumb: [2][2]uint8{{1, 2}, {3, 4}}, raw: []byte{}, info: `42`},
	}
}

// sample and mask bytes of fixture record i.
func (r fixtureRecord) sample(i int) []byte {
	d := make([]byte, r.h*r.w*3)
	for j := range d {
		d[j] = byte(31*i + 7*j)
	}
	return d
}

func (r fixtureRecord) mask() []byte {
	m := make([]byte, r.h*r.w)
	for j := range m {
		m[j] = byte(j % 3)
	}
	return m
}

// values returns the record's field values in fixtureSchema order, as raw bytes.
func (r fixtureRecord) values() [][]byte {
	var boxes []float32
	for _, b := range r.boxes {
		boxes = append(boxes, b[:]...)
	}
	var emb []float64
	for _, row := range r.emb {
		emb = append(emb, row[:]...)
	}
	return [][]byte{[]byte(r.caption), leBytes(boxes...), leBytes(r.category...), leBytes(emb...), leBytes(r.tags...),
		append(slices.Clone(r.thumb[0][:]), r.thumb[1][:]...), r.raw, []byte(r.info), r.mask()}
}

// expected returns the record's expected.json entry, from its typed values.
func (r fixtureRecord) expected(i int) map[string]any {
	sum := sha256.Sum256(r.sample(i))
	msum := sha256.Sum256(r.mask())
	boxes := [][]float32{}
	for _, b := range r.boxes {
		boxes = append(boxes, b[:])
	}
	emb := [][]float64{r.emb[0][:], r.emb[1][:]}
	thumb := [][]int{{int(r.thumb[0][0]), int(r.thumb[0][1])}, {int(r.thumb[1][0]), int(r.thumb[1][1])}}
	return map[string]any{
		"label": r.label, "shape": []int{r.h, r.w, 3}, "sample_sha256": hex.EncodeToString(sum[:]),
		"fields": map[string]any{
			"caption": r.caption, "boxes": boxes, "category": orEmpty(r.category), "embedding": emb, "tags": orEmpty(r.tags),
			"thumb": thumb, "raw": base64.StdEncoding.EncodeToString(r.raw), "info": json.RawMessage(r.info),
			"mask": map[string]any{"shape": []int{r.h, r.w, 1}, "sha256": hex.EncodeToString(msum[:])},
		},
	}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// fixtureFiles builds the fixture's files in memory: name → bytes.
func fixtureFiles(t *testing.T) map[string][]byte {
	recs := fixtureRecords()
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}, Label: LabelSpec{DType: "int64", Aux: []string{}}, Fields: fixtureSchema()}
	dir := buildDatasetWith(t, opts, []int{3, 2}, func(w *Writer, i int) error {
		r := recs[i]
		return w.AppendFields(r.sample(i), []int{r.h, r.w, 3}, r.label, nil, nil, r.values())
	})
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Packer, m.Inputs = "fixture", m.Count
	files := map[string][]byte{}
	if files[ManifestName], err = m.Marshal(); err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if files[f.Path], err = os.ReadFile(filepath.Join(dir, f.Path)); err != nil {
			t.Fatal(err)
		}
	}
	exp := map[string]any{"fields": fixtureSchema()}
	var rows []map[string]any
	for i, r := range recs {
		rows = append(rows, r.expected(i))
	}
	exp["records"] = rows
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(exp); err != nil {
		t.Fatal(err)
	}
	files["expected.json"] = buf.Bytes()
	return files
}

// fieldJSON is a field value as expected.json gives it, decoded from its bytes with the field's
// schema (the way a reader that knows only FORMAT.md would).
func fieldJSON(t *testing.T, f Field, rec []int, b []byte) any {
	switch f.Kind {
	case KindText:
		s, err := FieldText(b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	case KindJSON:
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	case KindBytes:
		return base64.StdEncoding.EncodeToString(b)
	case KindImage:
		sum := sha256.Sum256(b)
		return map[string]any{"shape": []int{rec[0], rec[1], f.Shape[2]}, "sha256": hex.EncodeToString(sum[:])}
	}
	var flat []any
	switch f.DType {
	case "uint8":
		for _, v := range b {
			flat = append(flat, v)
		}
	case "int32":
		for _, v := range FieldInt32s(b) {
			flat = append(flat, v)
		}
	case "int64":
		for _, v := range FieldInt64s(b) {
			flat = append(flat, v)
		}
	case "float32":
		for _, v := range FieldFloat32s(b) {
			flat = append(flat, v)
		}
	case "float64":
		for _, v := range FieldFloat64s(b) {
			flat = append(flat, v)
		}
	}
	shape := slices.Clone(f.Shape)
	shape[0] = f.Rows(b)
	return nest(flat, shape)
}

// nest shapes a flat list as nested lists of shape.
func nest(flat []any, shape []int) any {
	out := []any{}
	if len(shape) == 1 {
		return append(out, flat...)
	}
	step := len(flat) / max(shape[0], 1)
	for i := range shape[0] {
		out = append(out, nest(flat[i*step:(i+1)*step], shape[1:]))
	}
	return out
}

// TestFieldsFixture checks the checked-in fixture is what the writer writes, and that the Go
// reader gives back expected.json's values (decoded as plain JSON on both sides).
func TestFieldsFixture(t *testing.T) {
	dir := filepath.Join("testdata", fixtureDir)
	files := fixtureFiles(t)
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			writeTestdata(t, filepath.Join(fixtureDir, name), b)
		}
	}
	for name, b := range files {
		disk, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(disk, b) {
			t.Fatalf("testdata/%s/%s is missing or stale (%v); run go test -run TestFieldsFixture -update", fixtureDir, name, err)
		}
	}
	var exp struct {
		Fields  []Field          `json:"fields"`
		Records []map[string]any `json:"records"`
	}
	dec := json.NewDecoder(bytes.NewReader(files["expected.json"]))
	dec.UseNumber() // int64 values beyond 2^53 compare exactly
	if err := dec.Decode(&exp); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !FieldsEqual(d.Fields(), exp.Fields) || d.Len() != int64(len(exp.Records)) {
		t.Fatalf("schema %+v, %d records; expected.json has %+v, %d", d.Fields(), d.Len(), exp.Fields, len(exp.Records))
	}
	for i := range d.Len() {
		sample, fields, err := d.RecordFields(i)
		if err != nil {
			t.Fatal(err)
		}
		shape, err := d.RecordShape(i)
		if err != nil {
			t.Fatal(err)
		}
		label, _ := d.Label(i)
		sum := sha256.Sum256(sample)
		got := map[string]any{"label": label, "shape": shape, "sample_sha256": hex.EncodeToString(sum[:]), "fields": map[string]any{}}
		for k, f := range d.Fields() {
			got["fields"].(map[string]any)[f.Name] = fieldJSON(t, f, shape, fields[k])
		}
		var norm any
		b, _ := json.Marshal(got)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&norm); err != nil {
			t.Fatal(err)
		}
		if want := any(exp.Records[i]); !reflect.DeepEqual(norm, want) {
			t.Errorf("record %d:\n got %s\nwant %v", i, b, want)
		}
	}
}
