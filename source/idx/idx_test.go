package idx

import (
	"bytes"
	stdgzip "compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
)

func collect(t testing.TB, s *Source) ([]source.Item, []source.Clip) {
	t.Helper()
	var items []source.Item
	if err := s.Enumerate(context.Background(), func(it source.Item) error {
		items = append(items, it)
		return nil
	}); err != nil {
		t.Fatalf("Enumerate: %v", err)
	}
	var clips []source.Clip
	for _, it := range items {
		if err := s.Decode(context.Background(), it, func(c source.Clip) error {
			clips = append(clips, c)
			return nil
		}); err != nil {
			t.Fatalf("Decode %s: %v", it.Name, err)
		}
	}
	return items, clips
}

func pixels(n, size int, seed byte) []byte {
	b := make([]byte, n*size)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func writeSet(t *testing.T, dir, prefix string, gz bool, typ byte, labels []int64, h, w int, seed byte) []byte {
	t.Helper()
	ext := ""
	if gz {
		ext = ".gz"
	}
	pix := pixels(len(labels), h*w, seed)
	if err := WriteFile(filepath.Join(dir, prefix+"-images-idx3-ubyte"+ext), TypeUbyte, []int{len(labels), h, w}, pix); err != nil {
		t.Fatal(err)
	}
	lb, err := EncodeLabels(typ, labels)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, prefix+"-labels-idx1-ubyte"+ext), typ, []int{len(labels)}, lb); err != nil {
		t.Fatal(err)
	}
	return pix
}

func TestRoundTrip(t *testing.T) {
	labels := []int64{3, 0, 9, 1, 1, 7, 2}
	const h, w = 5, 4
	for _, gz := range []bool{false, true} {
		for _, typ := range []byte{TypeUbyte, TypeByte, TypeShort, TypeInt} {
			name := TypeName(typ)
			if gz {
				name += "/gz"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				pix := writeSet(t, dir, "train", gz, typ, labels, h, w, 1)
				testPix := writeSet(t, dir, "t10k", gz, typ, labels[:3], h, w, 2)
				ext := map[bool]string{false: "", true: ".gz"}[gz]
				s1, err := Open(dir, "train", nil)
				if err != nil {
					t.Fatal(err)
				}
				s2, err := Open(filepath.Join(dir, "train-images-idx3-ubyte"+ext), "", nil)
				if err != nil {
					t.Fatal(err)
				}
				s3, err := OpenFiles(filepath.Join(dir, "train-images-idx3-ubyte"+ext), filepath.Join(dir, "train-labels-idx1-ubyte"+ext), nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range []*Source{s1, s2, s3} {
					check(t, s, labels, pix, h, w, "train-images-idx3-ubyte"+ext)
				}
				st, err := Open(dir, "test", nil)
				if err != nil {
					t.Fatal(err)
				}
				check(t, st, labels[:3], testPix, h, w, "t10k-images-idx3-ubyte"+ext)
				info := s1.Info()
				if info.Kind != "idx" || info.Spec["split"] != "train" || info.Spec["label_type"] != TypeName(typ) ||
					info.Spec["images"] != "train-images-idx3-ubyte"+ext || info.Count != int64(len(labels)) {
					t.Errorf("info %+v", info)
				}
				if strings.Join(info.Classes, ",") != "0,1,2,3,4,5,6,7,8,9" || info.Spec["classes_from"] != "label values" {
					t.Errorf("classes %v", info.Classes)
				}
			})
		}
	}
}

