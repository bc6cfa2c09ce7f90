package gpu

import (
	"image"
	"image/draw"
	_ "image/jpeg" // wallpapers
	_ "image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/packer-dev/packer/transforms"
)

func randomImage(r *rand.Rand, w, h, c int) transforms.Image {
	im := transforms.Image{W: w, H: h, C: c, Pix: make([]byte, w*h*c)}
	for i := range im.Pix {
		im.Pix[i] = byte(r.IntN(256))
	}
	// Some flat and saturated areas too, where clipping happens.
	for y := 0; y < h/3; y++ {
		for x := 0; x < w/2; x++ {
			v := byte(255 * ((x / 3) % 2))
			for ch := 0; ch < c; ch++ {
				im.Pix[(y*w+x)*c+ch] = v
			}
		}
	}
	return im
}

var allFilters = []transforms.Filter{transforms.Nearest, transforms.Box, transforms.Bilinear, transforms.Hamming, transforms.Bicubic, transforms.Lanczos}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// loadWallpaper decodes a Debian wallpaper into an RGB transforms.Image (alpha dropped).
// Both sides of the comparison get the same pixels, so the decoder need not be Pillow's.
func loadWallpaper(t testing.TB, path string) transforms.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("wallpaper not installed: %v", err)
	}
	defer f.Close()
	src, _, err := image.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b := src.Bounds()
	rgba := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(rgba, rgba.Bounds(), src, b.Min, draw.Src)
	im := transforms.Image{W: b.Dx(), H: b.Dy(), C: 3, Pix: make([]byte, b.Dx()*b.Dy()*3)}
	for i := 0; i < b.Dx()*b.Dy(); i++ {
		copy(im.Pix[3*i:3*i+3], rgba.Pix[4*i:4*i+3])
	}
	return im
}

// wallpapers returns up to n wallpaper paths, a JPEG and a PNG first; none when the
// wallpaper package is not installed.
func wallpapers(n int) []string {
	paths, _ := filepath.Glob("/usr/share/backgrounds/*.jpg")
	pngs, _ := filepath.Glob("/usr/share/backgrounds/*.png")
	paths = append(paths, pngs...)
	slices.Sort(paths)
	// One JPEG and one PNG first, then the rest.
	var out []string
	for _, p := range paths {
		if len(out) < n && (len(out) == 0 || filepath.Ext(p) != filepath.Ext(out[0])) {
			out = append(out, p)
		}
	}
	return out
}

// crop returns the w×h region of im at (x0, y0).
func crop(im transforms.Image, x0, y0, w, h int) transforms.Image {
	out := transforms.Image{W: w, H: h, C: im.C, Pix: make([]byte, w*h*im.C)}
	for y := 0; y < h; y++ {
		copy(out.Pix[y*w*im.C:(y+1)*w*im.C], im.Pix[((y0+y)*im.W+x0)*im.C:])
	}
	return out
}
