package parquet

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/transforms"
)

// writer writes a Parquet file with pyarrow: rows of {image, label}, the image as the Hugging
// Face Image struct {bytes, path} (or plain binary), the label as int64 or string, the
// ClassLabel names in the "huggingface" metadata as datasets writes them, row groups of 2 rows.
const writer = `
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
out, spec = sys.argv[1], json.loads(sys.argv[2])
def img(p):
    return None if p is None else open(p, "rb").read()
rows = spec["rows"]
if spec.get("struct", True):
    itype = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    images = pa.array([None if r["image"] is None else {"bytes": img(r["image"]), "path": r["image"].split("/")[-1]} for r in rows], type=itype)
else:
    images = pa.array([img(r["image"]) for r in rows], type=pa.binary())
ltype = pa.string() if spec.get("strings") else pa.int64()
labels = pa.array([r["label"] for r in rows], type=ltype)
meta = None
if "names" in spec:
    meta = {b"huggingface": json.dumps({"info": {"features": {
        "image": {"_type": "Image"}, "label": {"names": spec["names"], "_type": "ClassLabel"}}}}).encode()}
table = pa.table({"image": images, "label": labels})
if meta: table = table.replace_schema_metadata(meta)
pq.write_table(table, out, row_group_size=2)
`

func writeParquet(t *testing.T, py, path string, spec map[string]any) {
	t.Helper()
	b, _ := json.Marshal(spec)
	if out, err := exec.Command(py, "-c", writer, path, string(b)).CombinedOutput(); err != nil {
		t.Fatalf("pyarrow writer: %v\n%s", err, out)
	}
}

func build(t *testing.T, src source.Source, spec transforms.Spec) (recs [][]byte, labels []int64, metas []string, m *shard.Manifest) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := pipeline.Build(context.Background(), pipeline.Options{Source: src, Transform: spec.MustCompile(), Output: shards.Entry, Out: out, Workers: 3}); err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for i := int64(0); i < ds.Len(); i++ {
		r, _ := ds.Record(i)
		l, _ := ds.Label(i)
		s, j := ds.Locate(i)
		rd, _ := ds.Shard(s)
		recs, labels, metas = append(recs, append([]byte(nil), r...)), append(labels, l), append(metas, string(rd.RecordMeta(j)))
	}
	return recs, labels, metas, ds.Manifest()
}

// TestSameRecordsAsFolder: the same image bytes packed from a folder and from Parquet files
// written by pyarrow in the Hugging Face layout (Image struct, ClassLabel names; and plain
// binary with string labels) give identical records, labels and class names.
func TestSameRecordsAsFolder(t *testing.T) {
	py := testfix.NeedFixturePython(t, "pyarrow")
	root := t.TempDir()
	imgs := []string{"baseline-420.jpg", "grey.png", "progressive.jpg", "rgb.ppm", "rgba-alpha.png"}
	names := []string{"ant", "bee"}
	var rows0, rows1, srows []map[string]any
	for i, im := range imgs {
		cls := names[i%2]
		dst := filepath.Join(root, "folder", cls, fmt.Sprintf("%02d%s", i, filepath.Ext(im)))
		os.MkdirAll(filepath.Dir(dst), 0o755)
		data, err := os.ReadFile(testfix.Corpus(im))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(dst, data, 0o644)
		// Rows in the folder's order: class ant (images 0, 2, 4), then bee (1, 3).
		r := map[string]any{"image": testfix.Corpus(im), "label": i % 2}
		if i%2 == 0 {
			rows0 = append(rows0, r)
		} else {
			rows1 = append(rows1, r)
		}
	}
	all := append(append([]map[string]any{}, rows0...), rows1...)
	for _, r := range all {
		srows = append(srows, map[string]any{"image": r["image"], "label": names[r["label"].(int)]})
	}
	os.MkdirAll(filepath.Join(root, "hf"), 0o755)
	writeParquet(t, py, filepath.Join(root, "hf", "train-00000-of-00002.parquet"), map[string]any{"rows": rows0, "names": names})
	writeParquet(t, py, filepath.Join(root, "hf", "train-00001-of-00002.parquet"), map[string]any{"rows": rows1, "names": names})
	writeParquet(t, py, filepath.Join(root, "strings.parquet"), map[string]any{"rows": srows, "strings": true, "struct": false})

	spec := transforms.Spec{Resize: 24, CropW: 20, CropH: 20, Layout: transforms.CHW}
	fsrc, err := imagedir.OpenFolder(filepath.Join(root, "folder"), imagedir.Options{})
	if err != nil {
		t.Fatal(err)
	}
	frecs, flabels, _, fm := build(t, fsrc, spec)
	for _, c := range []struct{ path, image string }{{"hf", "image.bytes"}, {"strings.parquet", "image"}, {"hf/train-*-of-00002.parquet", "image.bytes"}} {
		src, err := Open(filepath.Join(root, c.path), Options{})
		if err != nil {
			t.Fatal(err)
		}
		recs, labels, metas, m := build(t, src, spec)
		if len(m.Skipped) != 0 || len(recs) != len(frecs) || fmt.Sprint(m.Classes) != fmt.Sprint(fm.Classes) {
			t.Fatalf("%s: %d records (folder %d), skipped %v, classes %v", c.path, len(recs), len(frecs), m.Skipped, m.Classes)
		}
		for i := range frecs {
			if !bytes.Equal(frecs[i], recs[i]) || flabels[i] != labels[i] {
				t.Errorf("%s: record %d differs from the folder's", c.path, i)
			}
		}
		if got := m.Source["image_column"]; got != c.image {
			t.Errorf("%s: image column %v, want %s", c.path, got, c.image)
		}
		if c.path == "hf" && metas[3] != `{"file":"train-00001-of-00002.parquet","row":0}` {
			t.Errorf("record 3 metadata %s", metas[3])
		}
	}
}

