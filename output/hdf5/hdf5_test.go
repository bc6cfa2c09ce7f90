package hdf5

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// testSet is a set of records and the config they are written with.
type testSet struct {
	cfg     output.Config
	records []output.Record
}

// makeSet returns n pseudo-random records (seeded) of the given shape and dtype.
func makeSet(dir string, n int, shape []int, dt shard.DType, aux []string, meta bool) testSet {
	cfg := output.Config{
		Dir:     dir,
		Sample:  shard.SampleSpec{Shape: shape, DType: dt, Layout: "hwc"},
		Label:   shard.LabelSpec{DType: "int64", Aux: aux},
		Classes: []string{"airplane", "cat", "dög"},
		HasMeta: meta,
		Meta: map[string]any{"packer": "test", "source": map[string]any{"kind": "test"},
			"transform": map[string]any{"resize": 8}, "classes": []string{"airplane", "cat", "dög"}},
	}
	rng := rand.New(rand.NewPCG(1, 1))
	size := int(cfg.Sample.Size())
	var recs []output.Record
	for i := range n {
		r := output.Record{Data: make([]byte, size), Label: int64(rng.IntN(3))} // Check requires labels within the classes
		switch dt {
		case shard.Uint8:
			for j := range r.Data {
				r.Data[j] = byte(rng.Uint32())
			}
		case shard.Float16:
			for j := 0; j < size; j += 2 {
				// finite halves, sign, exponent and mantissa all varied
				binary.LittleEndian.PutUint16(r.Data[j:], uint16(rng.IntN(0x7c00))|uint16(rng.IntN(2))<<15)
			}
		case shard.Float32:
			for j := 0; j < size; j += 4 {
				binary.LittleEndian.PutUint32(r.Data[j:], math.Float32bits(float32(rng.NormFloat64())))
			}
		}
		for k := range aux {
			r.Aux = append(r.Aux, int64(i*10+k))
		}
		if meta {
			r.Meta = []byte(fmt.Sprintf(`{"i":%d,"name":"ünï %d"}`, i, i))
			if i%5 == 0 {
				r.Meta = nil
			}
		}
		recs = append(recs, r)
	}
	return testSet{cfg: cfg, records: recs}
}

