package transforms

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
)

var allFilters = []Filter{Nearest, Box, Bilinear, Hamming, Bicubic, Lanczos}

func randomImage(r *rand.Rand, w, h, c int) Image {
	img := Image{W: w, H: h, C: c, Pix: make([]byte, w*h*c)}
	// Mix smooth gradients with noise and hard edges: noise alone hides few rounding cases,
	// and saturated edges exercise clip8 with the negative lobes of bicubic and lanczos.
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for ch := 0; ch < c; ch++ {
				var v int
				switch (x/7 + y/5 + ch) % 3 {
				case 0:
					v = r.IntN(256)
				case 1:
					v = (x*255/max(w-1, 1) + y*37 + ch*80) & 255
				default:
					if (x/3+y/3)%2 == 0 {
						v = 255
					}
				}
				img.Pix[(y*w+x)*c+ch] = byte(v)
			}
		}
	}
	return img
}

type resizeCase struct {
	src  Image
	w, h int
	f    Filter
}

func checkResizeCases(t *testing.T, cases []resizeCase) {
	t.Helper()
	jobs := make([]pillowJob, len(cases))
	inputs := make([]Image, len(cases))
	for i, c := range cases {
		jobs[i] = pillowJob{"op": "resize", "size": []int{c.w, c.h}, "filter": c.f.Pillow()}
		inputs[i] = c.src
	}
	res := runPillow(t, jobs, inputs)
	failed := 0
	for i, c := range cases {
		name := fmt.Sprintf("%dx%dx%d->%dx%d/%v", c.src.W, c.src.H, c.src.C, c.w, c.h, c.f)
		if res[i].Error != "" {
			t.Errorf("%s: pillow: %s", name, res[i].Error)
			continue
		}
		got, err := Resize(c.src, c.w, c.h, c.f)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if d := firstDiff(got.Pix, res[i].Data, c.w, c.src.C); d != "" {
			t.Errorf("%s: differs from Pillow: %s", name, d)
			if failed++; failed > 20 {
				t.Fatal("too many failures")
			}
		}
	}
}

func TestResizeMatchesPillowSynthetic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	sizes := [][4]int{ // src w, h -> dst w, h
		{1, 1, 1, 1}, {1, 1, 5, 3}, {3, 7, 1, 1}, {3, 7, 2, 9}, {7, 3, 31, 2},
		{64, 48, 32, 24}, {64, 48, 17, 13}, {64, 48, 200, 150}, {64, 48, 64, 97}, {64, 48, 13, 48},
		{100, 80, 99, 81}, {101, 77, 256, 195}, {333, 250, 224, 168}, {500, 375, 256, 192},
		{4000, 20, 256, 1}, {4000, 20, 333, 7}, {20, 4000, 3, 301}, {257, 1, 256, 1}, {1, 257, 3, 256},
		{640, 480, 73, 480}, {97, 203, 97, 5}, {10, 10, 1000, 7},
	}
	var cases []resizeCase
	for _, s := range sizes {
		for _, c := range []int{3, 1} {
			src := randomImage(r, s[0], s[1], c)
			for _, f := range allFilters {
				cases = append(cases, resizeCase{src, s[2], s[3], f})
			}
		}
	}
	// Random sizes: thin, tiny, large ratios.
	for i := 0; i < 40; i++ {
		sw, sh := 1+r.IntN(300), 1+r.IntN(300)
		src := randomImage(r, sw, sh, 3)
		cases = append(cases, resizeCase{src, 1 + r.IntN(400), 1 + r.IntN(400), allFilters[i%len(allFilters)]})
	}
	checkResizeCases(t, cases)
}

func TestResizeMatchesPillowPhotos(t *testing.T) {
	photos := loadPhotos(t, wallpapers(t, 3), "RGB")
	var cases []resizeCase
	for i, p := range photos {
		w, h := p.W, p.H
		// Downscales of the full photo (4K wallpapers): antialiasing with large supports.
		targets := [][2]int{{256 * w / h, 256}, {224, 224}, {w / 3, h / 7}}
		if i > 0 {
			targets = targets[:1]
		}
		for _, tg := range targets {
			for _, f := range allFilters {
				cases = append(cases, resizeCase{p, max(tg[0], 1), max(tg[1], 1), f})
			}
		}
		// Upscales of real content: a small version of the photo, enlarged.
		small, err := Resize(p, 301, 190, Box)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range [][2]int{{512, 323}, {937, 211}} {
			for _, f := range allFilters {
				cases = append(cases, resizeCase{small, tg[0], tg[1], f})
			}
		}
	}
	checkResizeCases(t, cases)
}

