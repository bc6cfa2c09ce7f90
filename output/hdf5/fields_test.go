package hdf5

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

// writeFields writes recs with the fields of fieldtest.Schema through the output API and a
// manifest for them.
func writeFields(t *testing.T, dir string, recs []output.Record) *shard.Manifest {
	t.Helper()
	fields := fieldtest.Schema()
	if err := Entry.CheckFields(fields); err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{"packer": "test", "source": map[string]any{}, "transform": map[string]any{}, "classes": []string{"a", "b", "c"}}
	s := testSet{cfg: output.Config{Dir: dir, Sample: fieldtest.Sample, Label: shard.LabelSpec{DType: "int64"},
		Classes: []string{"a", "b", "c"}, Meta: meta, Fields: fields}, records: recs}
	m := write(t, s)
	m.Fields = fields
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFieldsRoundTrip writes a field of every kind, checks the file (verify's Check), reads the
// values back with the output's reader and with plain h5py.
func TestFieldsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	recs := fieldtest.Records(4)
	m := writeFields(t, dir, recs)
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
import json, sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    fields = json.loads(f.attrs["fields"])
    for i in range(len(f["labels"])):
        for fd in fields:
            d = f[fd["name"]]
            assert d.attrs["kind"] == fd["kind"], (fd, d.attrs["kind"])
            v = d[i]
            if fd["kind"] in ("text", "json"):
                assert h5py.check_string_dtype(d.dtype).encoding == "utf-8"
                v = v.decode("utf-8") if isinstance(v, bytes) else v
            elif fd["kind"] == "bytes":
                v = v.tobytes()
            elif h5py.check_vlen_dtype(d.dtype) is not None:
                assert list(d.attrs["shape"]) == fd["shape"], d.attrs["shape"]
                v = v.reshape([-1] + fd["shape"][1:])
            line(fd["name"], i, v)
`
	if got, want := fieldtest.Python(t, "h5py", script, filepath.Join(dir, DataFile)), fieldtest.Want(t, recs); got != want {
		t.Fatalf("h5py reads\n%s\nwant\n%s", got, want)
	}
}

// TestFieldsCheckMismatch: a manifest whose schema differs from the file's is a fault.
func TestFieldsCheckMismatch(t *testing.T) {
	dir := t.TempDir()
	m := writeFields(t, dir, fieldtest.Records(2))
	m.Fields[0].Name = "title"
	errs := CheckStructure(dir, m)
	text := errors.Join(errs...).Error()
	if !strings.Contains(text, `root attribute "fields"`) || !strings.Contains(text, "no dataset /title") {
		t.Fatalf("CheckStructure: %v", errs)
	}
	m.Fields = nil
	if errs := CheckStructure(dir, m); len(errs) != 1 || !strings.Contains(errs[0].Error(), "lists fields the manifest does not") {
		t.Fatalf("CheckStructure without fields in the manifest: %v", errs)
	}
}

// TestFieldsRefused: the names of data.h5's own datasets are refused before anything is
// written; a text with a NUL byte (an HDF5 string ends at one) fails the write naming the
// field and the record.
func TestFieldsRefused(t *testing.T) {
	for _, name := range []string{"images", "labels", "aux", "meta"} {
		f := shard.Field{Name: name, Kind: shard.KindText, Encoding: shard.EncodingRaw}
		err := Entry.CheckFields([]shard.Field{f})
		if !errors.Is(err, output.ErrFieldNotHeld) || !strings.Contains(err.Error(), `--format hdf5: field "`+name+`"`) {
			t.Errorf("field %q: %v", name, err)
		}
	}
	dir := t.TempDir()
	out, err := New(output.Config{Dir: dir, Sample: fieldtest.Sample, Fields: fieldtest.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	r := fieldtest.Records(1)[0]
	r.Fields[0] = []byte("a\x00b")
	if err := out.Write(r); err == nil || !strings.Contains(err.Error(), `record 0: field "caption": a NUL byte`) {
		t.Fatalf("NUL in text: %v", err)
	}
	out.Abort()
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Fatalf("Abort left %v", left)
	}
}
