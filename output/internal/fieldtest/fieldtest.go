// Package fieldtest holds what the output formats' tests share to test fields (shard.Field): a
// schema of every kind, records for it, and the checks of a dataset read back, by the output's
// own reader (output.Dataset.Fields) and by Python (NumPy, h5py).
package fieldtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os/exec"
	"strings"
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// Sample is the records' spec: 4×6 RGB, uint8, hwc.
var Sample = shard.SampleSpec{Shape: []int{4, 6, 3}, DType: shard.Uint8, Layout: "hwc"}

// Schema has a field of every kind: text, json, bytes, variable ndarrays (boxes, the boxes'
// categories, int32 tags), fixed ndarrays (float64 [2, 3], a uint8 scalar) and a mask.
func Schema() []shard.Field {
	raw := shard.EncodingRaw
	return []shard.Field{
		{Name: "caption", Kind: shard.KindText, Encoding: raw},
		{Name: "info", Kind: shard.KindJSON, Encoding: raw},
		{Name: "blob", Kind: shard.KindBytes, Encoding: raw},
		{Name: "boxes", Kind: shard.KindNDArray, DType: "float32", Shape: []int{-1, 4}, Encoding: raw, Geometry: shard.GeometryBoxes},
		{Name: "category", Kind: shard.KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: raw, RowsOf: "boxes"},
		{Name: "tags", Kind: shard.KindNDArray, DType: "int32", Shape: []int{-1}, Encoding: raw},
		{Name: "emb", Kind: shard.KindNDArray, DType: "float64", Shape: []int{2, 3}, Encoding: raw},
		{Name: "flag", Kind: shard.KindNDArray, DType: "uint8", Shape: []int{}, Encoding: raw},
		{Name: "mask", Kind: shard.KindImage, DType: "uint8", Shape: []int{-1, -1, 1}, Encoding: raw, Geometry: shard.GeometryMask},
	}
}

// Records returns n records of Sample with values of Schema: record i has i boxes (record 0
// none), an empty caption and blob in record 0, a NUL byte in every other blob.
func Records(n int) []output.Record {
	var recs []output.Record
	for i := range n {
		data := make([]byte, Sample.Size())
		for j := range data {
			data[j] = byte(i*17 + j)
		}
		var boxes, cats, tags, emb []byte
		for b := range i {
			for _, v := range []float32{float32(b), 0.5, float32(b) + 1.25, 3} {
				boxes = binary.LittleEndian.AppendUint32(boxes, math.Float32bits(v))
			}
			cats = binary.LittleEndian.AppendUint64(cats, uint64(int64(b*7-3)))
		}
		for t := range (i * 2) % 5 {
			tags = binary.LittleEndian.AppendUint32(tags, uint32(int32(-t*1000+i)))
		}
		for e := range 6 {
			emb = binary.LittleEndian.AppendUint64(emb, math.Float64bits(float64(i)+float64(e)/8))
		}
		mask := make([]byte, 4*6)
		for j := range mask {
			mask[j] = byte((i + j) % 3)
		}
		caption := ""
		if i > 0 {
			caption = fmt.Sprintf("record %d: ünïcode ✓ %s", i, strings.Repeat("x", i*9))
		}
		blob := bytes.Repeat([]byte{byte(i), 0, 0xff}, i)
		recs = append(recs, output.Record{Data: data, Label: int64(i % 3), Fields: [][]byte{
			[]byte(caption), []byte(fmt.Sprintf(`{"i":%d,"tags":["a","ü"]}`, i)), blob,
			boxes, cats, tags, emb, {byte(200 + i)}, mask,
		}})
	}
	return recs
}

// CheckDataset checks that ds gives every record's field values as written.
func CheckDataset(t *testing.T, ds output.Dataset, recs []output.Record) {
	t.Helper()
	if ds.Len() != int64(len(recs)) {
		t.Fatalf("%d records, want %d", ds.Len(), len(recs))
	}
	for i, r := range recs {
		got, err := ds.Fields(int64(i))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if len(got) != len(r.Fields) {
			t.Fatalf("record %d: %d field values, want %d", i, len(got), len(r.Fields))
		}
		for k := range got {
			if !bytes.Equal(got[k], r.Fields[k]) {
				t.Errorf("record %d field %d: read back %x, wrote %x", i, k, got[k], r.Fields[k])
			}
		}
	}
	if _, err := ds.Fields(int64(len(recs))); err == nil {
		t.Error("record past the end: no error")
	}
}

// Python runs script with Debian's Python on args, skipping the test when import fails.
func Python(t *testing.T, imports, script string, args ...string) string {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import "+imports).Run(); err != nil {
		t.Skipf("no %s for %s: %v", imports, py, err)
	}
	out, err := exec.Command(py, append([]string{"-c", script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// Want is what a Python reader must print for recs, one line per field and record: "NAME I
// DTYPE SHAPE SHA256", the value's NumPy dtype and shape (text and json: "str -"; bytes:
// "bytes -") and the SHA-256 of its bytes (text: UTF-8), in schema order per record.
func Want(t *testing.T, recs []output.Record) string {
	t.Helper()
	layouts, err := output.FieldLayouts(Schema(), Sample)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i, r := range recs {
		for k, l := range layouts {
			v := r.Fields[k]
			sum := sha256.Sum256(v)
			dt, shape := "str", "-"
			switch l.Field.Kind {
			case shard.KindBytes:
				dt = "bytes"
			case shard.KindNDArray, shard.KindImage:
				dt = map[string]string{"uint8": "|u1", "int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8"}[l.Field.DType]
				s := append([]int(nil), l.Shape...)
				if !l.Fixed {
					s[0] = len(v) / l.RowBytes
				}
				shape = strings.ReplaceAll(fmt.Sprint(s), " ", ",")
			}
			lines = append(lines, fmt.Sprintf("%s %d %s %s %s", l.Field.Name, i, dt, shape, hex.EncodeToString(sum[:])))
		}
	}
	return strings.Join(lines, "\n")
}

// PyLine is the Python function that prints one line of Want for a value v (a NumPy array, a
// str or bytes) of field name, record i.
const PyLine = `
import hashlib, numpy
def line(name, i, v):
    if isinstance(v, str):
        dt, shape, b = "str", "-", v.encode()
    elif isinstance(v, (bytes, bytearray)):
        dt, shape, b = "bytes", "-", bytes(v)
    else:
        v = numpy.asarray(v)
        dt, shape, b = v.dtype.str, "[" + ",".join(str(d) for d in v.shape) + "]", v.tobytes(order="C")
    print(name, i, dt, shape, hashlib.sha256(b).hexdigest())
`
