package transforms

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

func applySpec(t testing.TB, s Spec, src Image) []byte {
	t.Helper()
	c, err := s.Compile()
	if err != nil {
		t.Fatalf("%+v: %v", s, err)
	}
	out := c.OutputSpec(src.W, src.H, src.C)
	dst := make([]byte, out.Size())
	if err := c.NewWorker().Apply(src, dst); err != nil {
		t.Fatalf("%+v on %dx%d: %v", s, src.W, src.H, err)
	}
	return dst
}

// pipelineJob is the torchvision pipeline of a Spec, for pillow_ref.py.
func pipelineJob(s Spec) pipelineCase {
	j := pillowJob{"op": "pipeline", "filter": s.MustCompile().ResampleFilter().Pillow()}
	if s.Resize > 0 {
		j["resize"] = s.Resize
		if s.MaxSize > 0 {
			j["max_size"] = s.MaxSize
		}
	}
	if s.Width > 0 {
		j["size"] = []int{s.Width, s.Height}
	}
	if s.CropW > 0 {
		j["crop"] = []int{s.CropW, s.CropH}
	}
	return pipelineCase{spec: s, job: j}
}

type pipelineCase struct {
	spec Spec
	job  pillowJob
	src  Image
}

func checkPipeline(t *testing.T, cases []pipelineCase) {
	t.Helper()
	jobs := make([]pillowJob, len(cases))
	inputs := make([]Image, len(cases))
	for i, c := range cases {
		jobs[i], inputs[i] = c.job, c.src
	}
	res := runPillow(t, jobs, inputs)
	for i, c := range cases {
		name := fmt.Sprintf("%dx%dx%d %+v", c.src.W, c.src.H, c.src.C, c.spec)
		if res[i].Error != "" {
			// torchvision refuses it (an empty resize): packer must refuse it too.
			if _, _, err := c.spec.MustCompile().FrameSize(c.src.W, c.src.H); err == nil {
				t.Errorf("%s: torchvision fails (%s) but packer accepts it", name, res[i].Error)
			}
			continue
		}
		fw, fh, err := c.spec.MustCompile().FrameSize(c.src.W, c.src.H)
		if err != nil || fw != res[i].W || fh != res[i].H {
			t.Errorf("%s: frame %dx%d (%v), torchvision %dx%d", name, fw, fh, err, res[i].W, res[i].H)
			continue
		}
		got := applySpec(t, c.spec, c.src)
		if d := firstDiff(got, res[i].Data, fw, c.src.C); d != "" {
			t.Errorf("%s: differs from torchvision/Pillow: %s", name, d)
		}
	}
}

// TestPipelineMatchesTorchvisionPhotos: Resize(256) + CenterCrop(224), the ImageNet
// evaluation transform, on real photos, byte for byte, for every filter.
func TestPipelineMatchesTorchvisionPhotos(t *testing.T) {
	n := 8
	if testing.Short() {
		n = 2
	}
	photos := loadPhotos(t, wallpapers(t, n), "RGB")
	var cases []pipelineCase
	for i, p := range photos {
		for _, f := range allFilters {
			if i >= 2 && f != Bilinear {
				continue // bilinear (the default) on every photo, all filters on the first few
			}
			c := pipelineJob(Spec{Resize: 256, CropW: 224, CropH: 224, Filter: f})
			c.src = p
			cases = append(cases, c)
		}
	}
	// Greyscale ("L") too.
	for _, p := range loadPhotos(t, wallpapers(t, 2), "L") {
		c := pipelineJob(Spec{Resize: 256, CropW: 224, CropH: 224})
		c.src = p
		cases = append(cases, c)
	}
	checkPipeline(t, cases)
}

func TestPipelineMatchesTorchvisionSynthetic(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	specs := []Spec{
		{Resize: 256, CropW: 224, CropH: 224},
		{Resize: 32, CropW: 17, CropH: 31, Filter: Bicubic},
		{Resize: 64, MaxSize: 80, CropW: 60, CropH: 60, Filter: Lanczos},
		{Resize: 50, MaxSize: 51},
		{Resize: 7},
		{Width: 33, Height: 17, Filter: Hamming},
		{Width: 40, Height: 300, CropW: 41, CropH: 299, Filter: Box},
		{CropW: 10, CropH: 13},                                           // crop without resize
		{CropW: 500, CropH: 7},                                           // pad one axis, crop the other
		{CropW: 301, CropH: 302},                                         // pad both (odd and even padding)
		{Resize: 20, CropW: 64, CropH: 64, Filter: Nearest},              // pad after resize
		{Resize: 1, CropW: 2, CropH: 3},                                  // 1-pixel short side
		{Width: 1, Height: 1, CropW: 1, CropH: 1, Filter: Lanczos},       //
		{Resize: 100, CropW: 99, CropH: 98, Filter: Nearest},             //
		{Resize: 123, MaxSize: 200, CropW: 100, CropH: 101, Filter: Box}, //
	}
	sizes := [][2]int{{64, 48}, {48, 64}, {100, 100}, {3, 7}, {1, 1}, {301, 200}, {200, 301}, {4000, 20}, {20, 400}, {257, 256}}
	var cases []pipelineCase
	for _, s := range specs {
		for i, sz := range sizes {
			c := pipelineJob(s)
			c.src = randomImage(r, sz[0], sz[1], []int{3, 1}[i%2])
			cases = append(cases, c)
		}
	}
	checkPipeline(t, cases)
}

