package transforms

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// FuzzResize: random sizes, filters, crops, layouts and dtypes never panic, the region resize
// always equals resize-then-crop, and Apply agrees with OutputSpec.
func FuzzResize(f *testing.F) {
	f.Add(uint16(500), uint16(375), uint16(256), uint16(224), uint16(224), uint8(2), uint8(0), int64(1))
	f.Add(uint16(1), uint16(1), uint16(1), uint16(3), uint16(2), uint8(1), uint8(1), int64(2))
	f.Add(uint16(4000), uint16(20), uint16(7), uint16(5), uint16(9), uint8(0), uint8(3), int64(3))
	f.Add(uint16(3), uint16(7), uint16(0), uint16(0), uint16(0), uint8(5), uint8(2), int64(4))
	f.Fuzz(func(t *testing.T, w, h, resize, cw, ch uint16, filt, mode uint8, seed int64) {
		W, H := int(w%1024)+1, int(h%1024)+1
		if W*H > 1<<18 {
			H = max(1, (1<<18)/W)
		}
		C := []int{1, 3}[mode&1]
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		src := randomImage(r, W, H, C)
		s := Spec{
			Resize: int(resize % 700), CropW: int(cw % 600), CropH: int(ch % 600),
			Filter: Nearest + Filter(filt%6),
			Layout: []Layout{HWC, CHW}[(mode>>1)&1],
			DType:  []DType{Uint8, Float16, Float32, Uint8}[(mode>>2)&3],
		}
		if s.CropW == 0 || s.CropH == 0 {
			s.CropW, s.CropH = 0, 0
		}
		if mode&32 != 0 && s.Resize > 0 {
			s.MaxSize = s.Resize + int(cw%300) + 1
		}
		c, err := s.Compile()
		if err != nil {
			return
		}
		fw, fh, err := c.FrameSize(W, H)
		if err != nil {
			return
		}
		rw, rh, _ := c.ResizedSize(W, H)
		if fw*fh > 1<<20 || rw*rh > 1<<21 {
			return // keep each run fast
		}
		out := c.OutputSpec(W, H, C)
		dst := make([]byte, out.Size())
		if err := c.NewWorker().Apply(src, dst); err != nil {
			t.Fatalf("%+v on %dx%dx%d: %v", s, W, H, C, err)
		}
		if s.DType != Uint8 || s.Layout != HWC {
			return
		}
		// Reference: full resize, then torchvision-style pad and crop.
		full := src
		if rw != W || rh != H {
			full, err = Resize(src, rw, rh, c.ResampleFilter())
			if err != nil {
				t.Fatal(err)
			}
		}
		want := make([]byte, fw*fh*C)
		ox, oy := 0, 0
		if s.CropW > 0 {
			ox, oy = CenterCropOffset(rw, s.CropW), CenterCropOffset(rh, s.CropH)
		}
		for y := 0; y < fh; y++ {
			for x := 0; x < fw; x++ {
				sx, sy := x+ox, y+oy
				if sx < 0 || sy < 0 || sx >= rw || sy >= rh {
					continue
				}
				copy(want[(y*fw+x)*C:(y*fw+x+1)*C], full.Pix[(sy*rw+sx)*C:])
			}
		}
		if !bytes.Equal(dst, want) {
			t.Fatalf("%+v on %dx%dx%d: crop-aware resize differs from resize-then-crop", s, W, H, C)
		}
	})
}

func BenchmarkResize(b *testing.B) {
	r := rand.New(rand.NewPCG(12, 12))
	// A typical ImageNet-sized photo, and a 1080p frame for the larger target.
	srcs := map[int]Image{224: randomImage(r, 500, 375, 3), 512: randomImage(r, 1920, 1080, 3)}
	for _, f := range []Filter{Bilinear, Lanczos} {
		for _, size := range []int{224, 512} {
			b.Run(fmt.Sprintf("%v/%d", f, size), func(b *testing.B) {
				src := srcs[size]
				// Resize(size * 8/7) + CenterCrop(size): the ImageNet evaluation shape.
				s := Spec{Resize: size * 8 / 7, CropW: size, CropH: size, Filter: f}
				w := s.MustCompile().NewWorker()
				dst := make([]byte, s.MustCompile().OutputSpec(src.W, src.H, 3).Size())
				b.SetBytes(int64(len(src.Pix)))
				b.ReportAllocs()
				if err := w.Apply(src, dst); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					_ = w.Apply(src, dst)
				}
			})
		}
	}
}

// BenchmarkResizeFull is the plain full-image resize (no crop), for comparison with Pillow.
func BenchmarkResizeFull(b *testing.B) {
	r := rand.New(rand.NewPCG(13, 13))
	src := randomImage(r, 500, 375, 3)
	for _, f := range []Filter{Bilinear, Lanczos} {
		b.Run(f.String(), func(b *testing.B) {
			s := Spec{Resize: 256, Filter: f}
			w := s.MustCompile().NewWorker()
			dst := make([]byte, s.MustCompile().OutputSpec(src.W, src.H, 3).Size())
			b.SetBytes(int64(len(src.Pix)))
			b.ReportAllocs()
			_ = w.Apply(src, dst)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = w.Apply(src, dst)
			}
		})
	}
}

func BenchmarkComputeWeights(b *testing.B) {
	for _, f := range []Filter{Bilinear, Lanczos} {
		b.Run(f.String(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ComputeWeights(500, 292, f)
			}
		})
	}
}
