package coco

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/packer-dev/packer/source"
)

// fixtureScript writes a COCO annotation file as the published format describes it (images,
// annotations, categories, with the members this source ignores: info, licenses,
// segmentation), and the images with Pillow.
const fixtureScript = `import json, sys, os
from PIL import Image
d = sys.argv[1]
os.makedirs(os.path.join(d, "val"), exist_ok=True)
def img(name, w, h, color):
    Image.new("RGB", (w, h), color).save(os.path.join(d, "val", name), quality=95)
img("a.jpg", 40, 30, (200, 10, 10))
img("b.jpg", 20, 20, (10, 200, 10))
img("c.jpg", 16, 12, (10, 10, 200))
img("wrongsize.jpg", 10, 10, (1, 2, 3))
img("badbox.jpg", 10, 10, (1, 2, 3))
img("nan.jpg", 10, 10, (1, 2, 3))
img("NaN Infinity.jpg", 10, 10, (1, 2, 3))
img("inf.jpg", 10, 10, (1, 2, 3))
coco = {
  "info": {"description": "fixture", "year": 2026},
  "licenses": [{"id": 1, "name": "x"}],
  "images": [
    {"id": 7, "file_name": "val/a.jpg", "width": 40, "height": 30},
    {"id": 2, "file_name": "val/b.jpg", "width": 20, "height": 20},
    {"id": 5, "file_name": "val/c.jpg", "width": 16, "height": 12},
    {"id": 9, "file_name": "val/missing.jpg", "width": 5, "height": 5},
    {"id": 11, "file_name": "val/wrongsize.jpg", "width": 12, "height": 10},
    {"id": 12, "file_name": "val/badbox.jpg", "width": 10, "height": 10},
    {"id": 15, "file_name": "val/inf.jpg", "width": 10, "height": 10},
    {"id": 14, "file_name": "val/NaN Infinity.jpg", "width": 10, "height": 10},
    {"id": 13, "file_name": "val/nan.jpg", "width": 10, "height": 10}
  ],
  "annotations": [
    {"id": 100, "image_id": 7, "bbox": [1.5, 2, 10, 5.25], "category_id": 18, "iscrowd": 0, "area": 40.5,
     "segmentation": [[1, 2, 3, 4, 5, 6]]},
    {"id": 101, "image_id": 2, "bbox": [0, 0, 20, 20], "category_id": 1, "iscrowd": 1, "area": 400,
     "segmentation": {"counts": [1, 2], "size": [20, 20]}},
    {"id": 102, "image_id": 7, "bbox": [30, 25, 50, 50], "category_id": 1, "iscrowd": 0, "area": 7},
    {"id": 103, "image_id": 99, "bbox": [0, 0, 1, 1], "category_id": 1, "iscrowd": 0, "area": 1},
    {"id": 104, "image_id": 99, "bbox": [0, 0, 1, 1], "category_id": 1, "iscrowd": 0, "area": 1},
    {"id": 105, "image_id": 12, "bbox": [0, 0, -1, 1], "category_id": 1, "iscrowd": 0, "area": 1},
    {"id": 106, "image_id": 13, "bbox": [float("nan"), 0, 1, 1], "category_id": 1, "iscrowd": 0, "area": 1},
    {"id": 107, "image_id": 14, "bbox": [1, 2, 3, 4], "category_id": 18, "iscrowd": 0, "area": 12},
    {"id": 108, "image_id": 15, "bbox": [0, 0, 1, 1], "category_id": 1, "iscrowd": 0, "area": -float("inf")}
  ],
  "categories": [{"id": 1, "name": "person", "supercategory": "p"}, {"id": 18, "name": "dog"}]
}
# json.dump writes the non-finite floats as the bare words NaN, Infinity and -Infinity.
with open(os.path.join(d, "instances.json"), "w") as f:
    json.dump(coco, f)
`

func writeFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("/usr/bin/python3", "-c", fixtureScript, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("fixture (needs Debian's python3-pil): %v\n%s", err, out)
	}
	return dir
}

type decoded struct {
	name   string
	clip   source.Clip
	reason string
}