func check(t *testing.T, s *Source, labels []int64, pix []byte, h, w int, name string) {
	t.Helper()
	items, clips := collect(t, s)
	if len(items) != len(labels) || s.Len() != int64(len(labels)) {
		t.Fatalf("%d items, Len %d, want %d", len(items), s.Len(), len(labels))
	}
	for i, it := range items {
		want := pix[i*h*w : (i+1)*h*w]
		c := clips[i]
		if it.Seq != int64(i) || it.Name != name+"#"+strconv.Itoa(i) || it.Label != labels[i] || !bytes.Equal(it.Raw, want) {
			t.Fatalf("item %d: %q label %d", i, it.Name, it.Label)
		}
		im := c.Frames[0]
		if im.W != w || im.H != h || im.C != 1 || !bytes.Equal(im.Pix, want) || c.Label != labels[i] {
			t.Fatalf("clip %d: %dx%dx%d label %d", i, im.W, im.H, im.C, c.Label)
		}
		// DecodeTo (the pipeline's direct path) gives the same frame and label.
		fw, fh, fc := s.FrameShape()
		pix := make([]byte, fw*fh*fc)
		dc, err := s.DecodeTo(context.Background(), it, pix)
		if err != nil || fw != w || fh != h || fc != 1 || !bytes.Equal(pix, want) || dc.Label != c.Label || dc.Aux != nil || dc.Meta != nil {
			t.Fatalf("DecodeTo %d: %v, %dx%dx%d label %d", i, err, fw, fh, fc, dc.Label)
		}
	}
}

