package npy

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

type testSet struct {
	dir    string
	sample shard.SampleSpec
	aux    []string
	meta   bool
	recs   []output.Record
}

func makeSet(dir string, n int, shape []int, dt shard.DType, aux []string, meta bool) testSet {
	s := testSet{dir: dir, sample: shard.SampleSpec{Shape: shape, DType: dt, Layout: "hwc"}, aux: aux, meta: meta}
	size := int(s.sample.Size())
	for i := 0; i < n; i++ {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(i*31 + j*7)
		}
		if dt == shard.Float32 {
			for j := 0; j+4 <= size; j += 4 {
				binary.LittleEndian.PutUint32(data[j:], math.Float32bits(float32(i)-float32(j)/3))
			}
		}
		r := output.Record{Data: data, Label: int64(i % 5)} // verify requires labels >= 0
		for k := range aux {
			r.Aux = append(r.Aux, int64(i*10+k))
		}
		if meta && i%3 != 1 {
			r.Meta = []byte(fmt.Sprintf("{ \"i\": %d,\n \"name\": \"r%d\" }", i, i))
		}
		s.recs = append(s.recs, r)
	}
	return s
}

func (s testSet) config() output.Config {
	return output.Config{Dir: s.dir, Sample: s.sample, Label: shard.LabelSpec{DType: "int64", Aux: s.aux}, HasMeta: s.meta}
}

// write writes the set and a manifest for it.
func write(t *testing.T, s testSet) *shard.Manifest {
	t.Helper()
	w, err := New(s.config())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.recs {
		// The writer must not keep r.Data: hand it a copy and scribble over it afterwards.
		d := append([]byte(nil), r.Data...)
		r.Data = d
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
		for i := range d {
			d[i] = 0xAA
		}
	}
	files, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := &shard.Manifest{Format: "npy", FormatVersion: Version(s.sample), Count: int64(len(s.recs)), Sample: s.sample,
		Label: shard.LabelSpec{DType: "int64", Aux: s.aux}, Files: files}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, shard.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

var sets = []struct {
	name  string
	n     int
	shape []int
	dt    shard.DType
	aux   []string
	meta  bool
}{
	{"u8-hwc", 7, []int{4, 3, 2}, shard.Uint8, nil, false},
	{"u8-cifar100", 5, []int{32, 32, 3}, shard.Uint8, []string{"coarse_label"}, false},
	{"f32-meta", 4, []int{3, 2}, shard.Float32, []string{"a", "b-2"}, true},
	{"f16-1d", 3, []int{5}, shard.Float16, nil, true},
	{"empty", 0, []int{28, 28, 1}, shard.Uint8, nil, false},
}

func TestWriteReadBack(t *testing.T) {
	for _, tc := range sets {
		t.Run(tc.name, func(t *testing.T) {
			s := makeSet(t.TempDir(), tc.n, tc.shape, tc.dt, tc.aux, tc.meta)
			m := write(t, s)
			wantFiles := []string{ImagesFile, LabelsFile}
			for _, a := range tc.aux {
				wantFiles = append(wantFiles, AuxFile(a))
			}
			if tc.meta {
				wantFiles = append(wantFiles, MetaFile)
			}
			if len(m.Files) != len(wantFiles) {
				t.Fatalf("files %+v, want %v", m.Files, wantFiles)
			}
			for i, fe := range m.Files {
				b, err := os.ReadFile(filepath.Join(s.dir, fe.Path))
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(b)
				if fe.Path != wantFiles[i] || fe.Size != int64(len(b)) || fe.SHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("entry %+v does not describe %s (%d bytes)", fe, wantFiles[i], len(b))
				}
			}
			ents, _ := os.ReadDir(s.dir)
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), tmpSuffix) {
					t.Errorf("temporary file %s left behind", e.Name())
				}
			}
			images, _ := os.ReadFile(filepath.Join(s.dir, ImagesFile))
			if !bytes.HasPrefix(images, []byte(Magic+"\x01\x00")) {
				t.Fatalf("images.npy does not start with the v1.0 magic")
			}
			hl := int(binary.LittleEndian.Uint16(images[8:10]))
			if (10+hl)%Align != 0 || images[10+hl-1] != '\n' {
				t.Fatalf("data starts at %d", 10+hl)
			}
			var data []byte
			for _, r := range s.recs {
				data = append(data, r.Data...)
			}
			if !bytes.Equal(images[10+hl:], data) {
				t.Fatalf("images.npy data differs from the records")
			}
			if errs := Check(s.dir, m); len(errs) > 0 {
				t.Fatalf("Check of a good dataset: %v", errs)
			}
			readBack(t, s)
			numpyCheck(t, s)
		})
	}
}