func decodeAll(t *testing.T, s *Source) []decoded {
	t.Helper()
	var got []decoded
	err := s.Enumerate(context.Background(), func(it source.Item) error {
		d := decoded{name: it.Name}
		err := s.Decode(context.Background(), it, func(c source.Clip) error { d.clip = c; return nil })
		var ie *source.InputError
		switch {
		case errors.As(err, &ie):
			d.reason = ie.Err.Error()
		case err != nil:
			t.Fatalf("%s: %v", it.Name, err)
		}
		got = append(got, d)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func i64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func TestCOCO(t *testing.T) {
	dir := writeFixture(t)
	s, err := Open(filepath.Join(dir, "instances.json"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	info := s.Info()
	if len(info.Classes) != 19 || info.Classes[1] != "person" || info.Classes[18] != "dog" || info.Classes[5] != "" {
		t.Fatalf("classes %q", info.Classes)
	}
	if len(info.Fields) != 4 || info.Count != 10 {
		t.Fatalf("fields %v count %d", info.Fields, info.Count)
	}
	got := decodeAll(t, s)
	names := []string{"val/b.jpg", "val/c.jpg", "val/a.jpg", "val/missing.jpg", "val/wrongsize.jpg", "val/badbox.jpg", "val/nan.jpg", "val/NaN Infinity.jpg", "val/inf.jpg", "instances.json#image_id=99"}
	if len(got) != len(names) {
		t.Fatalf("%d items, want %d", len(got), len(names))
	}
	for i, n := range names {
		if got[i].name != n {
			t.Fatalf("item %d is %s, want %s (ascending image id, then the orphans)", i, got[i].name, n)
		}
	}
	// b: one crowd box covering the image.
	b := got[0].clip
	if b.Label != -1 || len(b.Fields) != 4 {
		t.Fatalf("b: label %d, %d fields", b.Label, len(b.Fields))
	}
	if fmtF(f32s(b.Fields[0].Bytes)) != "[0 0 20 20]" || fmtI(i64s(b.Fields[1].Bytes)) != "[1]" ||
		fmtI(i64s(b.Fields[2].Bytes)) != "[1]" || fmtF(f32s(b.Fields[3].Bytes)) != "[400]" {
		t.Fatalf("b's fields: %v %v %v %v", f32s(b.Fields[0].Bytes), i64s(b.Fields[1].Bytes), i64s(b.Fields[2].Bytes), f32s(b.Fields[3].Bytes))
	}
	// c: no annotations, kept with 0 rows.
	c := got[1].clip
	if got[1].reason != "" || len(c.Frames) != 1 || c.Frames[0].W != 16 || len(c.Fields[0].Bytes) != 0 || len(c.Fields[3].Bytes) != 0 {
		t.Fatalf("c: %q %+v", got[1].reason, c.Fields)
	}
	// a: two boxes in the file's order, x,y,w,h converted; the second reaches past the image
	// (kept: the engine clips it with the transform).
	a := got[2].clip
	if fmtF(f32s(a.Fields[0].Bytes)) != "[1.5 2 11.5 7.25 30 25 80 75]" || fmtI(i64s(a.Fields[1].Bytes)) != "[18 1]" {
		t.Fatalf("a's boxes %v categories %v", f32s(a.Fields[0].Bytes), i64s(a.Fields[1].Bytes))
	}
	if !bytes.Contains(a.Meta, []byte(`"image_id":7`)) {
		t.Fatalf("a's meta %s", a.Meta)
	}
	// The file name holding the words NaN and Infinity is read as it is (only bare words are
	// quoted), and its image packed.
	if got[7].reason != "" || fmtF(f32s(got[7].clip.Fields[0].Bytes)) != "[1 2 4 6]" || fmtF(f32s(got[7].clip.Fields[3].Bytes)) != "[12]" {
		t.Fatalf("%s: %q %v", got[7].name, got[7].reason, f32s(got[7].clip.Fields[0].Bytes))
	}
	for i, want := range map[int]string{
		3: "no such file", 4: "the image is 10x10, the annotation file says 12x10",
		5: "annotation 105: bbox [0 0 -1 1] has a negative width or height",
		6: "annotation 106: bbox holds NaN, not a finite number",
		8: "annotation 108: area -Infinity is not a finite number",
		9: "annotations 103, 104 name image id 99",
	} {
		if !strings.Contains(got[i].reason, want) {
			t.Errorf("%s: reason %q, want it to say %q", got[i].name, got[i].reason, want)
		}
	}
}

func fmtF(v []float32) string { return fmt.Sprint(v) }
func fmtI(v []int64) string   { return fmt.Sprint(v) }

func TestCOCOImagesFolder(t *testing.T) {
	dir := writeFixture(t)
	ann := filepath.Join(t.TempDir(), "ann.json")
	data, err := os.ReadFile(filepath.Join(dir, "instances.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ann, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ann, Options{Images: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeAll(t, s); got[0].reason != "" {
		t.Fatalf("with --images: %s: %s", got[0].name, got[0].reason)
	}
}

func TestCOCOMalformed(t *testing.T) {
	cases := map[string]string{
		"truncated":     `{"images": [{"id": 1, "file_name": "a.jpg"`,
		"not an object": `[1, 2]`,
		"duplicate id":  `{"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 1, "file_name": "b.jpg"}]}`,
		"no file name":  `{"images": [{"id": 1}]}`,
		"escapes":       `{"images": [{"id": 1, "file_name": "../a.jpg"}]}`,
		"no image_id":   `{"images": [], "annotations": [{"id": 1, "bbox": [0,0,1,1]}]}`,
		"trailing data": `{"images": []} {}`,
		"images type":   `{"images": {"id": 1}}`,
		"category id":   `{"categories": [{"name": "x"}]}`,
		// One file named by two images (its annotations would be packed twice), however spelt.
		"same file":    `{"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "a.jpg"}]}`,
		"same file ./": `{"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "./a.jpg"}]}`,
		"same file //": `{"images": [{"id": 1, "file_name": "s/a.jpg"}, {"id": 2, "file_name": "s//a.jpg"}]}`,
	}
	for name, text := range cases {
		p := filepath.Join(t.TempDir(), "ann.json")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p, Options{})
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "ann.json") {
			t.Errorf("%s: error %v, want a FormatError naming the file", name, err)
		}
	}
}

func FuzzCOCO(f *testing.F) {
	f.Add([]byte(`{"images": [{"id": 1, "file_name": "a.jpg", "width": 2, "height": 2}], "annotations": [{"id": 1, "image_id": 1, "bbox": [0, 0, 1, 1], "category_id": 1}], "categories": [{"id": 1, "name": "x"}]}`))
	f.Add([]byte(`{"annotations": [{"id": 1, "image_id": 5, "bbox": [1e400, 0, 1, 1]}]}`))
	f.Add([]byte(`{"categories": [{"id": 1048577, "name": "x"}]}`))
	f.Add([]byte(`{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"id": 2, "image_id": 1, "bbox": [NaN, 0, -Infinity, 1], "area": Infinity}]}`))
	f.Add([]byte(`{"annotations": [{"id": 1, "image_id": 1, "bbox": [3e38, 0, 3e38, 1], "area": null}], "images": [{"id": 1, "file_name": "a.jpg"}]}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "ann.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(p, Options{})
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		_ = s.Enumerate(context.Background(), func(it source.Item) error {
			return s.Decode(context.Background(), it, func(source.Clip) error { return nil })
		})
	})
}

func TestCOCORefusesExifOrient(t *testing.T) {
	dir := writeFixture(t)
	if _, err := Entry.Open(filepath.Join(dir, "instances.json"), source.Options{ExifOrient: true}); err == nil || !strings.Contains(err.Error(), "--exif-orient") {
		t.Fatalf("--exif-orient: %v", err)
	}
}

// TestCOCOTruncated cuts the Python-written file at every length: each cut is a FormatError
// naming the file, never a panic or a partial table.
func TestCOCOTruncated(t *testing.T) {
	dir := writeFixture(t)
	data, err := os.ReadFile(filepath.Join(dir, "instances.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "cut.json")
	for n := 0; n < len(data); n++ {
		if err := os.WriteFile(p, data[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p, Options{})
		var fe *FormatError
		if !errors.As(err, &fe) || fe.File != p {
			t.Fatalf("cut at %d of %d bytes: error %v, want a FormatError naming the file", n, len(data), err)
		}
	}
}

func readWords(t *testing.T, r io.Reader) string {
	t.Helper()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestPythonWords(t *testing.T) {
	for in, want := range map[string]string{
		`[NaN, -Infinity, Infinity, -1, -0.5e3]`: `["NaN", "-Infinity", "Infinity", -1, -0.5e3]`,
		`{"NaN \"I\" -I": [1,NaN]}`:              `{"NaN \"I\" -I": [1,"NaN"]}`,
		`{"a\\": Infinity}`:                      `{"a\\": "Infinity"}`,
		`[true, false, null, Nx1, Na`:            `[true, false, null, "Nx"1, "Na"`,
		`-I`:                                     `"-I"`,
		`-`:                                      `-`,
		`["a\\\"-I", -I, -1]`:                    `["a\\\"-I", "-I", -1]`,
	} {
		if got := readWords(t, newPythonWords(strings.NewReader(in))); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
		if got := readWords(t, iotest.OneByteReader(newPythonWords(strings.NewReader(in)))); got != want {
			t.Errorf("%s, one byte a read: got %s, want %s", in, got, want)
		}
		if got := readWords(t, newPythonWords(iotest.OneByteReader(strings.NewReader(in)))); got != want {
			t.Errorf("%s, read from a file one byte at a time: got %s, want %s", in, got, want)
		}
	}
}

// FuzzPythonWords: valid JSON passes unchanged, and the output does not depend on how it is
// read.
func FuzzPythonWords(f *testing.F) {
	f.Add([]byte(`{"a": [NaN, -Infinity, "I\"N"], "b": -1}`))
	f.Add([]byte(`{"images": [{"id": 1, "file_name": "NaN.jpg"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		whole := readWords(t, newPythonWords(bytes.NewReader(data)))
		if json.Valid(data) && whole != string(data) {
			t.Fatalf("valid JSON %q came out as %q", data, whole)
		}
		if small := readWords(t, iotest.OneByteReader(newPythonWords(bytes.NewReader(data)))); small != whole {
			t.Fatalf("%q: one byte a read gives %q, whole reads %q", data, small, whole)
		}
		if small := readWords(t, newPythonWords(iotest.OneByteReader(bytes.NewReader(data)))); small != whole {
			t.Fatalf("%q: read from a file one byte at a time gives %q, at once %q", data, small, whole)
		}
	})
}

// TestCOCOAnnotationsFirst: the members in another order (annotations before the images and
// categories they name) give the same tables, and each bad value is its image's skip.
func TestCOCOAnnotationsFirst(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ann.json")
	text := `{"annotations": [
	  {"id": 1, "image_id": 3, "bbox": [3e38, 0, 3e38, 1], "category_id": 1, "area": 1},
	  {"id": 2, "image_id": 4, "bbox": [0, 0, 1, 1], "category_id": 1, "area": "12"},
	  {"id": 3, "image_id": 5, "category_id": 1},
	  {"id": 4, "image_id": 6, "bbox": [0, 0, 1e400, 1], "category_id": 1},
	  {"id": 5, "image_id": 7, "bbox": [0, 0, 1, 1], "category_id": 2},
	  {"id": 6, "image_id": 8, "bbox": [0, 0, 1, 1], "category_id": 1, "area": null}],
	 "images": [{"id": 8, "file_name": "h.jpg"}, {"id": 7, "file_name": "g.jpg"}, {"id": 6, "file_name": "f.jpg"}, {"id": 5, "file_name": "e.jpg"},
	            {"id": 4, "file_name": "d.jpg"}, {"id": 3, "file_name": "c.jpg"}],
	 "categories": [{"id": 1, "name": "one"}]}`
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := decodeAll(t, s)
	for i, want := range []string{
		"annotation 1: bbox [3e+38 0 3e+38 1] reaches past float32's range",
		"annotation 2: area \"12\" is not a finite number",
		"annotation 3 has no bbox",
		"annotation 4: bbox holds 1e400, not a finite number",
		"annotation 5: category_id 2 is not among the file's categories",
		"no such file", // h.jpg: area null is an absent area (0), not a bad value
	} {
		if !strings.Contains(got[i].reason, want) {
			t.Errorf("%s: reason %q, want %q", got[i].name, got[i].reason, want)
		}
	}
}