// TestRegionMatchesFull: every rectangle of a resize equals the same pixels of the full resize.
func TestRegionMatchesFull(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	var rs resampler
	for i := 0; i < 300; i++ {
		c := []int{1, 3}[i%2]
		src := randomImage(r, 1+r.IntN(60), 1+r.IntN(60), c)
		w, h := 1+r.IntN(80), 1+r.IntN(80)
		f := allFilters[r.IntN(len(allFilters))]
		full, err := Resize(src, w, h, f)
		if err != nil {
			t.Fatal(err)
		}
		x0, y0 := r.IntN(w), r.IntN(h)
		x1, y1 := x0+1+r.IntN(w-x0), y0+1+r.IntN(h-y0)
		stride := (x1-x0)*c + r.IntN(3)*c
		dst := make([]byte, (y1-y0)*stride)
		rs.resizeRegion(dst, stride, wholeImage(src), w, h, f, x0, y0, x1, y1)
		for y := y0; y < y1; y++ {
			got := dst[(y-y0)*stride : (y-y0)*stride+(x1-x0)*c]
			want := full.Pix[(y*w+x0)*c : (y*w+x1)*c]
			if !bytes.Equal(got, want) {
				t.Fatalf("%dx%dx%d->%dx%d %v region [%d,%d)x[%d,%d): row %d differs", src.W, src.H, c, w, h, f, x0, x1, y0, y1, y)
			}
		}
	}
}

// TestWeightsApply: the reference per-line formula reproduces a one-axis resize.
func TestWeightsApply(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, f := range allFilters {
		src := randomImage(r, 37, 1, 3)
		got, err := Resize(src, 91, 1, f)
		if err != nil {
			t.Fatal(err)
		}
		w := ComputeWeights(37, 91, f)
		out := make([]byte, 91*3)
		for ch := 0; ch < 3; ch++ {
			w.Apply(out[ch:], src.Pix[ch:], 3)
		}
		if !bytes.Equal(out, got.Pix) {
			t.Errorf("%v: Weights.Apply differs from Resize", f)
		}
	}
}

func TestWeightsInvariants(t *testing.T) {
	for _, f := range allFilters {
		for _, s := range [][2]int{{1, 1}, {1, 9}, {9, 1}, {640, 224}, {224, 640}, {4000, 3}, {5, 5}} {
			w := ComputeWeights(s[0], s[1], f)
			if len(w.Bounds) != 2*s[1] || len(w.Coeffs) != w.KSize*s[1] || w.Precision != PrecisionBits {
				t.Fatalf("%v %v: bad shape", f, s)
			}
			for o := 0; o < s[1]; o++ {
				x0, n := int(w.Bounds[2*o]), int(w.Bounds[2*o+1])
				if x0 < 0 || n < 0 || n > w.KSize || x0+n > s[0] {
					t.Fatalf("%v %v: output %d taps [%d,+%d) out of range", f, s, o, x0, n)
				}
				for _, c := range w.Coeffs[o*w.KSize+n : (o+1)*w.KSize] {
					if c != 0 {
						t.Fatalf("%v %v: unused coefficient not zero", f, s)
					}
				}
			}
			maxTaps := 0
			for o := 0; o < s[1]; o++ {
				maxTaps = max(maxTaps, int(w.Bounds[2*o+1]))
			}
			if w.MaxTaps != maxTaps {
				t.Fatalf("%v %v: MaxTaps %d, want %d", f, s, w.MaxTaps, maxTaps)
			}
			if w.Identity != (s[0] == s[1]) {
				t.Fatalf("%v %v: Identity = %v", f, s, w.Identity)
			}
		}
	}
	if a, b := CachedWeights(640, 224, Lanczos), CachedWeights(640, 224, Lanczos); a != b {
		t.Error("CachedWeights does not cache")
	}
}

func TestResizeDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	src := randomImage(r, 301, 203, 3)
	for _, f := range allFilters {
		a, _ := Resize(src, 97, 256, f)
		for i := 0; i < 3; i++ {
			b, _ := Resize(src, 97, 256, f)
			if !bytes.Equal(a.Pix, b.Pix) {
				t.Fatalf("%v: not deterministic", f)
			}
		}
	}
}