// write writes the set and returns the manifest a build would write.
func write(t *testing.T, s testSet) *shard.Manifest {
	t.Helper()
	out, err := New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.records {
		if err := out.Write(r); err != nil {
			out.Abort()
			t.Fatal(err)
		}
	}
	files, err := out.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != DataFile {
		t.Fatalf("Close returned %+v", files)
	}
	data, err := os.ReadFile(filepath.Join(s.cfg.Dir, DataFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if files[0].Size != int64(len(data)) || files[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("entry %+v does not describe the file (%d bytes)", files[0], len(data))
	}
	if _, err := os.Stat(filepath.Join(s.cfg.Dir, DataFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	return &shard.Manifest{
		Packer:    s.cfg.Meta["packer"].(string),
		Source:    s.cfg.Meta["source"].(map[string]any),
		Transform: s.cfg.Meta["transform"].(map[string]any),
		Format:    "hdf5",
		Count:     int64(len(s.records)),
		Classes:   s.cfg.Classes,
		Sample:    s.cfg.Sample,
		Label:     s.cfg.Label,
		Files:     files,
	}
}

// readBack checks the file through Reader against the records.
func readBack(t *testing.T, s testSet) {
	t.Helper()
	r, err := Open(s.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != int64(len(s.records)) {
		t.Fatalf("Len %d, want %d", r.Len(), len(s.records))
	}
	if got := r.Sample(); fmt.Sprint(got) != fmt.Sprint(s.cfg.Sample) {
		t.Fatalf("Sample %+v, want %+v", got, s.cfg.Sample)
	}
	if fmt.Sprint(r.Classes()) != fmt.Sprint(s.cfg.Classes) {
		t.Fatalf("Classes %q", r.Classes())
	}
	for i, want := range s.records {
		data, label, err := r.Record(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, want.Data) || label != want.Label {
			t.Fatalf("record %d differs (label %d, want %d)", i, label, want.Label)
		}
		if s.cfg.HasMeta {
			m, err := r.Meta(int64(i))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m, want.Meta) {
				t.Fatalf("record %d meta %q, want %q", i, m, want.Meta)
			}
		}
	}
	for k, name := range s.cfg.Label.Aux {
		got, err := r.Aux(name, 0, r.Len())
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range s.records {
			if got[i] != want.Aux[k] {
				t.Fatalf("record %d aux %s = %d, want %d", i, name, got[i], want.Aux[k])
			}
		}
	}
	if _, err := r.Aux("nope", 0, 0); err == nil {
		t.Fatal("Aux of a missing column: no error")
	}
	if js, err := r.Attr("spec"); err != nil || !strings.Contains(js, `"transform":{"resize":8}`) {
		t.Fatalf("spec attribute %q, %v", js, err)
	}
	if n := int64(len(s.records)); n > 0 {
		all := make([]byte, n*r.RecordSize())
		if err := r.Read(0, n, all); err != nil {
			t.Fatal(err)
		}
		var want []byte
		for _, rec := range s.records {
			want = append(want, rec.Data...)
		}
		if !bytes.Equal(all, want) {
			t.Fatal("bulk Read differs")
		}
	}
	if _, _, err := r.Record(int64(len(s.records))); err == nil {
		t.Fatal("Record past the end: no error")
	}
}

func TestWriteReadBack(t *testing.T) {
	cases := []struct {
		name  string
		n     int
		shape []int
		dt    shard.DType
		aux   []string
		meta  bool
	}{
		{"uint8", 37, []int{8, 8, 3}, shard.Uint8, nil, false},
		{"uint8-multichunk", 300, []int{64, 64, 3}, shard.Uint8, nil, false}, // 85 records per chunk
		{"float16", 23, []int{3, 5, 4}, shard.Float16, nil, false},
		{"float32", 19, []int{2, 7}, shard.Float32, nil, false},
		{"aux-meta", 41, []int{4, 4, 1}, shard.Uint8, []string{"coarse", "fine"}, true},
		{"labels-multichunk", labelChunkRows + 5, []int{1}, shard.Uint8, []string{"x"}, true},
		{"empty", 0, []int{8, 8, 3}, shard.Uint8, []string{"coarse"}, true},
		{"big-record", 3, []int{3, 600, 600}, shard.Uint8, nil, false}, // one record per chunk
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := makeSet(t.TempDir(), c.n, c.shape, c.dt, c.aux, c.meta)
			m := write(t, s)
			if errs := Check(s.cfg.Dir, m); len(errs) > 0 {
				t.Fatalf("Check: %v", errors.Join(errs...))
			}
			readBack(t, s)
			h5pyCheck(t, s)
		})
	}
}

// h5pyPython returns a Python interpreter that can import h5py: $PACKER_PYTHON, Debian's
// /usr/bin/python3 (python3-h5py), or python3 on PATH, the first that works.
func h5pyPython() (string, error) {
	var cands []string
	if p := os.Getenv("PACKER_PYTHON"); p != "" {
		cands = append(cands, p)
	}
	cands = append(cands, "/usr/bin/python3", "python3")
	var errs []error
	for _, c := range cands {
		out, err := exec.Command(c, "-c", "import h5py").CombinedOutput()
		if err == nil {
			return c, nil
		}
		errs = append(errs, fmt.Errorf("%s: %v: %s", c, err, bytes.TrimSpace(out)))
	}
	return "", errors.Join(errs...)
}

// h5pyScript reads data.h5 with h5py and compares it with the expected bytes written by
// h5pyCheck. It prints OK or raises.
const h5pyScript = `
import json, sys
import h5py, numpy as np
path, expdir = sys.argv[1], sys.argv[2]
exp = json.load(open(expdir + "/exp.json"))
with h5py.File(path, "r") as f:
    img = f["images"]
    assert img.dtype == np.dtype(exp["dtype"]), ("dtype", img.dtype, exp["dtype"])
    assert list(img.shape) == [exp["count"]] + exp["shape"], ("shape", img.shape)
    assert img.chunks is not None and img.chunks[1:] == img.shape[1:], ("chunks", img.chunks)
    assert img.maxshape[0] is None, ("maxshape", img.maxshape)
    assert img.compression is None
    assert img[...].tobytes() == open(expdir + "/images.bin", "rb").read(), "image bytes differ"
    lab = f["labels"]
    assert lab.dtype == np.dtype("<i8"), lab.dtype
    assert lab[...].tolist() == exp["labels"], "labels differ"
    for name, col in exp["aux"].items():
        d = f["aux/" + name]
        assert d.dtype == np.dtype("<i8") and d[...].tolist() == col, "aux " + name
    if exp["meta"] is not None:
        got = [x.decode("utf-8") for x in f["meta"][...]]
        assert got == exp["meta"], ("meta", got[:3], exp["meta"][:3])
        assert h5py.check_string_dtype(f["meta"].dtype).encoding == "utf-8"
    else:
        assert "meta" not in f
    a = f.attrs
    assert a["format"] == "packer-hdf5/1", a["format"]
    assert json.loads(a["classes"]) == exp["classes"], a["classes"]
    assert json.loads(a["sample"])["shape"] == exp["shape"]
    json.loads(a["label"]); json.loads(a["spec"])
print("OK")
`

// h5pyCheck reads the set's data.h5 with Debian's h5py and requires the same bytes, dtype,
// shape, labels, aux columns, metadata and attributes. It fails when h5py is missing, unless
// PACKER_NO_H5PY=1.
func h5pyCheck(t *testing.T, s testSet) {
	t.Helper()
	py, err := h5pyPython()
	if err != nil {
		if os.Getenv("PACKER_NO_H5PY") == "1" {
			t.Skip("h5py not available and PACKER_NO_H5PY=1")
		}
		t.Fatalf("python3 with h5py is needed to cross-check data.h5 (apt-get install python3-h5py), or set PACKER_NO_H5PY=1 to skip: %v", err)
	}
	expdir := t.TempDir()
	var images []byte
	exp := map[string]any{
		"count": len(s.records), "shape": s.cfg.Sample.Shape, "dtype": string(s.cfg.Sample.DType),
		"classes": s.cfg.Classes, "meta": nil,
	}
	labels := []int64{}
	aux := map[string][]int64{}
	for _, a := range s.cfg.Label.Aux {
		aux[a] = []int64{}
	}
	var meta []string
	for _, r := range s.records {
		images = append(images, r.Data...)
		labels = append(labels, r.Label)
		for k, a := range s.cfg.Label.Aux {
			aux[a] = append(aux[a], r.Aux[k])
		}
		meta = append(meta, string(r.Meta))
	}
	exp["labels"], exp["aux"] = labels, aux
	if s.cfg.HasMeta {
		exp["meta"] = append([]string{}, meta...)
	}
	js, err := json.Marshal(exp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(expdir, "exp.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(expdir, "images.bin"), images, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", h5pyScript, filepath.Join(s.cfg.Dir, DataFile), expdir).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "OK" {
		t.Fatalf("h5py disagrees: %v\n%s", err, out)
	}
}

// TestDeterministic writes the same records twice, more than a second apart (object timestamps
// have one-second resolution), and requires byte-identical files.
func TestDeterministic(t *testing.T) {
	for _, dt := range []shard.DType{shard.Uint8, shard.Float16} {
		t.Run(string(dt), func(t *testing.T) {
			var sums []string
			for i := range 2 {
				if i > 0 {
					time.Sleep(1100 * time.Millisecond)
				}
				s := makeSet(t.TempDir(), 250, []int{32, 32, 3}, dt, []string{"coarse"}, true)
				m := write(t, s)
				sums = append(sums, m.Files[0].SHA256)
			}
			if sums[0] != sums[1] {
				t.Fatalf("two writes of the same records differ: %s vs %s", sums[0], sums[1])
			}
		})
	}
}