func TestCenterCropOffset(t *testing.T) {
	for _, c := range []struct{ size, crop, want int }{
		{10, 10, 0}, {11, 10, 0}, {12, 10, 1}, {13, 10, 2}, {15, 10, 2}, {17, 10, 4}, {19, 10, 4},
		{256, 224, 16}, {341, 224, 58}, {9, 10, 0}, {8, 10, -1}, {7, 10, -1}, {1, 10, -4},
	} {
		if got := CenterCropOffset(c.size, c.crop); got != c.want {
			t.Errorf("CenterCropOffset(%d, %d) = %d, want %d", c.size, c.crop, got, c.want)
		}
	}
}

func TestResizeOutputSize(t *testing.T) {
	for _, c := range []struct{ w, h, size, max, ww, wh int }{
		{500, 375, 256, 0, 341, 256}, {375, 500, 256, 0, 256, 341}, {256, 256, 256, 0, 256, 256},
		{4000, 20, 256, 0, 51200, 256}, {4000, 20, 256, 300, 300, 1}, {640, 480, 224, 0, 298, 224},
		{333, 500, 224, 0, 224, 336}, {1920, 1080, 256, 400, 400, 225},
	} {
		w, h, err := ResizeOutputSize(c.w, c.h, c.size, c.max)
		if err != nil || w != c.ww || h != c.wh {
			t.Errorf("ResizeOutputSize(%d, %d, %d, %d) = %d, %d, %v; want %d, %d", c.w, c.h, c.size, c.max, w, h, err, c.ww, c.wh)
		}
	}
	if _, _, err := ResizeOutputSize(1, 100000, 256, 300); err == nil {
		t.Error("empty resize accepted")
	}
}