// readBack reads the dataset back as inspect and trainers do: through the entry's reader half
// (Entry.Open) and shard.OpenDataset, the one Go npy reader.
func readBack(t *testing.T, s testSet) {
	t.Helper()
	m, err := shard.ReadManifest(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := Entry.Open(s.dir, shard.DirFS(s.dir), m)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	d, err := shard.OpenDataset(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if ds.Len() != int64(len(s.recs)) || d.Len() != int64(len(s.recs)) {
		t.Fatalf("Len %d and %d, want %d", ds.Len(), d.Len(), len(s.recs))
	}
	r, err := d.Shard(0)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range s.recs {
		got, err := ds.Record(int64(i))
		info, ierr := ds.Info(int64(i))
		if err != nil || ierr != nil || !bytes.Equal(got, want.Data) || info.Label != want.Label {
			t.Fatalf("record %d: label %d, err %v %v", i, info.Label, err, ierr)
		}
		for k, a := range s.aux {
			if v := r.Aux(i); len(v) != len(s.aux) || v[k] != want.Aux[k] {
				t.Fatalf("record %d aux %s: %v", i, a, v)
			}
		}
		meta := info.Meta
		switch {
		case !s.meta:
			if meta != nil {
				t.Fatalf("record %d: meta %q without meta.jsonl", i, meta)
			}
		case len(want.Meta) == 0:
			if string(meta) != "null" {
				t.Fatalf("record %d: meta %q, want null", i, meta)
			}
		default:
			var c bytes.Buffer
			if err := json.Compact(&c, want.Meta); err != nil || string(meta) != c.String() {
				t.Fatalf("record %d: meta %q, want %q", i, meta, c.String())
			}
		}
	}
	if n := len(s.recs); n > 1 {
		buf := make([]byte, 2*r.RecordSize())
		if got, err := r.ReadRecords(n-2, n, buf); err != nil || !bytes.Equal(got, append(append([]byte(nil), s.recs[n-2].Data...), s.recs[n-1].Data...)) {
			t.Fatalf("read of the last two records: %v", err)
		}
	}
	if _, err := ds.Record(int64(len(s.recs))); err == nil {
		t.Fatalf("record past the end read without error")
	}
}

// numpyCheck loads every file with Debian's NumPy (memory-mapped) and compares shape, dtype and
// bytes with what was written.
func numpyCheck(t *testing.T, s testSet) {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		t.Skipf("no NumPy (apt-get install python3-numpy): %v", err)
	}
	script := `
import hashlib, sys, numpy
for p in sys.argv[1:]:
    a = numpy.load(p, mmap_mode="r")
    assert a.flags["C_CONTIGUOUS"], p
    print(p.rsplit("/", 1)[-1], a.dtype.str, list(a.shape), hashlib.sha256(numpy.ascontiguousarray(a).tobytes()).hexdigest())
`
	args := []string{"-c", script, filepath.Join(s.dir, ImagesFile), filepath.Join(s.dir, LabelsFile)}
	for _, a := range s.aux {
		args = append(args, filepath.Join(s.dir, AuxFile(a)))
	}
	out, err := exec.Command(py, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy.load: %v\n%s", err, out)
	}
	var images, labels []byte
	aux := make([][]byte, len(s.aux))
	for _, r := range s.recs {
		images = append(images, r.Data...)
		labels = binary.LittleEndian.AppendUint64(labels, uint64(r.Label))
		for k := range s.aux {
			aux[k] = binary.LittleEndian.AppendUint64(aux[k], uint64(r.Aux[k]))
		}
	}
	shape := append([]int{len(s.recs)}, s.sample.Shape...)
	want := []string{fmt.Sprintf("%s %s %v %s", ImagesFile, Descr(s.sample.DType), pyList(shape), sha(images)),
		fmt.Sprintf("%s <i8 [%d] %s", LabelsFile, len(s.recs), sha(labels))}
	for k, a := range s.aux {
		want = append(want, fmt.Sprintf("%s <i8 [%d] %s", AuxFile(a), len(s.recs), sha(aux[k])))
	}
	if got := strings.TrimSpace(string(out)); got != strings.Join(want, "\n") {
		t.Fatalf("numpy sees\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

func pyList(d []int) string {
	s := make([]string, len(d))
	for i, x := range d {
		s[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestDeterministic(t *testing.T) {
	var sums []string
	for i := 0; i < 2; i++ {
		s := makeSet(t.TempDir(), 6, []int{3, 3, 1}, shard.Uint8, []string{"x"}, true)
		m := write(t, s)
		var all []string
		for _, fe := range m.Files {
			all = append(all, fe.Path+"="+fe.SHA256)
		}
		sums = append(sums, strings.Join(all, ","))
	}
	if sums[0] != sums[1] {
		t.Fatalf("two writes differ:\n%s\n%s", sums[0], sums[1])
	}
}

func TestWriterErrors(t *testing.T) {
	dir := t.TempDir()
	s := makeSet(dir, 1, []int{2, 2}, shard.Uint8, []string{"c"}, false)
	w, err := NewWriter(s.config())
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(output.Record{Data: make([]byte, 3), Aux: []int64{1}})
	if err == nil || !strings.Contains(err.Error(), "record 0 has 3 bytes, want 4") {
		t.Fatalf("short record: %v", err)
	}
	if err2 := w.Write(output.Record{Data: make([]byte, 4), Aux: []int64{1}}); err2 != err {
		t.Fatalf("error not sticky: %v", err2)
	}
	if _, err := w.Close(); err == nil {
		t.Fatalf("Close after a failed Write succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("files left after a failed Close: %v", ents)
	}
	for _, tc := range []struct {
		cfg  output.Config
		want string
	}{
		{output.Config{Dir: dir, Sample: shard.SampleSpec{Shape: []int{-1, 3}, DType: shard.Uint8}}, "vary in size"},
		{output.Config{Dir: dir, Sample: shard.SampleSpec{Shape: []int{2}, DType: "int7"}}, "unknown dtype"},
		{output.Config{Dir: dir, Sample: shard.SampleSpec{Shape: []int{2}, DType: shard.Uint8}, Label: shard.LabelSpec{Aux: []string{"../x"}}}, "only letters"},
		{output.Config{Dir: dir, Sample: shard.SampleSpec{Shape: []int{2}, DType: shard.Uint8}, Label: shard.LabelSpec{Aux: []string{"a", "a"}}}, "repeated"},
		{output.Config{Dir: filepath.Join(dir, "missing"), Sample: shard.SampleSpec{Shape: []int{2}, DType: shard.Uint8}}, "no such file"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want %q", tc.cfg, err, tc.want)
		}
	}
	// Abort removes everything, and metadata must be JSON.
	s = makeSet(dir, 2, []int{2}, shard.Uint8, nil, true)
	w, err = NewWriter(s.config())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(output.Record{Data: make([]byte, 2), Meta: []byte("{bad")}); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("bad meta: %v", err)
	}
	w.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("files left after Abort: %v", ents)
	}
	// Metadata without HasMeta.
	s = makeSet(dir, 1, []int{2}, shard.Uint8, nil, false)
	w, _ = NewWriter(s.config())
	if err := w.Write(output.Record{Data: make([]byte, 2), Meta: []byte("{}")}); err == nil {
		t.Fatalf("metadata accepted without HasMeta")
	}
	w.Abort()
}

func TestCheckFaults(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string, m *shard.Manifest)
		want   []string // each must appear in some fault
	}{
		{"truncated images", func(t *testing.T, dir string, m *shard.Manifest) {
			truncate(t, filepath.Join(dir, ImagesFile), -5)
		}, []string{"images.npy: size is 291 bytes, manifest says 296", "images.npy: size is 291 bytes, header [7 4 3 2] |u1 needs 296 (truncated)"}},
		{"extra bytes in labels", func(t *testing.T, dir string, m *shard.Manifest) {
			appendBytes(t, filepath.Join(dir, LabelsFile), []byte{0})
		}, []string{"labels.npy: size is 185 bytes, manifest says 184", "(extra bytes)"}},
		{"count edited in header", func(t *testing.T, dir string, m *shard.Manifest) {
			edit(t, filepath.Join(dir, ImagesFile), "'shape': (7,", "'shape': (6,")
		}, []string{"images.npy: shape [6 4 3 2], want [7 4 3 2]", "images.npy: size is 296 bytes, header [6 4 3 2] |u1 needs 272 (extra bytes)"}},
		{"dtype edited", func(t *testing.T, dir string, m *shard.Manifest) {
			edit(t, filepath.Join(dir, LabelsFile), "<i8", "<u8")
		}, []string{"labels.npy: dtype <u8, want <i8"}},
		{"fortran", func(t *testing.T, dir string, m *shard.Manifest) {
			edit(t, filepath.Join(dir, ImagesFile), "False, 'shape'", "True , 'shape'")
		}, []string{"images.npy: Fortran order"}},
		{"bad magic", func(t *testing.T, dir string, m *shard.Manifest) {
			edit(t, filepath.Join(dir, ImagesFile), "NUMPY", "NUMPZ")
		}, []string{"images.npy: npy: invalid format: bad magic"}},
		{"header garbage", func(t *testing.T, dir string, m *shard.Manifest) {
			edit(t, filepath.Join(dir, LabelsFile), "'fortran_order'", "'fortran_orde!'")
		}, []string{"labels.npy: npy: invalid format: header at byte"}},
		{"aux deleted", func(t *testing.T, dir string, m *shard.Manifest) {
			os.Remove(filepath.Join(dir, AuxFile("coarse")))
		}, []string{"aux_coarse.npy: open: no such file"}},
		{"manifest count", func(t *testing.T, dir string, m *shard.Manifest) { m.Count = 8 }, []string{
			"images.npy: shape [7 4 3 2], want [8 4 3 2]", "labels.npy: shape [7], want [8]", "aux_coarse.npy: shape [7], want [8]", "meta.jsonl: 7 lines, want one per record (8)"}},
		{"manifest sample", func(t *testing.T, dir string, m *shard.Manifest) { m.Sample.DType = shard.Float32 }, []string{"images.npy: dtype |u1, want <f4"}},
		{"unlisted images", func(t *testing.T, dir string, m *shard.Manifest) { m.Files = m.Files[1:] }, []string{"images.npy: not listed in the manifest"}},
		{"foreign file listed", func(t *testing.T, dir string, m *shard.Manifest) {
			m.Files = append(m.Files, shard.FileEntry{Path: "data.h5"})
		}, []string{"data.h5: listed in the manifest but not a file of an npy dataset"}},
		{"meta line", func(t *testing.T, dir string, m *shard.Manifest) {
			edit(t, filepath.Join(dir, MetaFile), `{"i":0,`, `{"i":0;`)
		}, []string{"meta.jsonl: record 0: line is not valid JSON"}},
		{"meta truncated", func(t *testing.T, dir string, m *shard.Manifest) {
			truncate(t, filepath.Join(dir, MetaFile), -1)
		}, []string{"meta.jsonl: line 7: last line", "meta.jsonl: 6 lines, want one per record (7)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := makeSet(t.TempDir(), 7, []int{4, 3, 2}, shard.Uint8, []string{"coarse"}, true)
			m := write(t, s)
			tc.damage(t, s.dir, m)
			errs := Check(s.dir, m)
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
				if !errors.Is(e, ErrFormat) && !errors.Is(e, os.ErrNotExist) {
					t.Errorf("fault %v wraps neither ErrFormat nor an I/O error", e)
				}
				if name, _, _ := strings.Cut(e.Error(), ":"); strings.ContainsAny(name, " /") {
					t.Errorf("fault %q does not start with a file name", e)
				}
			}
			joined := strings.Join(all, "\n")
			for _, w := range tc.want {
				if !strings.Contains(joined, w) {
					t.Errorf("no fault containing %q in:\n%s", w, joined)
				}
			}
		})
	}
}

func edit(t *testing.T, p, from, to string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(from)) {
		t.Fatalf("%s has no %q", p, from)
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(from), []byte(to), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, p string, by int64) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, st.Size()+by); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, p string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(b)
	f.Close()
}

func BenchmarkWrite(b *testing.B) {
	rec := output.Record{Data: make([]byte, 224*224*3)}
	const n = 200
	b.SetBytes(int64(len(rec.Data)) * n)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		w, err := New(output.Config{Dir: dir, Sample: shard.SampleSpec{Shape: []int{224, 224, 3}, DType: shard.Uint8}})
		if err != nil {
			b.Fatal(err)
		}
		for j := 0; j < n; j++ {
			if err := w.Write(rec); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
