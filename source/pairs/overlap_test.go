package pairs

import (
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/packer-dev/packer/source"
)

// writePNG writes a w×h PNG: RGB for an image, 8-bit grey for a mask.
func writePNG(t *testing.T, p string, w, h int, grey bool) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	var img image.Image
	if grey {
		g := image.NewGray(image.Rect(0, 0, w, h))
		for i := range g.Pix {
			g.Pix[i] = uint8(i % 7)
		}
		img = g
	} else {
		c := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c.Set(x, y, color.RGBA{uint8(x * 9), uint8(y * 13), 77, 255})
			}
		}
		img = c
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}

// pairsOf enumerates and decodes s: the mask each packed image got, and the reason of each
// skipped one.
func pairsOf(t *testing.T, s *Source) (packed map[string]string, skipped map[string]string) {
	t.Helper()
	packed, skipped = map[string]string{}, map[string]string{}
	err := s.Enumerate(context.Background(), func(it source.Item) error {
		err := s.Decode(context.Background(), it, func(c source.Clip) error {
			packed[it.Name] = string(c.Meta)
			return nil
		})
		var ie *source.InputError
		if errors.As(err, &ie) {
			skipped[it.Name] = ie.Err.Error()
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return packed, skipped
}

func keys(m map[string]string) string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return strings.Join(k, " ")
}

// TestMasksInsideImages: a masks folder inside the images folder (VOC2012/ given as the images
// with --masks VOC2012/SegmentationClass, or images/ holding masks/) is not part of the images:
// each mask was listed as an image too and packed as a record paired with itself. And where
// masks and images share one folder, an image is never its own mask: a Cityscapes image
// X_leftImg8bit.png took itself (X_leftImg8bit.png, its first candidate) instead of
// X_gtFine_labelIds.png, and each mask was packed as an image of itself.
func TestMasksInsideImages(t *testing.T) {
	dir := t.TempDir()
	writePNG(t, filepath.Join(dir, "a.png"), 6, 4, false)
	writePNG(t, filepath.Join(dir, "sub", "b.png"), 5, 3, false)
	writePNG(t, filepath.Join(dir, "masks", "a.png"), 6, 4, true)
	writePNG(t, filepath.Join(dir, "masks", "sub", "b.png"), 5, 3, true)
	link := filepath.Join(t.TempDir(), "masks-link")
	if err := os.Symlink(filepath.Join(dir, "masks"), link); err != nil {
		t.Fatal(err)
	}
	for _, masks := range []string{filepath.Join(dir, "masks"), filepath.Join(dir, ".", "masks") + "/", link} {
		s, err := Open(dir, Options{Masks: masks})
		if err != nil {
			t.Fatal(err)
		}
		packed, skipped := pairsOf(t, s)
		if keys(packed) != "a.png sub/b.png" || len(skipped) != 0 {
			t.Errorf("--masks %s: packed %v, skipped %v; want a.png and sub/b.png only", masks, packed, skipped)
		}
	}

	one := t.TempDir()
	writePNG(t, filepath.Join(one, "x_leftImg8bit.png"), 6, 4, false)
	writePNG(t, filepath.Join(one, "x_gtFine_labelIds.png"), 6, 4, true)
	writePNG(t, filepath.Join(one, "y.png"), 6, 4, true) // a mask whose image is missing
	s, err := Open(one, Options{Masks: one})
	if err != nil {
		t.Fatal(err)
	}
	packed, skipped := pairsOf(t, s)
	if m := packed["x_leftImg8bit.png"]; !strings.Contains(m, `"mask":"x_gtFine_labelIds.png"`) {
		t.Errorf("x_leftImg8bit.png packed with %q, want its mask x_gtFine_labelIds.png", m)
	}
	if len(packed) != 1 {
		t.Errorf("packed %v, want x_leftImg8bit.png only (a mask is no image of itself)", packed)
	}
	for _, n := range []string{"x_gtFine_labelIds.png", "y.png"} {
		if !strings.Contains(skipped[n], "no mask") {
			t.Errorf("%s: skipped %q, want no mask", n, skipped[n])
		}
	}
}