func TestSpecValidate(t *testing.T) {
	bad := []Spec{
		{Layout: 2}, {Layout: -1}, {DType: 3}, {Filter: 7, Resize: 3}, {Filter: -1, Resize: 3}, {Resize: 3, Width: 4, Height: 4},
		{Width: 3}, {MaxSize: 10}, {Resize: 10, MaxSize: 10}, {CropW: 3}, {Resize: -1},
		{DType: Float32, Mean: []float64{0.5}}, {DType: Float32, Mean: []float64{0.5}, Std: []float64{0}},
		{DType: Uint8, Mean: []float64{0.5}, Std: []float64{0.5}}, {DType: Float32, Mean: []float64{1, 2}, Std: []float64{1, 2}},
	}
	for _, s := range bad {
		if _, err := s.Compile(); err == nil {
			t.Errorf("%+v: accepted", s)
		}
	}
	good := []Spec{{}, {Resize: 256, CropW: 224, CropH: 224}, {Width: 3, Height: 4, Layout: CHW, DType: Float16},
		{DType: Float32, Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225}}}
	for _, s := range good {
		if _, err := s.Compile(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

// TestTensorMatchesTorchvision: layout, dtype and normalisation against ToTensor + Normalize
// (torch when importable, numpy float32 otherwise) on a cropped real-size frame.
func TestTensorMatchesTorchvision(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	imnetMean, imnetStd := []float64{0.485, 0.456, 0.406}, []float64{0.229, 0.224, 0.225}
	var jobs []pillowJob
	var inputs, srcs []Image
	var specs []Spec
	for _, layout := range []Layout{HWC, CHW} {
		for _, dt := range []DType{Float32, Float16} {
			for _, norm := range []bool{false, true} {
				for _, c := range []int{3, 1} {
					s := Spec{Resize: 40, CropW: 32, CropH: 30, Layout: layout, DType: dt}
					j := pillowJob{"op": "tensor", "dtype": dt.String(), "layout": layout.String()}
					if norm {
						s.Mean, s.Std = imnetMean, imnetStd
						if c == 1 {
							s.Mean, s.Std = []float64{0.5}, []float64{0.25}
						}
						j["mean"], j["std"] = s.Mean, s.Std
					}
					src := randomImage(r, 57, 45, c)
					// The Python side gets the resized and cropped uint8 frame.
					u8 := applySpec(t, Spec{Resize: s.Resize, CropW: s.CropW, CropH: s.CropH}, src)
					jobs = append(jobs, j)
					inputs = append(inputs, Image{W: 32, H: 30, C: c, Pix: u8})
					srcs = append(srcs, src)
					specs = append(specs, s)
				}
			}
		}
	}
	res := runPillow(t, jobs, inputs)
	for i, s := range specs {
		if res[i].Error != "" {
			t.Fatalf("%+v: %s", s, res[i].Error)
		}
		got := applySpec(t, s, srcs[i])
		if !bytes.Equal(got, res[i].Data) {
			t.Errorf("%+v C=%d: differs from torchvision (%s)", s, srcs[i].C, firstDiff(got, res[i].Data, 1, 1))
		}
	}
}

func TestCHWUint8(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	src := randomImage(r, 5, 4, 3)
	got := applySpec(t, Spec{Layout: CHW}, src)
	for ch := 0; ch < 3; ch++ {
		for i := 0; i < 20; i++ {
			if got[ch*20+i] != src.Pix[i*3+ch] {
				t.Fatalf("chw: channel %d pixel %d wrong", ch, i)
			}
		}
	}
}

func TestApplyErrors(t *testing.T) {
	s := Spec{Resize: 256, MaxSize: 300}
	w := s.MustCompile().NewWorker()
	if err := w.Apply(Image{W: 1, H: 100000, C: 1, Pix: make([]byte, 100000)}, nil); err == nil {
		t.Error("empty resize accepted")
	}
	if sp := s.MustCompile().OutputSpec(1, 100000, 1); sp.Validate() == nil {
		t.Error("OutputSpec of an empty resize validates")
	}
	if err := w.Apply(Image{W: 10, H: 10, C: 3, Pix: make([]byte, 299)}, nil); err == nil {
		t.Error("short image accepted")
	}
	if err := (Spec{}).MustCompile().NewWorker().Apply(Image{W: 2, H: 2, C: 3, Pix: make([]byte, 12)}, make([]byte, 11)); err == nil {
		t.Error("short destination accepted")
	}
}

// TestWorkerReuse: a Worker gives the same bytes as a fresh one whatever it processed
// before, and does not allocate on the hot path once warm.
func TestWorkerReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	s := Spec{Resize: 64, CropW: 56, CropH: 56, DType: Float16, Layout: CHW, Mean: []float64{0.5}, Std: []float64{0.5}}
	w := s.MustCompile().NewWorker()
	for i := 0; i < 30; i++ {
		src := randomImage(r, 20+r.IntN(200), 20+r.IntN(200), 3)
		dst := make([]byte, s.MustCompile().OutputSpec(src.W, src.H, 3).Size())
		if err := w.Apply(src, dst); err != nil {
			t.Fatal(err)
		}
		if want := applySpec(t, s, src); !bytes.Equal(dst, want) {
			t.Fatalf("image %d: reused worker differs", i)
		}
	}
	src := randomImage(r, 500, 375, 3)
	for _, s := range []Spec{{Resize: 256, CropW: 224, CropH: 224}, s} {
		w := s.MustCompile().NewWorker()
		dst := make([]byte, s.MustCompile().OutputSpec(src.W, src.H, 3).Size())
		_ = w.Apply(src, dst)
		if n := testing.AllocsPerRun(10, func() { _ = w.Apply(src, dst) }); n > 0 {
			t.Errorf("%+v: Apply allocates %v times per image", s, n)
		}
	}
}

// TestPlanReproducesApply: the exported Plan and Weights alone reproduce Apply, through the
// reference per-sample formula (what a GPU kernel does).
func TestPlanReproducesApply(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	for i := 0; i < 60; i++ {
		c := []int{1, 3}[i%2]
		src := randomImage(r, 1+r.IntN(90), 1+r.IntN(90), c)
		s := Spec{Resize: 1 + r.IntN(70), Filter: allFilters[i%6]}
		if i%3 != 0 {
			s.CropW, s.CropH = 1+r.IntN(60), 1+r.IntN(60)
		}
		p, err := s.MustCompile().Plan(src.W, src.H)
		if err != nil {
			t.Fatal(err)
		}
		// Horizontal pass over every source row, vertical over the result.
		mid := make([]byte, p.ResizedW*src.H*c)
		for y := 0; y < src.H; y++ {
			for ch := 0; ch < c; ch++ {
				p.X.Apply(mid[y*p.ResizedW*c+ch:], src.Pix[y*src.W*c+ch:], c)
			}
		}
		res := make([]byte, p.ResizedW*p.ResizedH*c)
		for x := 0; x < p.ResizedW*c; x++ {
			col := make([]byte, src.H)
			for y := range col {
				col[y] = mid[y*p.ResizedW*c+x]
			}
			out := make([]byte, p.ResizedH)
			p.Y.Apply(out, col, 1)
			for y, v := range out {
				res[y*p.ResizedW*c+x] = v
			}
		}
		want := make([]byte, p.OutW*p.OutH*c)
		for y := 0; y < p.OutH; y++ {
			for x := 0; x < p.OutW; x++ {
				sx, sy := x+p.OffX, y+p.OffY
				if sx >= 0 && sy >= 0 && sx < p.ResizedW && sy < p.ResizedH {
					copy(want[(y*p.OutW+x)*c:(y*p.OutW+x+1)*c], res[(sy*p.ResizedW+sx)*c:])
				}
			}
		}
		if got := applySpec(t, s, src); !bytes.Equal(got, want) {
			t.Fatalf("%+v on %dx%dx%d: Plan reference differs from Apply", s, src.W, src.H, c)
		}
	}
}

// TestApplyWindow: decoding only Plan.SourceRect (plus any margin) gives Apply's bytes, and a
// window that misses part of it is refused.
func TestApplyWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 15))
	for i := 0; i < 200; i++ {
		c := []int{1, 3}[i%2]
		full := randomImage(r, 1+r.IntN(120), 1+r.IntN(120), c)
		s := Spec{Resize: 1 + r.IntN(90), Filter: allFilters[i%6], DType: []DType{Uint8, Float32}[i%4/3]}
		switch i % 5 {
		case 0:
			s.Resize = 0
			s.CropW, s.CropH = 1+r.IntN(100), 1+r.IntN(100)
		case 1, 2, 3:
			s.CropW, s.CropH = 1+r.IntN(80), 1+r.IntN(80)
		}
		if _, _, err := s.MustCompile().FrameSize(full.W, full.H); err != nil {
			continue
		}
		want := applySpec(t, s, full)
		p, err := s.MustCompile().Plan(full.W, full.H)
		if err != nil {
			t.Fatal(err)
		}
		x0, y0, x1, y1 := p.SourceRect()
		if x1 <= x0 {
			x0, y0, x1, y1 = 0, 0, 1, 1
		}
		// Random margin around the rectangle.
		wx0, wy0 := x0-r.IntN(x0+1), y0-r.IntN(y0+1)
		wx1, wy1 := x1+r.IntN(full.W-x1+1), y1+r.IntN(full.H-y1+1)
		win := Image{W: wx1 - wx0, H: wy1 - wy0, C: c, Pix: make([]byte, (wx1-wx0)*(wy1-wy0)*c)}
		for y := wy0; y < wy1; y++ {
			copy(win.Pix[(y-wy0)*win.W*c:(y-wy0+1)*win.W*c], full.Pix[(y*full.W+wx0)*c:(y*full.W+wx1)*c])
		}
		got := make([]byte, len(want))
		w := s.MustCompile().NewWorker()
		if err := w.ApplyWindow(win, wx0, wy0, full.W, full.H, got); err != nil {
			t.Fatalf("%+v on %dx%d, window [%d,%d)x[%d,%d) of rect [%d,%d)x[%d,%d): %v", s, full.W, full.H, wx0, wx1, wy0, wy1, x0, x1, y0, y1, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v on %dx%d: window [%d,%d)x[%d,%d) differs from Apply", s, full.W, full.H, wx0, wx1, wy0, wy1)
		}
		// One column or row short of the rectangle: refused.
		if x1-x0 > 1 && x0 == wx0 && x0 > 0 {
			small := Image{W: win.W - 1, H: win.H, C: c, Pix: make([]byte, (win.W-1)*win.H*c)}
			if w.ApplyWindow(small, wx0+1, wy0, full.W, full.H, got) == nil {
				t.Fatalf("%+v: window missing column %d accepted", s, x0)
			}
		}
	}
}

func TestSourceRectSkipsWork(t *testing.T) {
	// Resize(256) + CenterCrop(224) of a 500x375 landscape photo reads about 2/3 of the
	// columns and 7/8 of the rows.
	p, err := Spec{Resize: 256, CropW: 224, CropH: 224}.MustCompile().Plan(500, 375)
	if err != nil {
		t.Fatal(err)
	}
	x0, y0, x1, y1 := p.SourceRect()
	if x1-x0 > 340 || y1-y0 > 335 || x0 < 80 || y0 < 20 {
		t.Errorf("SourceRect = [%d,%d)x[%d,%d)", x0, x1, y0, y1)
	}
	t.Logf("Resize(256)+CenterCrop(224) of 500x375 reads [%d,%d)x[%d,%d)", x0, x1, y0, y1)
}
