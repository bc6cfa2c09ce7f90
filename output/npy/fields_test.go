package npy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/output/internal/fieldtest"
	"github.com/packer-dev/packer/shard"
)

// writeFields writes recs with the fields of fieldtest.Schema through the output API, and a
// manifest listing the files.
func writeFields(t *testing.T, dir string, recs []output.Record) *shard.Manifest {
	t.Helper()
	s := testSet{dir: dir, sample: fieldtest.Sample, recs: recs}
	cfg := s.config()
	cfg.Fields = fieldtest.Schema()
	if err := Entry.CheckFields(cfg.Fields); err != nil {
		t.Fatal(err)
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	files, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := &shard.Manifest{Format: "npy", FormatVersion: 1, Count: int64(len(recs)), Sample: cfg.Sample,
		Label: cfg.Label, Files: files, Fields: cfg.Fields}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shard.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFieldsRoundTrip writes a field of every kind, checks the files' structure (verify's
// Check), reads the values back with the output's reader and with plain NumPy.
func TestFieldsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	recs := fieldtest.Records(4)
	m := writeFields(t, dir, recs)
	var names []string
	for _, fe := range m.Files {
		names = append(names, fe.Path)
	}
	want := "images.npy labels.npy caption.values.npy caption.offsets.npy info.values.npy info.offsets.npy " +
		"blob.values.npy blob.offsets.npy boxes.values.npy boxes.offsets.npy category.values.npy category.offsets.npy " +
		"tags.values.npy tags.offsets.npy emb.npy flag.npy mask.npy"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("files %s\nwant %s", got, want)
	}
	if errs := Check(dir, m); len(errs) > 0 {
		t.Fatalf("Check: %v", errs)
	}
	ds, err := Entry.Open(dir, shard.DirFS(dir), m)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	fieldtest.CheckDataset(t, ds, recs)
	if again := writeFields(t, t.TempDir(), recs); !slices.Equal(again.Files, m.Files) {
		t.Fatalf("the same records written twice differ:\n%v\n%v", m.Files, again.Files)
	}

	script := fieldtest.PyLine + `
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
cols = {}
for f in m["fields"]:
    n = f["name"]
    if os.path.exists(os.path.join(d, n + ".npy")):
        cols[n] = numpy.load(os.path.join(d, n + ".npy"), mmap_mode="r")
    else:
        cols[n] = (numpy.load(os.path.join(d, n + ".values.npy")), numpy.load(os.path.join(d, n + ".offsets.npy")))
        assert cols[n][1].dtype.str == "<i8" and cols[n][1].shape == (m["count"] + 1,)
for i in range(m["count"]):
    for f in m["fields"]:
        c = cols[f["name"]]
        if isinstance(c, tuple):
            v = c[0][c[1][i]:c[1][i + 1]]
            if f["kind"] in ("text", "json"):
                v = bytes(v).decode("utf-8")
            elif f["kind"] == "bytes":
                v = bytes(v)
        else:
            v = c[i]
        line(f["name"], i, v)
`
	if got, want := fieldtest.Python(t, "numpy", script, dir), fieldtest.Want(t, recs); got != want {
		t.Fatalf("NumPy reads\n%s\nwant\n%s", got, want)
	}
}

// TestFieldsCheckFaults: verify's structure check finds damaged offsets and a values file of
// the wrong length.
func TestFieldsCheckFaults(t *testing.T) {
	dir := t.TempDir()
	m := writeFields(t, dir, fieldtest.Records(3))
	p := filepath.Join(dir, FieldOffsetsFile("tags"))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-8] ^= 1 // the last offset
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	errs := Check(dir, m)
	if len(errs) != 1 || !errors.Is(errs[0], ErrFormat) || !strings.Contains(errs[0].Error(), "tags.offsets.npy: the last offset") {
		t.Fatalf("Check after damaging the offsets: %v", errs)
	}
	appendBytes(t, filepath.Join(dir, FieldFile("emb")), make([]byte, 8))
	if errs := Check(dir, m); len(errs) < 2 || !strings.Contains(errors.Join(errs...).Error(), "emb.npy: size is") {
		t.Fatalf("Check after growing emb.npy: %v", errs)
	}
}

// TestFieldsRefused: the names of the dataset's own files are refused before anything is
// written, and a value of the wrong size fails the write naming the field and the record.
func TestFieldsRefused(t *testing.T) {
	for _, name := range []string{"images", "labels"} {
		f := shard.Field{Name: name, Kind: shard.KindText, Encoding: shard.EncodingRaw}
		err := Entry.CheckFields([]shard.Field{f})
		if !errors.Is(err, output.ErrFieldNotHeld) || !strings.Contains(err.Error(), `--format npy: field "`+name+`"`) {
			t.Errorf("field %q: %v", name, err)
		}
	}
	dir := t.TempDir()
	cfg := output.Config{Dir: dir, Sample: fieldtest.Sample, Fields: fieldtest.Schema()}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := fieldtest.Records(2)[1]
	r.Fields[6] = r.Fields[6][:40] // emb: float64 [2, 3] is 48 bytes
	if err := w.Write(r); err == nil || !strings.Contains(err.Error(), `record 0: field "emb": value of 40 bytes, want 48`) {
		t.Fatalf("short value: %v", err)
	}
	w.Abort()
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Fatalf("Abort left %v", left)
	}
}
