package transforms

import (
	"bytes"
	"fmt"
	"image"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestDecodeRegionMatchesFull proves the JPEG region shortcut exact: every region decode
// (rows skipped with jpeg_skip_scanlines, columns cropped with jpeg_crop_scanline, decoding
// stopped early) equals the same rectangle of the full decode, for every kind of JPEG in the
// corpus (4:2:0, 4:2:2, 4:4:4, progressive, grey, CMYK, YCCK), at every draft scale, and on
// the wallpapers.
func TestDecodeRegionMatchesFull(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.jpg"))
	if !testing.Short() {
		w, _ := filepath.Glob("/usr/share/backgrounds/*.jpg")
		files = append(files, w...)
	}
	sort.Strings(files)
	rng := rand.New(rand.NewPCG(1, 1))
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, denom := range []int{1, 2, 4, 8} {
			opts := DecodeOptions{}
			if denom > 1 {
				d := denom
				opts.Draft = func(w, h int) (int, int) { return w / d, h / d }
			}
			full, err := DecodeBytes(data, opts, nil)
			if err != nil {
				continue // the damaged files
			}
			if len(data) > 1<<20 && denom != 1 && denom != 8 {
				continue // keep the wallpapers quick
			}
			W, H := full.W, full.H
			rects := []image.Rectangle{
				image.Rect(0, 0, W, H), image.Rect(0, 0, 1, 1), image.Rect(W-1, H-1, W, H),
				image.Rect(W/4, H/4, 3*W/4, 3*H/4), image.Rect(W/3, 0, W/3+1, H), image.Rect(0, H/2, W, H/2+1),
			}
			for i := 0; i < 6; i++ {
				x0, y0 := rng.IntN(W), rng.IntN(H)
				rects = append(rects, image.Rect(x0, y0, x0+1+rng.IntN(W-x0), y0+1+rng.IntN(H-y0)))
			}
			for _, r := range rects {
				if r.Empty() {
					continue // decodeRegion decodes everything (tested below)
				}
				d, err := decodeRegion(data, opts, func(w, h int) image.Rectangle {
					if w != W || h != H {
						t.Errorf("%s 1/%d: region called with %dx%d, full decode is %dx%d", f, denom, w, h, W, H)
					}
					return r
				}, nil)
				name := fmt.Sprintf("%s 1/%d %v", filepath.Base(f), denom, r)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				got := image.Rect(d.At.X, d.At.Y, d.At.X+d.W, d.At.Y+d.H)
				if !r.In(got) || d.Full != image.Pt(W, H) || got.Dy() != r.Dy() {
					t.Errorf("%s: decoded %v of %v, want rows exactly and columns covering %v", name, got, d.Full, r)
					continue
				}
				for y := 0; y < d.H; y++ {
					fy := d.At.Y + y
					want := full.Pix[(fy*W+d.At.X)*3 : (fy*W+d.At.X+d.W)*3]
					if gotRow := d.Pix[y*d.W*3 : (y+1)*d.W*3]; !bytes.Equal(gotRow, want) {
						t.Errorf("%s: row %d differs from the full decode", name, fy)
						break
					}
				}
				n++
			}
		}
	}
	t.Logf("%d regions checked", n)
}

// TestDecodeRegionWhole checks the cases that decode the whole image: no region, an empty
// region, a non-JPEG file, and a JPEG with EXIF rotation applied.
func TestDecodeRegionWhole(t *testing.T) {
	for _, c := range []struct {
		file   string
		opts   DecodeOptions
		region func(w, h int) image.Rectangle
	}{
		{"baseline-420.jpg", DecodeOptions{}, nil},
		{"baseline-420.jpg", DecodeOptions{}, func(w, h int) image.Rectangle { return image.Rectangle{} }},
		{"rgb.png", DecodeOptions{}, func(w, h int) image.Rectangle { return image.Rect(1, 1, 2, 2) }},
		{"exif-rotate6.jpg", DecodeOptions{ExifOrient: true}, func(w, h int) image.Rectangle { return image.Rect(1, 1, 2, 2) }},
	} {
		p := filepath.Join("testdata", "corpus", c.file)
		full, err := DecodeFile(p, c.opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := DecodeFileRegion(p, c.opts, c.region, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.At != (image.Point{}) || d.Full != image.Pt(full.W, full.H) || d.W != full.W || d.H != full.H || !bytes.Equal(d.Pix, full.Pix) {
			t.Errorf("%s: region decode is not the whole image", c.file)
		}
	}
}

// BenchmarkDecodeRegion decodes the part of a 3840×2400 wallpaper that Resize(256) +
// CenterCrop(224) reads (columns 854–2977, rows 140–2260), against the whole image.
func BenchmarkDecodeRegion(b *testing.B) {
	data, err := os.ReadFile("/usr/share/backgrounds/the-mouse.jpg")
	if err != nil {
		b.Skip(err)
	}
	for _, c := range []struct {
		name string
		r    image.Rectangle
	}{{"whole", image.Rect(0, 0, 3840, 2400)}, {"crop224", image.Rect(854, 140, 2977, 2260)}} {
		b.Run(c.name, func(b *testing.B) {
			var s DecodeScratch
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if _, err := decodeRegion(data, DecodeOptions{}, func(w, h int) image.Rectangle { return c.r }, &s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