func TestSignedLabelsAndClasses(t *testing.T) {
	dir := t.TempDir()
	writeSet(t, dir, "train", false, TypeShort, []int64{-1, 5, 300, 12}, 2, 2, 0)
	s, err := Open(dir, "train", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Info().Classes) != 301 {
		t.Fatalf("%d classes, want 301 (0..300)", len(s.Info().Classes))
	}
	var items []source.Item
	if err := s.Enumerate(context.Background(), func(it source.Item) error { items = append(items, it); return nil }); err != nil {
		t.Fatal(err)
	}
	if items[0].Label != -1 || items[2].Label != 300 {
		t.Fatalf("labels %d %d", items[0].Label, items[2].Label)
	}
	err = s.Decode(context.Background(), items[0], func(source.Clip) error { return nil })
	var ie *source.InputError
	if !errors.As(err, &ie) || !errors.Is(err, ErrLabel) || ie.Input != "train-images-idx3-ubyte#0" {
		t.Fatalf("decode of label -1: %v", err)
	}
	s2, err := Open(dir, "train", []string{"a", "b", "c", "d", "e", "f"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Decode(context.Background(), items[2], func(source.Clip) error { return nil }); !errors.Is(err, ErrLabel) {
		t.Fatalf("label 300 with 6 classes: %v", err)
	}
	if err := s2.Decode(context.Background(), items[1], func(source.Clip) error { return nil }); err != nil {
		t.Fatalf("label 5 with 6 classes: %v", err)
	}
	if s2.Info().Spec["classes_from"] != "option" {
		t.Errorf("classes_from %v", s2.Info().Spec["classes_from"])
	}
	fdir := filepath.Join(t.TempDir(), "Fashion-MNIST")
	if err := os.Mkdir(fdir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSet(t, fdir, "train", true, TypeUbyte, []int64{9, 0}, 2, 2, 0)
	s3, err := Open(fdir, "train", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := s3.Info().Classes; len(c) != 10 || c[9] != "Ankle boot" || c[0] != "T-shirt/top" {
		t.Errorf("fashion classes %v", c)
	}
}

func TestFindFiles(t *testing.T) {
	dir := t.TempDir()
	writeSet(t, dir, "emnist-digits-train", true, TypeUbyte, []int64{1, 2}, 2, 2, 0)
	// The uncompressed copy of the same file is preferred.
	writeSet(t, dir, "emnist-digits-train", false, TypeUbyte, []int64{1, 2}, 2, 2, 0)
	s, err := Open(dir, "train", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Info().Spec["images"]; got != "emnist-digits-train-images-idx3-ubyte" {
		t.Errorf("images file %v", got)
	}
	// Dots for dashes, as some mirrors name them.
	ddir := t.TempDir()
	pix := pixels(2, 4, 0)
	must(t, WriteFile(filepath.Join(ddir, "test-images.idx3-ubyte"), TypeUbyte, []int{2, 2, 2}, pix))
	must(t, WriteFile(filepath.Join(ddir, "test-labels.idx1-ubyte"), TypeUbyte, []int{2}, []byte{4, 5}))
	s, err = Open(ddir, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	check(t, s, []int64{4, 5}, pix, 2, 2, "test-images.idx3-ubyte")
	// Two different datasets in one folder: ambiguous.
	writeSet(t, dir, "emnist-letters-train", false, TypeUbyte, []int64{1, 2}, 2, 2, 0)
	if _, err := Open(dir, "train", nil); err == nil || !strings.Contains(err.Error(), "several train images files") {
		t.Errorf("ambiguous folder: %v", err)
	}
	if _, err := Open(t.TempDir(), "test", nil); err == nil || !strings.Contains(err.Error(), "no test images file (looked for t10k-images-idx3-ubyte[.gz]") {
		t.Errorf("empty folder: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	w := stdgzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func TestBadInputs(t *testing.T) {
	goodLabels := append(AppendHeader(nil, TypeUbyte, []int{2}), 1, 2)
	img := func(typ byte, dims ...int) []byte { return AppendHeader(nil, typ, dims) }
	good := append(img(TypeUbyte, 2, 2, 2), pixels(2, 4, 0)...)
	cases := []struct {
		name           string
		images, labels []byte
		want           string
	}{
		{"empty images", nil, goodLabels, "images: idx: invalid format: truncated header"},
		{"truncated dims", img(TypeUbyte, 2, 2, 2)[:9], goodLabels, "images: idx: invalid format: truncated header"},
		{"wrong magic", append([]byte{1, 0, 8, 3}, good[4:]...), goodLabels, "images: idx: invalid format: bad magic 01 00 08 03"},
		{"unknown type", append([]byte{0, 0, 7, 3}, good[4:]...), goodLabels, "unknown element type 0x07"},
		{"zero dims", []byte{0, 0, 8, 0}, goodLabels, "0 dimensions"},
		{"too many dims", []byte{0, 0, 8, 9}, goodLabels, "9 dimensions"},
		{"float images", append(img(TypeFloat, 2, 2, 2), make([]byte, 32)...), goodLabels, "images: images must be ubyte (0x08), this file holds float"},
		{"images 2-d", append(img(TypeUbyte, 2, 4), make([]byte, 8)...), goodLabels, "images have shape [2 4]"},
		{"absurd count raw", img(TypeUbyte, 1<<31, 28, 28), goodLabels, "images: size 16, but the header's shape [2147483648 28 28] of ubyte needs 1683627180048 bytes"},
		{"absurd count gz", gzipBytes(img(TypeUbyte, 1<<31, 28, 28)), goodLabels, "images: 2147483648 images, over the limit of 1073741824"},
		{"absurd size gz", gzipBytes(img(TypeUbyte, 2, 1<<20, 1<<20)), goodLabels, "image size 1048576x1048576x1 is over the limit"},
		{"zero width gz", gzipBytes(img(TypeUbyte, 2, 5, 0)), goodLabels, "empty image size 0x5"},
		{"max dims gz", gzipBytes(img(TypeUbyte, 1<<32-1, 1<<32-1, 1<<32-1)), goodLabels, "over the limit"},
		{"raw trailing data", append(good, 0), goodLabels, "images: size 25, but the header's shape [2 2 2] of ubyte needs 24 bytes"},
		{"count mismatch", good, append(AppendHeader(nil, TypeUbyte, []int{3}), 1, 2, 3), "labels: 3 labels for 2 images in images"},
		{"float labels", good, append(AppendHeader(nil, TypeDouble, []int{2}), make([]byte, 16)...), "labels: labels must be integers (ubyte, byte, short or int), this file holds double"},
		{"labels 2-d", good, append(AppendHeader(nil, TypeUbyte, []int{2, 1}), 1, 2), "labels have shape [2 1]"},
		{"truncated labels gz", good, gzipBytes(goodLabels[:len(goodLabels)-1]), "idx: labels: label 1: unexpected EOF"},
		{"trailing labels gz", good, gzipBytes(append(goodLabels, 9)), "labels: data after the last record"},
		{"not gzip after magic", []byte{0x1f, 0x8b, 0, 0, 0}, goodLabels, "images: gzip:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ip, lp := filepath.Join(dir, "images"), filepath.Join(dir, "labels")
			must(t, os.WriteFile(ip, tc.images, 0o644))
			must(t, os.WriteFile(lp, tc.labels, 0o644))
			_, err := OpenFiles(ip, lp, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestTruncatedStream(t *testing.T) {
	dir := t.TempDir()
	ip, lp := filepath.Join(dir, "img.gz"), filepath.Join(dir, "lab")
	raw := append(AppendHeader(nil, TypeUbyte, []int{3, 2, 2}), pixels(3, 4, 0)...)
	gz := gzipBytes(raw[:len(raw)-2])
	must(t, os.WriteFile(ip, gz, 0o644))
	must(t, os.WriteFile(lp, append(AppendHeader(nil, TypeUbyte, []int{3}), 1, 2, 3), 0o644))
	s, err := OpenFiles(ip, lp, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = s.Enumerate(context.Background(), func(source.Item) error { n++; return nil })
	if err == nil || err.Error() != "idx: img.gz: image 2: unexpected EOF" || n != 2 {
		t.Fatalf("after %d items: %v", n, err)
	}
	// Trailing data in a compressed images file.
	must(t, os.WriteFile(ip, gzipBytes(append(raw, 1)), 0o644))
	if s, err = OpenFiles(ip, lp, nil); err != nil {
		t.Fatal(err)
	}
	err = s.Enumerate(context.Background(), func(source.Item) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "img.gz: data after the last record") {
		t.Fatalf("trailing data: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "img.gz"), "", nil); err == nil || !strings.Contains(err.Error(), "cannot derive the labels file name") {
		t.Fatalf("no labels name: %v", err)
	}
	must(t, os.Rename(ip, filepath.Join(dir, "x-images-idx3-ubyte.gz")))
	if _, err := Open(filepath.Join(dir, "x-images-idx3-ubyte.gz"), "", nil); err == nil || !strings.Contains(err.Error(), "labels file x-labels-idx1-ubyte[.gz] not found") {
		t.Fatalf("missing labels: %v", err)
	}
}

const fashionDir = "/usr/share/datasets/fashion-mnist"

// TestFashionMNIST reads Debian's Fashion-MNIST (package dataset-fashion-mnist) and compares
// every record with the file's bytes decompressed by the standard library.
func TestFashionMNIST(t *testing.T) {
	if _, err := os.Stat(filepath.Join(fashionDir, "t10k-images-idx3-ubyte.gz")); err != nil {
		t.Skipf("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist): %v", err)
	}
	if raceEnabled {
		t.Skip("gzip is about 20 times slower under the race detector; this sequential test runs without -race")
	}
	splits := []string{"test"}
	if !testing.Short() {
		splits = append(splits, "train")
	}
	for _, split := range splits {
		prefix := map[string]string{"train": "train", "test": "t10k"}[split]
		s, err := Open(fashionDir, split, nil)
		if err != nil {
			t.Fatal(err)
		}
		images := gunzip(t, filepath.Join(fashionDir, prefix+"-images-idx3-ubyte.gz"))
		labels := gunzip(t, filepath.Join(fashionDir, prefix+"-labels-idx1-ubyte.gz"))
		n := map[string]int{"train": 60000, "test": 10000}[split]
		info := s.Info()
		if s.Len() != int64(n) || info.Classes[9] != "Ankle boot" || info.Spec["classes_from"] != "fashion-mnist" {
			t.Fatalf("%s: Len %d classes %v", split, s.Len(), info.Classes)
		}
		if len(images) != 16+n*784 || len(labels) != 8+n {
			t.Fatalf("%s: unexpected file sizes %d %d", split, len(images), len(labels))
		}
		i := 0
		err = s.Enumerate(context.Background(), func(it source.Item) error {
			if !bytes.Equal(it.Raw, images[16+i*784:16+(i+1)*784]) || it.Label != int64(labels[8+i]) {
				t.Fatalf("%s: record %d differs", split, i)
			}
			return s.Decode(context.Background(), it, func(c source.Clip) error {
				if f := c.Frames[0]; f.W != 28 || f.H != 28 || f.C != 1 {
					t.Fatalf("%s: record %d is %dx%dx%d", split, i, f.W, f.H, f.C)
				}
				i++
				return nil
			})
		})
		if err != nil || i != n {
			t.Fatalf("%s: %d records: %v", split, i, err)
		}
	}
}

func gunzip(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := stdgzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func BenchmarkFashionMNIST(b *testing.B) {
	if _, err := os.Stat(filepath.Join(fashionDir, "train-images-idx3-ubyte.gz")); err != nil {
		b.Skip("Fashion-MNIST not installed")
	}
	s, err := Open(fashionDir, "train", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(s.Len() * 784)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := s.Enumerate(context.Background(), func(source.Item) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSymlinkedFiles: a folder of symbolic links to the (.gz) files is an ordinary input, as
// symlinked files are everywhere else.
func TestSymlinkedFiles(t *testing.T) {
	dir := t.TempDir()
	labels := []int64{1, 2, 3}
	pix := writeSet(t, dir, "train", true, TypeUbyte, labels, 2, 2, 5)
	links := t.TempDir()
	for _, n := range []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"} {
		must(t, os.Symlink(filepath.Join(dir, n), filepath.Join(links, n)))
	}
	s, err := Open(links, "train", nil)
	if err != nil {
		t.Fatal(err)
	}
	check(t, s, labels, pix, 2, 2, "train-images-idx3-ubyte.gz")
}

// TestDuplicateClassesRefused: two labels with one name cannot be told apart in the manifest.
func TestDuplicateClassesRefused(t *testing.T) {
	dir := t.TempDir()
	writeSet(t, dir, "train", false, TypeUbyte, []int64{0, 1}, 2, 2, 0)
	_, err := Open(dir, "train", []string{"zero", "one", "zero"})
	if !errors.Is(err, fsentry.ErrDuplicate) {
		t.Fatalf("got %v, want a duplicate class name error", err)
	}
}

// TestCompressedTwinDiffers: a folder holding x and x.gz (torchvision keeps both after
// extracting) must not pack the uncompressed one silently when the two hold different data (a
// stale extraction beside a newer download): Open refuses, naming both files. Identical twins
// are fine, for the images and for the labels.
func TestCompressedTwinDiffers(t *testing.T) {
	for _, which := range []string{"images", "labels"} {
		dir := t.TempDir()
		writeSet(t, dir, "train", true, TypeUbyte, []int64{1, 2}, 2, 2, 0)
		writeSet(t, dir, "train", false, TypeUbyte, []int64{1, 2}, 2, 2, 0)
		if _, err := Open(dir, "train", nil); err != nil {
			t.Fatalf("identical twins: %v", err)
		}
		if which == "images" {
			writeSet(t, dir, "train", false, TypeUbyte, []int64{1, 2}, 2, 2, 9) // other pixels
		} else {
			writeSet(t, dir, "train", false, TypeUbyte, []int64{2, 1}, 2, 2, 0) // other labels
		}
		_, err := Open(dir, "train", nil)
		name := "train-" + which + "-idx"
		if err == nil || !strings.Contains(err.Error(), "different data") || strings.Count(err.Error(), name) < 2 {
			t.Errorf("%s differ: Open = %v, want an error naming both %s files", which, err, name)
		}
	}
}