// TestConcurrentWorkers: Workers on several goroutines, sharing the weight cache while it
// fills and is emptied, give the bytes of a sequential run (run with -race).
func TestConcurrentWorkers(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 16))
	type job struct {
		src  Image
		spec Spec
	}
	var jobs []job
	for i := 0; i < 64; i++ {
		s := Spec{Resize: 8 + r.IntN(60), CropW: 1 + r.IntN(40), CropH: 1 + r.IntN(40), Filter: allFilters[i%6]}
		jobs = append(jobs, job{randomImage(r, 1+r.IntN(100), 1+r.IntN(100), []int{1, 3}[i%2]), s})
	}
	want := make([][]byte, len(jobs))
	for i, j := range jobs {
		want[i] = applySpec(t, j.spec, j.src)
	}
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func(g int) {
			for k := 0; k < 3; k++ {
				// Churn the cache past its bound so that it is emptied concurrently.
				for n := 0; n < maxCachedWeights/8; n++ {
					CachedWeights(2+n, 1+g*3+k, Bilinear)
				}
				for i := g; i < len(jobs); i += 2 {
					j := jobs[i]
					w := j.spec.MustCompile().NewWorker()
					dst := make([]byte, j.spec.MustCompile().OutputSpec(j.src.W, j.src.H, j.src.C).Size())
					if err := w.Apply(j.src, dst); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(dst, want[i]) {
						errs <- fmt.Errorf("job %d differs on goroutine %d", i, g)
						return
					}
				}
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestMatchesPillowRandom: random sizes (thin extremes included), filters, crops and
// max sizes, resize alone and the full torchvision pipeline. (A one-off run with 3000
// resizes and 1500 pipelines found no difference either.)
func TestMatchesPillowRandom(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 120
	}
	r := rand.New(rand.NewPCG(99, 99))
	var cases []resizeCase
	for i := 0; i < n; i++ {
		sw, sh := 1+r.IntN(200), 1+r.IntN(200)
		if i%10 == 0 {
			sw, sh = 1+r.IntN(3000), 1+r.IntN(8)
		}
		src := randomImage(r, sw, sh, []int{1, 3}[i%2])
		cases = append(cases, resizeCase{src, 1 + r.IntN(300), 1 + r.IntN(300), allFilters[i%6]})
	}
	checkResizeCases(t, cases)
	var pc []pipelineCase
	for i := 0; i < n/2; i++ {
		s := Spec{Resize: 1 + r.IntN(150), Filter: allFilters[i%6]}
		if i%3 == 0 {
			s.MaxSize = s.Resize + 1 + r.IntN(100)
		}
		if i%4 != 0 {
			s.CropW, s.CropH = 1+r.IntN(160), 1+r.IntN(160)
		}
		c := pipelineJob(s)
		c.src = randomImage(r, 1+r.IntN(250), 1+r.IntN(250), []int{1, 3}[i%2])
		pc = append(pc, c)
	}
	checkPipeline(t, pc)
}

// TestAVX2MatchesGo compares the AVX2 passes with the Go loops on random images, sizes,
// filters and crops (including regions near the edges and outputs with no taps), byte for
// byte. On an amd64 cgo build whose CPU lacks AVX2 it fails rather than passing without
// running; PACKER_NO_AVX2=1 skips it explicitly there. The purego tag leaves the AVX2 passes
// out of the build, so it skips (TestPuregoTag checks that the tag did).
func TestAVX2MatchesGo(t *testing.T) {
	if simdPrecision != PrecisionBits {
		t.Fatalf("C passes shift by %d, PrecisionBits is %d", simdPrecision, PrecisionBits)
	}
	if !useAVX2 {
		if runtime.GOARCH == "amd64" && cgoEnabled && !puregoTag && os.Getenv("PACKER_NO_AVX2") != "1" {
			t.Fatal("AVX2 passes are off on this amd64 cgo build: the CPU lacks AVX2 (PACKER_NO_AVX2=1 skips this test)")
		}
		t.Skip("no AVX2 passes in this build (no cgo, not amd64, or the purego tag)")
	}
	defer func(v bool) { useAVX2 = v }(useAVX2)
	for f := Nearest; f.Valid(); f++ {
		if !ComputeWeights(500, 137, f).split16 || !ComputeWeights(137, 500, f).split16 {
			t.Fatalf("%v: weights not marked for the AVX2 horizontal pass", f)
		}
	}
	r := rand.New(rand.NewPCG(2026, 11))
	cases := 0
	for i := 0; i < 1500; i++ {
		W, H := 1+r.IntN(300), 1+r.IntN(300)
		if i%10 == 0 {
			W, H = 1+r.IntN(2000), 1+r.IntN(40) // many taps
		}
		C := []int{3, 3, 3, 1}[r.IntN(4)]
		src := randomImage(r, W, H, C)
		rw, rh := 1+r.IntN(2*W+2), 1+r.IntN(2*H+2)
		f := Nearest + Filter(r.IntN(6))
		x0, y0 := r.IntN(rw), r.IntN(rh)
		x1, y1 := x0+1+r.IntN(rw-x0), y0+1+r.IntN(rh-y0)
		stride := (x1-x0)*C + r.IntN(3)*C
		var got, want []byte
		for _, avx := range []bool{true, false} {
			useAVX2 = avx
			var rs resampler
			dst := make([]byte, (y1-y0)*stride)
			rs.resizeRegion(dst, stride, wholeImage(src), rw, rh, f, x0, y0, x1, y1)
			if avx {
				got = dst
			} else {
				want = dst
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: %dx%dx%d -> %dx%d %v region [%d,%d)x[%d,%d): AVX2 differs from Go", i, W, H, C, rw, rh, f, x0, x1, y0, y1)
		}
		cases++
	}
	t.Logf("%d cases identical", cases)
}
