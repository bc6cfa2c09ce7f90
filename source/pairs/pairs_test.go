package pairs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/source"
)

// fixtureScript writes images and masks with Pillow, in the VOC, ADE20K (subfolders) and
// Cityscapes namings, with the faults a pairs source must report, and saves what NumPy reads
// from each good mask (np.array(Image.open(mask))) as MASK.npyraw.
const fixtureScript = `import os, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
im, mk = os.path.join(d, "images"), os.path.join(d, "masks")
for p in ("images/training", "masks/training", "images/.hidden"):
    os.makedirs(os.path.join(d, p), exist_ok=True)
rng = np.random.default_rng(5)
def image(rel, w, h):
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(os.path.join(im, rel))
def mask(rel, w, h, mode, **save):
    a = rng.integers(0, 21, (h, w), dtype=np.uint8)
    m = Image.fromarray(a, "L")
    if mode == "P":
        m = m.convert("P")
        m.putpalette([(i * 37) % 256 for i in range(768)])
    elif mode == "P4":  # a 4-bit palette PNG
        m = Image.fromarray(a % 16, "L").convert("P")
        m.putpalette([(i * 37) % 256 for i in range(48)])
        save["bits"] = 4
    elif mode == "1":  # a binary mask, 1 bit a pixel
        m = Image.fromarray((a > 10).astype(np.uint8) * 255, "L").convert("1")
    elif mode == "RGB":
        m = m.convert("RGB")
    p = os.path.join(mk, rel)
    m.save(p, **save)
    if mode != "RGB":
        got = np.array(Image.open(p))
        assert got.ndim == 2, (rel, got.shape)
        with open(p + ".npyraw", "wb") as f:
            f.write(np.ascontiguousarray(got.astype(np.uint8)).tobytes())
image("2007_000032.jpg", 30, 20); mask("2007_000032.png", 30, 20, "P")
image("training/ADE_1.jpg", 17, 23); mask("training/ADE_1.png", 17, 23, "L")
image("aachen_000000_000019_leftImg8bit.png", 12, 8); mask("aachen_000000_000019_gtFine_labelIds.png", 12, 8, "L")
image("flat.jpg", 9, 9); mask("flat.png", 9, 9, "P")
image("p4.jpg", 11, 7); mask("p4.png", 11, 7, "P4")
image("binary.jpg", 13, 5); mask("binary.png", 13, 5, "1")
image("trns.jpg", 6, 6); mask("trns.png", 6, 6, "L", transparency=3)
image("nomask.jpg", 8, 8)
image("othersize.jpg", 8, 8); mask("othersize.png", 9, 8, "L")
image("rgbmask.jpg", 8, 8); mask("rgbmask.png", 8, 8, "RGB")
image(".hidden/x.jpg", 8, 8)
with open(os.path.join(mk, "notpng.png"), "wb") as f: f.write(b"GIF89a")
image("notpng.jpg", 8, 8)
`

func writeFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("/usr/bin/python3", "-c", fixtureScript, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("fixture (needs Debian's python3-pil and python3-numpy): %v\n%s", err, out)
	}
	return dir
}

func TestPairs(t *testing.T) {
	dir := writeFixture(t)
	s, err := Open(filepath.Join(dir, "images"), Options{Masks: filepath.Join(dir, "masks")})
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Info().Fields; len(f) != 1 || f[0].Name != "mask" {
		t.Fatalf("fields %v", f)
	}
	type res struct {
		clip   source.Clip
		reason string
	}
	got := map[string]res{}
	var order []string
	err = s.Enumerate(context.Background(), func(it source.Item) error {
		order = append(order, it.Name)
		var r res
		err := s.Decode(context.Background(), it, func(c source.Clip) error { r.clip = c; return nil })
		var ie *source.InputError
		if errors.As(err, &ie) {
			r.reason = ie.Err.Error()
		} else if err != nil {
			t.Fatalf("%s: %v", it.Name, err)
		}
		got[it.Name] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantOrder := "2007_000032.jpg aachen_000000_000019_leftImg8bit.png binary.jpg flat.jpg nomask.jpg notpng.jpg othersize.jpg p4.jpg rgbmask.jpg training/ADE_1.jpg trns.jpg"
	if strings.Join(order, " ") != wantOrder {
		t.Fatalf("order %q\nwant  %q", strings.Join(order, " "), wantOrder)
	}
	good := map[string]string{
		"2007_000032.jpg":                      "2007_000032.png",
		"training/ADE_1.jpg":                   "training/ADE_1.png",
		"aachen_000000_000019_leftImg8bit.png": "aachen_000000_000019_gtFine_labelIds.png",
		"flat.jpg":                             "flat.png",
		"p4.jpg":                               "p4.png",
		"binary.jpg":                           "binary.png",
		"trns.jpg":                             "trns.png",
	}
	for img, m := range good {
		r := got[img]
		if r.reason != "" {
			t.Fatalf("%s: skipped: %s", img, r.reason)
		}
		want, err := os.ReadFile(filepath.Join(dir, "masks", m+".npyraw"))
		if err != nil {
			t.Fatal(err)
		}
		mi := r.clip.Fields[0].Image
		if mi == nil || mi.C != 1 || mi.W != r.clip.Frames[0].W || !bytes.Equal(mi.Pix, want) {
			t.Fatalf("%s: mask differs from numpy's reading of %s", img, m)
		}
		if r.clip.Label != -1 {
			t.Fatalf("%s: label %d", img, r.clip.Label)
		}
	}
	for img, want := range map[string]string{
		"nomask.jpg":    "no mask: none of nomask.png",
		"othersize.jpg": "mask othersize.png is 9x8, the image 8x8",
		"rgbmask.jpg":   "mask rgbmask.png: PNG colour type 2",
		"notpng.jpg":    "mask notpng.png: not a PNG file",
	} {
		if !strings.Contains(got[img].reason, want) {
			t.Errorf("%s: reason %q, want %q", img, got[img].reason, want)
		}
	}
}

func TestPairsRefuses(t *testing.T) {
	dir := writeFixture(t)
	if _, err := Open(filepath.Join(dir, "images"), Options{}); err == nil || !strings.Contains(err.Error(), "--masks") {
		t.Fatalf("no --masks: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "images"), Options{Masks: filepath.Join(dir, "nothere")}); err == nil {
		t.Fatal("a missing masks folder was accepted")
	}
	empty := t.TempDir()
	if _, err := Open(empty, Options{Masks: empty}); err == nil || !strings.Contains(err.Error(), "no image") {
		t.Fatalf("empty images folder: %v", err)
	}
	if _, err := Entry.Open(filepath.Join(dir, "images"), source.Options{Masks: filepath.Join(dir, "masks"), Fields: []string{"x"}}); err == nil {
		t.Fatal("--fields was accepted")
	}
	if _, err := Entry.Open(filepath.Join(dir, "images"), source.Options{Masks: filepath.Join(dir, "masks"), ExifOrient: true}); err == nil {
		t.Fatal("--exif-orient was accepted")
	}
}

// FuzzReadMask: a mask file's bytes never panic the reader.
func FuzzReadMask(f *testing.F) {
	f.Add([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x00\x00\x00\x00"))
	f.Add([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\xff\xff\xff\xff\xff\xff\xff\xff\x08\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeMask(bytes.NewReader(data), 1<<20)
		if err == nil && len(m.Pix) != m.W*m.H {
			t.Fatalf("%dx%d mask with %d bytes", m.W, m.H, len(m.Pix))
		}
	})
}
