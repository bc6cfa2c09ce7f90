package parquet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/source"
)

// fieldsWriter writes, with pyarrow, rows of an image, a caption (binary, so that a row can
// hold bytes that are not UTF-8), a multi-label list, a score and the Hugging Face
// object-detection struct, with no label column.
const fieldsWriter = `
import sys, pyarrow as pa, pyarrow.parquet as pq
out, img = sys.argv[1], open(sys.argv[2], "rb").read()
objects = pa.struct([("bbox", pa.list_(pa.list_(pa.float32()))), ("category", pa.list_(pa.int64()))])
t = pa.table({
  "image": pa.array([{"bytes": img, "path": None}] * 5, pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
  "caption": pa.array([b"a dog", "caf\u00e9".encode(), None, b"\xff\xfe", b"x"], pa.binary()),
  "labels": pa.array([[3, 1], [], [2], [0], None], pa.list_(pa.int64())),
  "score": pa.array([0.5, 1.0, 2.0, 3.0, 4.0], pa.float64()),
  "objects": pa.array([
     {"bbox": [[1, 2, 10, 20], [5, 5, 1, 1]], "category": [7, 8]},
     {"bbox": [], "category": []},
     {"bbox": [[0, 0, 1, 1]], "category": [1]},
     {"bbox": [[0, 0, 1, 1]], "category": [1]},
     {"bbox": [[0, 0, 1]], "category": [1]},
  ], objects),
})
pq.write_table(t, out, row_group_size=3)
`

func TestFields(t *testing.T) {
	py := testfix.NeedFixturePython(t, "pyarrow")
	dir := t.TempDir()
	path := filepath.Join(dir, "train.parquet")
	if out, err := exec.Command(py, "-c", fieldsWriter, path, testfix.Corpus("baseline-420.jpg")).CombinedOutput(); err != nil {
		t.Fatalf("pyarrow: %v\n%s", err, out)
	}
	s, err := Open(path, Options{Fields: []string{"caption", "labels", "score", "objects"}})
	if err != nil {
		t.Fatal(err)
	}
	var schema []string
	for _, f := range s.Info().Fields {
		schema = append(schema, fmt.Sprintf("%s:%s:%s%v:%s:%s", f.Name, f.Kind, f.DType, f.Shape, f.Geometry, f.RowsOf))
	}
	want := "caption:text:[]:: labels:ndarray:int64[-1]:: score:ndarray:float64[1]:: objects_bbox:ndarray:float32[-1 4]:boxes: objects_category:ndarray:int64[-1]::objects_bbox"
	if got := strings.Join(schema, " "); got != want {
		t.Fatalf("schema\n%s\nwant\n%s", got, want)
	}
	got := map[string]string{}
	err = s.Enumerate(context.Background(), func(it source.Item) error {
		err := s.Decode(context.Background(), it, func(c source.Clip) error {
			v := c.Fields
			got[it.Name] = fmt.Sprintf("%d|%s|%v|%v|%v|%v", c.Label, v[0].Bytes, ints(v[1].Bytes), f64s(v[2].Bytes), f32s(v[3].Bytes), ints(v[4].Bytes))
			return nil
		})
		var ie *source.InputError
		if errors.As(err, &ie) {
			got[it.Name] = "skip: " + ie.Err.Error()
		} else if err != nil {
			t.Fatalf("%s: %v", it.Name, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]string{
		"train.parquet#0": "-1|a dog|[3 1]|[0.5]|[1 2 11 22 5 5 6 6]|[7 8]",
		"train.parquet#1": "-1|café|[]|[1]|[]|[]",
		"train.parquet#2": "skip: bad field: caption is null",
		"train.parquet#3": "skip: bad field: caption is not UTF-8 text",
		"train.parquet#4": "skip: bad field: objects.bbox box 0 has 3 numbers, want 4 (x, y, width, height)",
	} {
		if got[name] != w {
			t.Errorf("%s: %q\nwant %q", name, got[name], w)
		}
	}
	for _, bad := range [][]string{{"nothere"}, {"image"}, {"caption", "Caption"}} {
		if _, err := Open(path, Options{Fields: bad}); err == nil {
			t.Errorf("--fields %v accepted", bad)
		}
	}
	if _, err := Open(path, Options{Fields: []string{"caption"}, LabelColumn: "label"}); err == nil {
		t.Error("--label-column naming a missing column accepted")
	}
}

func ints(b []byte) []int64 {
	var v []int64
	for i := 0; i+8 <= len(b); i += 8 {
		v = append(v, int64(binary.LittleEndian.Uint64(b[i:])))
	}
	return v
}

func f64s(b []byte) []float64 {
	var v []float64
	for i := 0; i+8 <= len(b); i += 8 {
		v = append(v, math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
	}
	return v
}

func f32s(b []byte) []float32 {
	var v []float32
	for i := 0; i+4 <= len(b); i += 4 {
		v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
	}
	return v
}
