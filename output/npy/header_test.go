package npy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestHeaderFor(t *testing.T) {
	h, err := reservedHeader("|u1", []int{28, 28, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := "\x93NUMPY\x01\x00" + "\x76\x00" + "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 28, 28, 1), }"
	if !bytes.HasPrefix(h, []byte(want)) || len(h) != 128 || h[127] != '\n' {
		t.Fatalf("header %q (%d bytes)", h, len(h))
	}
	if strings.TrimRight(string(h[len(want):]), " \n") != "" {
		t.Fatalf("padding is not spaces: %q", h[len(want):])
	}
	for _, shape := range [][]int64{{3}, {}, {1e18, 2}} {
		hdr, err := headerFor("<i8", shape, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, off, err := ReadHeader(bytes.NewReader(hdr))
		if err != nil || off != int64(len(hdr)) || off%Align != 0 || got.Descr != "<i8" || !equalShape(got.Shape, shape) {
			t.Fatalf("shape %v: %+v %d %v", shape, got, off, err)
		}
	}
}

// TestReadNumPyFiles parses headers that NumPy itself writes, in every format version.
func TestReadNumPyFiles(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import numpy").Run(); err != nil {
		t.Skipf("no NumPy (apt-get install python3-numpy): %v", err)
	}
	dir := t.TempDir()
	script := `
import sys, numpy
from numpy.lib import format as F
d = sys.argv[1]
cases = [("a", numpy.zeros((2, 3, 4), "u1"), None), ("b", numpy.zeros((5,), "<f4"), None),
         ("c", numpy.zeros((), "<i8"), None), ("d", numpy.zeros((1,), ">f8"), None),
         ("e", numpy.zeros((3, 2), "<f2", order="F"), None), ("f", numpy.zeros((0, 7), "i2"), None),
         ("g", numpy.zeros((4, 1), "u1"), (2, 0)), ("h", numpy.zeros((4, 1), "u1"), (3, 0)),
         ("i", numpy.zeros((2,), "?"), None)]
for name, a, v in cases:
    with open(d + "/" + name + ".npy", "wb") as f:
        F.write_array(f, a, version=v)
`
	if out, err := exec.Command("/usr/bin/python3", "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string]Header{
		"a": {"|u1", []int{2, 3, 4}, false}, "b": {"<f4", []int{5}, false}, "c": {"<i8", []int{}, false},
		"d": {">f8", []int{1}, false}, "e": {"<f2", []int{3, 2}, true}, "f": {"<i2", []int{0, 7}, false},
		"g": {"|u1", []int{4, 1}, false}, "h": {"|u1", []int{4, 1}, false}, "i": {"|b1", []int{2}, false},
	}
	for name, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		h, off, err := ReadHeader(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if h.Descr != w.Descr || h.Fortran != w.Fortran || len(h.Shape) != len(w.Shape) || !equalShape(h.Shape, toInt64(w.Shape)) {
			t.Errorf("%s: %+v, want %+v", name, h, w)
		}
		if want := off + h.Count()*int64(DescrSize(h.Descr)); want != int64(len(b)) {
			t.Errorf("%s: data offset %d + %d elements does not end the %d-byte file", name, off, h.Count(), len(b))
		}
	}
}

func TestBadHeaders(t *testing.T) {
	v1 := func(dict string) []byte {
		b := []byte(Magic + "\x01\x00")
		b = append(b, byte(len(dict)), byte(len(dict)>>8))
		return append(b, dict...)
	}
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "truncated header"},
		{"magic", []byte("\x93NUMPX\x01\x00\x00\x00"), "bad magic"},
		{"version", []byte(Magic + "\x04\x00\x00\x00"), "unsupported version 4.0"},
		{"short length", []byte(Magic + "\x01\x00\x10"), "truncated header"},
		{"short dict", []byte(Magic + "\x01\x00\x10\x00{'de"), "truncated header"},
		{"huge v2 length", []byte(Magic + "\x02\x00\xff\xff\xff\xff"), "header length 4294967295 over the limit"},
		{"not a dict", v1("['descr']\n"), "want {"},
		{"missing shape", v1("{'descr': '<f4', 'fortran_order': False}\n"), `header has no "shape"`},
		{"repeated key", v1("{'descr': '<f4', 'descr': '<f4'}\n"), `key "descr" repeated`},
		{"unknown key", v1("{'descr': '<f4', 'x': 1}\n"), `unknown key "x"`},
		{"structured", v1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}\n"), "structured dtypes"},
		{"negative dim", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}\n"), "want a dimension"},
		{"huge dim", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,)}\n"), "want a dimension"},
		{"overflow", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999999999, 999999999999999999)}\n"), "overflows"},
		{"not a tuple", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}\n"), "(n) is not a tuple"},
		{"fortran value", v1("{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}\n"), "fortran_order must be True or False"},
		{"unterminated", v1("{'descr': '<f4, 'fortran_order': False}\n"), "want , or }"},
		{"trailing junk", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x\n"), "after the dictionary"},
		{"too many dims", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (" + strings.Repeat("1, ", 33) + ")}\n"), "more than 32 dimensions"},
	}
	for _, tc := range cases {
		_, _, err := ReadHeader(bytes.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzNPYHeader feeds arbitrary bytes to ReadHeader: it must never panic, never allocate more
// than MaxHeaderLen for the header, and whatever parses must round-trip through headerFor.
func FuzzNPYHeader(f *testing.F) {
	for _, shape := range [][]int64{{3}, {2, 28, 28, 1}, {}} {
		h, _ := headerFor("<f4", shape, 0)
		f.Add(h)
	}
	f.Add([]byte(Magic + "\x02\x00\x20\x00\x00\x00{'descr':'|u1','fortran_order':True,'shape':(1L,2,)}"))
	f.Add([]byte(Magic + "\x01\x00\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, off, err := ReadHeader(bytes.NewReader(b))
		if err != nil {
			return
		}
		if off > int64(len(b)) || off > MaxHeaderLen+12 {
			t.Fatalf("offset %d past the %d-byte input", off, len(b))
		}
		if h.Count() < 0 {
			t.Fatalf("Count overflowed for %v", h.Shape)
		}
		if DescrSize(h.Descr) == 0 || strings.ContainsAny(h.Descr, "'\"\n") || h.Fortran {
			return
		}
		hdr, err := headerFor(h.Descr, toInt64(h.Shape), 0)
		if err != nil {
			return
		}
		h2, _, err := ReadHeader(bytes.NewReader(hdr))
		if err != nil || h2.Descr != h.Descr || !equalShape(h2.Shape, toInt64(h.Shape)) {
			t.Fatalf("%+v does not round-trip: %+v %v", h, h2, err)
		}
	})
}
