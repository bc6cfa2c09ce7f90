package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestResizeOnlyKeepsEveryImage packs real photos of mixed aspect ratios with --resize 64 and
// no crop (torchvision Resize(64) alone). Every image Pillow opens must be packed, none
// skipped for its shape, and each record must equal torchvision's Resize(64) of that image at
// its own shape.
func TestResizeOnlyKeepsEveryImage(t *testing.T) {
	py := python(t)
	root := filepath.Join(t.TempDir(), "photos")
	photos, _ := filepath.Glob("/usr/share/backgrounds/*.jpg")
	if len(photos) < 2 {
		t.Fatal("no real photos in /usr/share/backgrounds (scripts/setup.sh installs ukui-wallpapers)")
	}
	for _, class := range []string{"land", "odd"} {
		if err := os.MkdirAll(filepath.Join(root, class), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range photos {
		if err := os.Symlink(p, filepath.Join(root, "land", filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	// Portrait and square cuts of the real photos, saved by Pillow.
	cut := `import sys
from PIL import Image
src, dst = sys.argv[1], sys.argv[2]
im = Image.open(src).convert("RGB")
w, h = im.size
im.crop((0, 0, h // 3, h)).save(dst + "-portrait.png")
im.crop((w // 4, 0, w // 4 + h // 2, h // 2)).save(dst + "-square.jpg", quality=90)
im.crop((0, 0, w, h // 7)).save(dst + "-strip.png")
`
	for i, p := range photos[:2] {
		dst := filepath.Join(root, "odd", "cut"+string(rune('a'+i)))
		if b, err := exec.Command(py, "-c", cut, p, dst).CombinedOutput(); err != nil {
			t.Fatalf("cut photos: %v\n%s", err, b)
		}
	}
	corpus, _ := filepath.Abs("../../transforms/testdata/corpus")
	for _, name := range []string{"wide-4000x20.jpg", "tiny-1x1.jpg", "exif-rotate6.jpg", "grey.jpg", "palette.png", "truncated.jpg"} {
		if err := os.Symlink(filepath.Join(corpus, name), filepath.Join(root, "odd", name)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	mustRun(t, "build", root, "-o", out, "--resize", "64", "--workers", "2")

	ref := filepath.Join(t.TempDir(), "ref.jsonl")
	if b, err := exec.Command(py, "testdata/torchvision_ref.py", root, "64", "0", ref).CombinedOutput(); err != nil {
		t.Fatalf("torchvision reference: %v\n%s", err, b)
	}
	refData, err := os.ReadFile(ref + ".bin")
	if err != nil {
		t.Fatal(err)
	}
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Sample.Shape, []int{-1, -1, 3}) || m.FormatVersion != 2 {
		t.Errorf("manifest sample shape %v, format_version %d; want [-1 -1 3] and 2", m.Sample.Shape, m.FormatVersion)
	}
	skipped := map[string]string{}
	for _, s := range m.Skipped {
		skipped[s.Input] = s.Reason
	}
	ds, err := shard.OpenDataset(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	f, err := os.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var off int
	var packed int64
	shapes := map[[2]int]bool{}
	for sc.Scan() {
		var e struct {
			Path  string
			Label int64
			OK    bool
			Error string
			Shape []int
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, e.Path)
		rel = filepath.ToSlash(rel)
		if !e.OK {
			if _, ok := skipped[rel]; !ok {
				t.Errorf("%s: Pillow cannot open it (%s) but packer did not skip it", rel, e.Error)
			}
			continue
		}
		n := e.Shape[0] * e.Shape[1] * 3
		want := refData[off : off+n]
		off += n
		if why, ok := skipped[rel]; ok {
			t.Errorf("%s: Pillow opens it but packer skipped it: %s", rel, why)
			continue
		}
		if packed >= ds.Len() {
			t.Fatalf("packer packed %d records, torchvision has more", ds.Len())
		}
		got, err := ds.Record(packed)
		if err != nil {
			t.Fatal(err)
		}
		shape, err := ds.RecordShape(packed)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shape, e.Shape) {
			t.Errorf("%s: record shape %v, torchvision %v", rel, shape, e.Shape)
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s: packed record differs from torchvision Resize(64)", rel)
		}
		if l, _ := ds.Label(packed); l != e.Label {
			t.Errorf("%s: label %d, torchvision %d", rel, l, e.Label)
		}
		shapes[[2]int{e.Shape[0], e.Shape[1]}] = true
		packed++
	}
	if packed != ds.Len() {
		t.Fatalf("packer packed %d records, torchvision %d", ds.Len(), packed)
	}
	if len(shapes) < 5 {
		t.Fatalf("only %d distinct record shapes: the test needs mixed aspect ratios", len(shapes))
	}
	if len(m.Skipped) != 1 {
		t.Errorf("skipped %v, want only truncated.jpg", m.Skipped)
	}
	t.Logf("%d images at %d distinct shapes identical to torchvision Resize(64)", packed, len(shapes))
}

// writePNG writes a w×h RGB PNG whose pixels are a function of (x, y, seed).
func writePNG(t *testing.T, path string, w, h, seed int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	pix := make([]byte, 0, w*h*3)
	for y := range h {
		for x := range w {
			c := color.NRGBA{R: byte(x*7 + seed), G: byte(y*13 + seed*3), B: byte(x ^ y + seed), A: 255}
			img.SetNRGBA(x, y, c)
			pix = append(pix, c.R, c.G, c.B)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return pix
}

// mixedFolder writes an image folder of PNGs of several sizes and returns it with each
// image's pixels and [h, w, 3] shape, in ImageFolder order.
func mixedFolder(t *testing.T) (string, [][]byte, [][]int) {
	root := filepath.Join(t.TempDir(), "mixed")
	sizes := [][2]int{{5, 3}, {3, 5}, {1, 1}, {17, 2}, {8, 8}, {2, 30}}
	var pix [][]byte
	var shapes [][]int
	// ImageFolder order: class a (i = 0, 2, 4), then class b (1, 3, 5); names sort by index.
	for _, class := range []int{0, 1} {
		for i := class; i < len(sizes); i += 2 {
			wh := sizes[i]
			dir := filepath.Join(root, []string{"a", "b"}[class])
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "img"+string(rune('0'+i))+".png")
			pix = append(pix, writePNG(t, p, wh[0], wh[1], i))
			shapes = append(shapes, []int{wh[1], wh[0], 3})
		}
	}
	return root, pix, shapes
}

// TestNoResizeMixedSizesPacksAll packs images of different sizes with no resize at all: every
// image is packed at its own size, and the Loader returns each at its shape.
func TestNoResizeMixedSizesPacksAll(t *testing.T) {
	root, pix, shapes := mixedFolder(t)
	out := filepath.Join(t.TempDir(), "out")
	mustRun(t, "build", root, "-o", out, "--workers", "2")
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Skipped) != 0 || m.Count != int64(len(pix)) {
		t.Fatalf("packed %d of %d, skipped %v", m.Count, len(pix), m.Skipped)
	}
	ds, err := shard.OpenDataset(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	l, err := ds.NewLoader(shard.LoaderOptions{BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := 0
	for l.Next() {
		b := l.Batch()
		for k := range b.Len() {
			i := b.Indices[k]
			if got := b.Shape(k); !slices.Equal(got, shapes[i]) {
				t.Errorf("record %d: shape %v, want %v", i, got, shapes[i])
			}
			if !bytes.Equal(b.Data[b.Offsets[k]:b.Offsets[k+1]], pix[i]) {
				t.Errorf("record %d: pixels differ", i)
			}
			n++
		}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(pix) {
		t.Fatalf("loader read %d records, want %d", n, len(pix))
	}
	// inspect describes the variable shape; preview draws the records; bench reads them.
	s := mustRun(t, "inspect", out, "--records", "2")
	for _, want := range []string{"variable HxW, 3 channels", "H 1 to 30, W 1 to 17", "shape [3 5 3]", "shape [1 1 3]"} {
		if !strings.Contains(s, want) {
			t.Errorf("inspect does not say %q:\n%s", want, s)
		}
	}
	if s := mustRun(t, "bench", out); !strings.Contains(s, "6 records") {
		t.Errorf("bench:\n%s", s)
	}
	prev := filepath.Join(t.TempDir(), "grid.png")
	mustRun(t, "preview", out, "-o", prev)
	pf, err := os.Open(prev)
	if err != nil {
		t.Fatal(err)
	}
	sheet, err := png.Decode(pf)
	pf.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Six records in a 3x3 grid of 128-pixel tiles with 30-pixel captions (two lines: the
	// label, and the source path folder records carry): the centre of each tile is a pixel of
	// that record, scaled into the tile at its own shape.
	for i := range pix {
		x, y := (i%3)*128+64, (i/3)*(128+30)+64
		r, g, b, _ := sheet.At(x, y).RGBA()
		found := false
		for p := 0; p+2 < len(pix[i]); p += 3 {
			found = found || (pix[i][p] == byte(r>>8) && pix[i][p+1] == byte(g>>8) && pix[i][p+2] == byte(b>>8))
		}
		if !found {
			t.Errorf("preview: the centre of tile %d is %d,%d,%d, not a pixel of record %d", i, r>>8, g>>8, b>>8, i)
		}
	}
}

// TestFixedFormatsRefuseVariableShape: npy and HDF5 hold one array of one shape, so a build
// whose shape is not fixed is refused up front (exit 2), naming the flags that fix it, before
// anything is decoded or written.
func TestFixedFormatsRefuseVariableShape(t *testing.T) {
	root, _, _ := mixedFolder(t)
	for _, format := range []string{"npy", "hdf5"} {
		for _, extra := range [][]string{nil, {"--resize", "4"}} {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"build", root, "-o", out, "--format", format}, extra...)
			_, errs, code := run(t, args...)
			if code != 2 {
				t.Fatalf("%v: exit %d, want 2\n%s", args, code, errs)
			}
			for _, hint := range []string{"--crop", "--size", "--format shards"} {
				if !strings.Contains(errs, hint) {
					t.Errorf("%v: message does not mention %s:\n%s", args, hint, errs)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%v: output directory created", args)
			}
		}
		// With a fixed size the same folder packs.
		out := filepath.Join(t.TempDir(), "out")
		mustRun(t, "build", root, "-o", out, "--format", format, "--size", "4x3")
	}
}

// TestDescribeShapeCounts: inspect's words for a variable shape put a count of one in the
// singular ("1 channel", "1 frame").
func TestDescribeShapeCounts(t *testing.T) {
	for _, c := range []struct {
		spec shard.SampleSpec
		want string
	}{
		{shard.SampleSpec{Shape: []int{-1, -1, 1}, Layout: "HWC"}, "variable HxW, 1 channel"},
		{shard.SampleSpec{Shape: []int{-1, -1, 3}, Layout: "HWC"}, "variable HxW, 3 channels"},
		{shard.SampleSpec{Shape: []int{1, -1, -1, 1}, Layout: "THWC"}, "variable HxW, 1 frame, 1 channel"},
	} {
		if got := describeShape(c.spec); got != c.want {
			t.Errorf("describeShape(%v %s) = %q, want %q", c.spec.Shape, c.spec.Layout, got, c.want)
		}
	}
}
