package shard

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// npyFile returns a version 1.0 .npy file holding data under the header dictionary dict,
// padded to 64 bytes as NumPy pads it.
func npyFile(dict string, data []byte) []byte {
	n := 10 + len(dict) + 1
	n += -n & 63
	b := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(b[8:], uint16(n-10))
	b = append(b, dict...)
	for len(b) < n-1 {
		b = append(b, ' ')
	}
	return append(append(b, '\n'), data...)
}

func int64s(v ...int64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

// writeNpyDataset writes an npy dataset of 3 records of shape [2, 2, 1] uint8 with an aux
// column and meta.jsonl, and its manifest; files maps a name to bytes that replace it.
func writeNpyDataset(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	all := map[string][]byte{
		"images.npy":     npyFile("{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2, 1), }", []byte("abcdefghijkl")),
		"labels.npy":     npyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", int64s(2, 0, 1)),
		"aux_coarse.npy": npyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", int64s(10, 11, 12)),
		"meta.jsonl":     []byte("{\"path\":\"a.png\"}\nnull\n[1,2]\n"),
	}
	for k, v := range files {
		all[k] = v
	}
	m := &Manifest{Packer: "test", Format: FormatNPY, FormatVersion: Version, Count: 3,
		Classes: []string{"x", "y", "z"}, ClassCounts: []int64{1, 1, 1},
		Sample: SampleSpec{Shape: []int{2, 2, 1}, DType: Uint8, Layout: "hwc"},
		Label:  LabelSpec{DType: "int64", Aux: []string{"coarse"}}}
	for _, name := range []string{"images.npy", "labels.npy", "aux_coarse.npy", "meta.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, name), all[name], 0o644); err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, FileEntry{Path: name, Size: int64(len(all[name])), SHA256: strings.Repeat("0", 64)})
	}
	body, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if body, err = SealManifest(body); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), body, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestNpyDataset: an npy dataset opens as one shard whose records, labels, aux values and
// per-record metadata ("null" lines: none) are those of the npy files, through Record and the
// Loader; damaged or mismatching files are refused naming the file.
func TestNpyDataset(t *testing.T) {
	d, err := OpenDataset(writeNpyDataset(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := d.Shard(0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := d.Record(1)
	if err != nil || string(rec) != "efgh" {
		t.Fatalf("record 1: %q %v", rec, err)
	}
	if r.Label(0) != 2 || r.Aux(2)[0] != 12 || string(r.RecordMeta(0)) != `{"path":"a.png"}` || len(r.RecordMeta(1)) != 0 || string(r.RecordMeta(2)) != "[1,2]" {
		t.Fatalf("labels %d, aux %v, meta %q %q %q", r.Label(0), r.Aux(2), r.RecordMeta(0), r.RecordMeta(1), r.RecordMeta(2))
	}
	ld, err := d.NewLoader(LoaderOptions{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	var data string
	var labels, aux []int64
	for ld.Next() {
		b := ld.Batch()
		data += string(b.Data)
		labels = append(labels, b.Labels...)
		aux = append(aux, b.Aux...)
		if s := b.BatchShape(); len(s) != 4 || s[0] != b.Len() || s[1] != 2 {
			t.Fatalf("batch shape %v", s)
		}
	}
	if err := errors.Join(ld.Err(), ld.Close()); err != nil || data != "abcdefghijkl" || len(labels) != 3 || labels[0] != 2 || aux[1] != 11 {
		t.Fatalf("loader: %v, data %q, labels %v, aux %v", err, data, labels, aux)
	}

	for name, tc := range map[string]struct {
		file string
		b    []byte
		want string
	}{
		"float images": {"images.npy", npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2, 2, 1), }", make([]byte, 48)), "want {'descr': '|u1'"},
		"fortran":      {"images.npy", npyFile("{'descr': '|u1', 'fortran_order': True, 'shape': (3, 2, 2, 1), }", make([]byte, 12)), "fortran_order': True"},
		"short":        {"images.npy", npyFile("{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2, 1), }", make([]byte, 11)), "want 140"},
		"count":        {"labels.npy", npyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", int64s(1, 2)), "labels.npy"},
		"magic":        {"aux_coarse.npy", []byte("not an npy file at all"), "magic"},
		"meta lines":   {"meta.jsonl", []byte("null\nnull\n"), "meta.jsonl"},
		"meta json":    {"meta.jsonl", []byte("null\n{\nnull\n"), "line 2"},
	} {
		d, err := OpenDataset(writeNpyDataset(t, map[string][]byte{tc.file: tc.b}))
		if err == nil {
			_, err = d.Record(0)
			d.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s and %q", name, err, tc.file, tc.want)
		}
	}
}