// TestBadRows: a null image, a null label, an undecodable image and a label beyond the class
// names are skipped with their reasons, the rest packed; a missing column is refused at open.
func TestBadRows(t *testing.T) {
	py := testfix.NeedFixturePython(t, "pyarrow")
	dir := t.TempDir()
	good := testfix.Corpus("grey.jpg")
	writeParquet(t, py, filepath.Join(dir, "a.parquet"), map[string]any{"names": []string{"x", "y"}, "rows": []map[string]any{
		{"image": good, "label": 1}, {"image": nil, "label": 0}, {"image": good, "label": nil},
		{"image": testfix.Corpus("truncated.jpg"), "label": 0}, {"image": good, "label": 5}, {"image": good, "label": 0},
	}})
	src, err := Open(filepath.Join(dir, "a.parquet"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, labels, _, m := build(t, src, transforms.Spec{CropW: 8, CropH: 8})
	if len(recs) != 2 || fmt.Sprint(labels) != "[1 0]" {
		t.Errorf("packed %d records, labels %v", len(recs), labels)
	}
	want := map[string]string{"a.parquet#1": "null image", "a.parquet#2": "null label", "a.parquet#3": "truncated", "a.parquet#4": "bad label: 5"}
	got := map[string]string{}
	for _, s := range m.Skipped {
		got[s.Input] = s.Reason
	}
	for in, r := range want {
		if !strings.Contains(got[in], r) {
			t.Errorf("skipped[%s] = %q, want %q", in, got[in], r)
		}
	}
	if len(got) != len(want) {
		t.Errorf("skipped %v", got)
	}
	if _, err := Open(filepath.Join(dir, "a.parquet"), Options{LabelColumn: "class"}); err == nil || !strings.Contains(err.Error(), `no label column "class"; the columns are image.bytes, image.path, label`) {
		t.Errorf("missing label column: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "b.parquet"), []byte("PAR1 not really"), 0o644)
	src, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("a folder whose second file is damaged opens (the first is read at open): %v", err)
	}
	recs, _, _, m = build(t, src, transforms.Spec{CropW: 8, CropH: 8})
	last := m.Skipped[len(m.Skipped)-1]
	if len(recs) != 2 || last.Input != "b.parquet (from row 0)" || !strings.Contains(last.Reason, ErrFile.Error()) {
		t.Errorf("damaged second file: %d records, last skipped %+v", len(recs), last)
	}
}

// TestFooterLongerThanFile: a file whose footer length claims more bytes than it has is refused,
// naming the file, before parquet-go allocates a buffer of the claimed size (the fuzzer found
// 100-byte files claiming up to 4 GiB, which took a process to 7 GB).
func TestFooterLongerThanFile(t *testing.T) {
	dir := t.TempDir()
	data := []byte("PAR1" + strings.Repeat("x", 100))
	data = binary.LittleEndian.AppendUint32(data, 0xfffffff0)
	data = append(data, "PAR1"...)
	p := filepath.Join(dir, "huge.parquet")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Open(p, Options{})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "huge.parquet") || !strings.Contains(err.Error(), "footer claims 4294967280 bytes, but the file has 112") {
		t.Errorf("Open: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("Open allocated %d bytes for a 112-byte file", grew)
	}
}

// TestDuplicateColumns: a file with two columns of the image's or the label's name (pyarrow
// writes them; readers disagree on which one a name means) was read through its first one,
// silently. It is refused naming the column, at open for the first file and as the rest of the
// file for another.
func TestDuplicateColumns(t *testing.T) {
	py := testfix.NeedFixturePython(t, "pyarrow")
	const script = `
import sys
import pyarrow as pa, pyarrow.parquet as pq
out, names, img = sys.argv[1], sys.argv[2].split(","), open(sys.argv[3], "rb").read()
cols = {"image": pa.array([img, img], type=pa.binary()), "label": pa.array([0, 1], type=pa.int64())}
arrays = [cols[n] if i == names.index(n) else pa.array([1, 0], type=pa.int64()) if n == "label" else pa.array([img, img], type=pa.binary()) for i, n in enumerate(names)]
pq.write_table(pa.Table.from_arrays(arrays, names=names), out)
`
	dir := t.TempDir()
	for name, cols := range map[string]string{"dl.parquet": "image,label,label", "di.parquet": "image,image,label", "ok.parquet": "image,label"} {
		if out, err := exec.Command(py, "-c", script, filepath.Join(dir, name), cols, testfix.Corpus("grey.jpg")).CombinedOutput(); err != nil {
			t.Fatalf("pyarrow: %v\n%s", err, out)
		}
	}
	for name, col := range map[string]string{"dl.parquet": "label", "di.parquet": "image"} {
		_, err := Open(filepath.Join(dir, name), Options{})
		if want := fmt.Sprintf("%s: two columns named %q", name, col); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s): %v, want %q", name, err, want)
		}
	}
	// A folder whose first file is fine: the other file's columns are checked when it is read.
	os.Rename(filepath.Join(dir, "ok.parquet"), filepath.Join(dir, "a.parquet"))
	os.Remove(filepath.Join(dir, "di.parquet"))
	src, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, _, _, m := build(t, src, transforms.Spec{CropW: 8, CropH: 8})
	if len(recs) != 2 || len(m.Skipped) != 1 || m.Skipped[0].Input != "dl.parquet (from row 0)" || !strings.Contains(m.Skipped[0].Reason, `two columns named "label"`) {
		t.Errorf("%d records, skipped %+v", len(recs), m.Skipped)
	}
}

// TestStringLabelLimits: string labels become class names, read from every file at open; a
// label column of more distinct values than MaxClasses, or a value longer than MaxClassName, is
// not a column of class names (it took every value into memory and the manifest), and is
// refused naming the file.
func TestStringLabelLimits(t *testing.T) {
	py := testfix.NeedFixturePython(t, "pyarrow")
	const script = `
import sys
import pyarrow as pa, pyarrow.parquet as pq
out, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
labels = [("%0" + str(size) + "d") % i for i in range(n)]
pq.write_table(pa.table({"image": pa.array([b"x"] * n, type=pa.binary()), "label": pa.array(labels, type=pa.string())}), out)
`
	dir := t.TempDir()
	for _, c := range []struct {
		name, n, size, want string
	}{
		{"many.parquet", fmt.Sprint(MaxClasses + 1), "8", fmt.Sprintf("more than %d distinct labels", MaxClasses)},
		{"long.parquet", "2", fmt.Sprint(MaxClassName + 1), fmt.Sprintf("a label of %d bytes", MaxClassName+1)},
	} {
		p := filepath.Join(dir, c.name)
		if out, err := exec.Command(py, "-c", script, p, c.n, c.size).CombinedOutput(); err != nil {
			t.Fatalf("pyarrow: %v\n%s", err, out)
		}
		if _, err := Open(p, Options{}); err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s): %v, want %q", c.name, err, c.want)
		}
	}
}

// TestGlobOfDamagedFiles: a glob's first match is inspected at open like a file or a folder's
// first file: a damaged one on which the Parquet reader panics is an error, not a crash.
func TestGlobOfDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	for _, seed := range fuzzSeeds(t) {
		p := filepath.Join(dir, "a.parquet")
		if err := os.WriteFile(p, seed, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(filepath.Join(dir, "*.parquet"), Options{}); err == nil {
			t.Errorf("a damaged file opened through a glob")
		}
	}
}

// fuzzSeeds returns the inputs of FuzzParquet's corpus (testdata/fuzz/FuzzParquet).
func fuzzSeeds(t *testing.T) [][]byte {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzParquet", "*"))
	var seeds [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[len(lines)-1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		seeds = append(seeds, []byte(v))
	}
	if len(seeds) == 0 {
		t.Fatal("no fuzz corpus")
	}
	return seeds
}
