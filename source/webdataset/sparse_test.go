package webdataset

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/transforms"
)

// gnuSparseMember is a tar member of the old GNU sparse type ('S', what GNU tar --sparse
// writes): the logical file data with the bytes [hole, hole+n) left out of the archive as a
// hole (they must be zeros).
func gnuSparseMember(t *testing.T, name string, data []byte, hole, n int) []byte {
	t.Helper()
	for _, c := range data[hole : hole+n] {
		if c != 0 {
			t.Fatal("a hole must hold zeros")
		}
	}
	stored := append(append([]byte(nil), data[:hole]...), data[hole+n:]...)
	var h [512]byte
	octal := func(field []byte, v int) { copy(field, fmt.Sprintf("%0*o", len(field)-1, v)) }
	copy(h[0:100], name)
	octal(h[100:108], 0o644)
	octal(h[108:116], 0)
	octal(h[116:124], 0)
	octal(h[124:136], len(stored))
	octal(h[136:148], 0)
	h[156] = tar.TypeGNUSparse
	copy(h[257:265], "ustar  \x00")
	// The sparse map: two data regions around the hole, then the logical size.
	octal(h[386:398], 0)
	octal(h[398:410], hole)
	octal(h[410:422], hole+n)
	octal(h[422:434], len(data)-hole-n)
	octal(h[483:495], len(data))
	for i := 148; i < 156; i++ {
		h[i] = ' '
	}
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	out := append(h[:], stored...)
	return append(out, make([]byte, (512-len(stored)%512)%512)...)
}

// TestSparseMembers: a member GNU tar stored as a sparse file (type 'S') is a regular file to
// Python's tarfile, and so to webdataset's reader. It was passed over as not a regular member,
// so a sample whose image was stored sparse was skipped as having no image.
func TestSparseMembers(t *testing.T) {
	good, err := os.ReadFile(testfix.Corpus("baseline-420.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	// The same JPEG with a comment segment of zeros after SOI: the zeros are the hole.
	const zeros = 2000
	img := append([]byte{0xff, 0xd8, 0xff, 0xfe}, binary.BigEndian.AppendUint16(nil, zeros+2)...)
	img = append(append(img, make([]byte, zeros)...), good[2:]...)

	var b bytes.Buffer
	b.Write(gnuSparseMember(t, "sparse.jpg", img, 100, 1000))
	tw := tar.NewWriter(&b)
	for _, m := range []struct {
		name string
		data []byte
	}{{"sparse.cls", []byte("1")}, {"plain.jpg", img}, {"plain.cls", []byte("1")}} {
		tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg})
		tw.Write(m.data)
	}
	tw.Close()
	// The reader itself sees the sparse member whole.
	tr := tar.NewReader(bytes.NewReader(b.Bytes()))
	h, err := tr.Next()
	if err != nil || h.Typeflag != tar.TypeGNUSparse || h.Size != int64(len(img)) {
		t.Fatalf("fixture: %+v %v", h, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "d.tar"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, labels, metas, skipped := records(t, src, transforms.Spec{CropW: 8, CropH: 8})
	if len(skipped) != 0 {
		t.Errorf("skipped %v, want none", skipped)
	}
	if len(recs) != 2 || fmt.Sprint(labels) != "[1 1]" {
		t.Fatalf("packed %v labels %v, want sparse and plain, both labelled 1", metas, labels)
	}
	if !bytes.Equal(recs[0], recs[1]) {
		t.Error("the sparse member's record differs from the same image stored plainly")
	}
}
