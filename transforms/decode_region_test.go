package transforms

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
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
			opts := draftOptions(denom)
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
				hdr, err := jpegDecodeHeader(data)
				if err != nil {
					t.Fatal(err)
				}
				if !regionSafe(hdr, denom) {
					// Decoded whole: the region path is not used at reduced scales.
					if got != image.Rect(0, 0, W, H) || d.Full != image.Pt(W, H) || !bytes.Equal(d.Pix, full.Pix) {
						t.Errorf("%s: decoded %v of %v, want the whole image", name, got, d.Full)
					}
					continue
				}
				if !r.In(got) || d.Full != image.Pt(W, H) || got.Dy() != r.Dy() {
					t.Errorf("%s: decoded %v of %v, want rows exactly and columns covering %v", name, got, d.Full, r)
					continue
				}
				if fy := windowDiff(d, full); fy >= 0 {
					t.Errorf("%s: row %d differs from the full decode", name, fy)
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

// TestDecodeRegionFailsLikeFull checks that a region decode accepts and rejects exactly the
// files the full decode does, with the same kind of error: every corpus JPEG, cut short at
// many lengths and with bytes overwritten at many offsets, for regions at the top, middle and
// left of the image (damage below or beside the region must still be found, as Pillow finds
// it). Where both succeed, the region equals the full decode's rectangle.
func TestDecodeRegionFailsLikeFull(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.jpg"))
	sort.Strings(files)
	rng := rand.New(rand.NewPCG(7, 7))
	checked, failed := 0, 0
	for _, f := range files {
		orig, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(orig) > 1<<20 || len(orig) < 64 {
			continue
		}
		var variants [][]byte
		for i := 1; i <= 12; i++ {
			variants = append(variants, orig[:len(orig)*i/13])
		}
		for i := 0; i < 12; i++ {
			d := append([]byte(nil), orig...)
			at := len(d)/4 + rng.IntN(len(d)-len(d)/4)
			for k := 0; k < 8 && at+k < len(d); k++ {
				d[at+k] = byte(rng.IntN(256))
			}
			variants = append(variants, d)
		}
		for vi, data := range variants {
			full, ferr := DecodeBytes(data, DecodeOptions{}, nil)
			for _, rf := range []func(w, h int) image.Rectangle{
				func(w, h int) image.Rectangle { return image.Rect(0, 0, w, max(1, h/4)) },
				func(w, h int) image.Rectangle { return image.Rect(w/4, h/4, max(w/4+1, 3*w/4), max(h/4+1, h/2)) },
				func(w, h int) image.Rectangle { return image.Rect(0, 0, max(1, w/3), h) },
			} {
				d, rerr := decodeRegion(data, DecodeOptions{}, rf, nil)
				name := fmt.Sprintf("%s variant %d (%d bytes)", filepath.Base(f), vi, len(data))
				checked++
				if (ferr == nil) != (rerr == nil) {
					t.Errorf("%s: full decode error %v, region decode error %v", name, ferr, rerr)
					continue
				}
				if ferr != nil {
					failed++
					if kindOf(ferr) != kindOf(rerr) {
						t.Errorf("%s: full decode %v, region decode %v: different kinds", name, ferr, rerr)
					}
					continue
				}
				if fy := windowDiff(d, full); fy >= 0 {
					t.Errorf("%s: row %d differs from the full decode", name, fy)
				}
			}
		}
	}
	if failed == 0 || failed == checked {
		t.Fatalf("%d of %d decodes failed: the damage did not exercise both outcomes", failed, checked)
	}
	t.Logf("%d region decodes agree with the full decode (%d of them errors)", checked, failed)
}

// kindOf is the sentinel an error wraps, for comparing failures.
func kindOf(err error) error {
	for _, k := range []error{ErrTruncated, ErrCorrupt, ErrTooLarge, ErrEmpty, ErrUnsupported} {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// TestDecodeRegionSampling runs region decodes of JPEGs with unusual luma sampling factors
// (testdata/sampling: 2×4, 4×2, 1×4, 4×1, 3×1, 1×3, 2×2, 1×2, baseline and progressive) at
// every draft scale, for row strips, column strips and corners: each must return, and equal the
// same rectangle of the full decode. libjpeg-turbo 2.1's cropped and skipped decoding gives
// other pixels, or never returns, for some of these at reduced scales; regionSafe sends those to
// the whole decode, and this test is what found them.
func TestDecodeRegionSampling(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "sampling", "*.jpg"))
	if len(files) < 32 {
		t.Fatalf("%d files in testdata/sampling, want 32", len(files))
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, denom := range []int{1, 2, 4, 8} {
			opts := draftOptions(denom)
			full, err := DecodeBytes(data, opts, nil)
			if err != nil {
				t.Fatalf("%s 1/%d: %v", f, denom, err)
			}
			W, H := full.W, full.H
			var rects []image.Rectangle
			for y := 0; y < H; y += max(1, H/5) {
				rects = append(rects, image.Rect(0, y, max(1, W/2), y+1), image.Rect(0, 0, W, y+1))
			}
			for x := 0; x < W; x += max(1, W/5) {
				rects = append(rects, image.Rect(x, 0, x+1, H), image.Rect(x, H/2, W, H))
			}
			for _, r := range rects {
				name := fmt.Sprintf("%s 1/%d %v", filepath.Base(f), denom, r)
				type res struct {
					d   Decoded
					err error
				}
				done := make(chan res, 1)
				go func() {
					d, err := decodeRegion(data, opts, func(w, h int) image.Rectangle { return r }, nil)
					done <- res{d, err}
				}()
				var got res
				select {
				case got = <-done:
				case <-time.After(time.Minute):
					t.Fatalf("%s: the region decode did not return within a minute", name)
				}
				if got.err != nil {
					t.Errorf("%s: %v", name, got.err)
					continue
				}
				if fy := windowDiff(got.d, full); fy >= 0 {
					t.Errorf("%s: row %d differs from the full decode", name, fy)
				}
				n++
			}
		}
	}
	t.Logf("%d region decodes identical", n)
}

// draftOptions decodes at scale 1/denom (1: full scale).
func draftOptions(denom int) DecodeOptions {
	if denom <= 1 {
		return DecodeOptions{}
	}
	return DecodeOptions{Draft: func(w, h int) (int, int) { return w / denom, h / denom }}
}

// windowDiff returns the first full-image row at which the window d differs from the same
// rectangle of the full decode, or -1 when every row is identical.
func windowDiff(d Decoded, full Image) int {
	for y := 0; y < d.H; y++ {
		fy := d.At.Y + y
		want := full.Pix[(fy*full.W+d.At.X)*3 : (fy*full.W+d.At.X+d.W)*3]
		if !bytes.Equal(d.Pix[y*d.W*3:(y+1)*d.W*3], want) {
			return fy
		}
	}
	return -1
}
