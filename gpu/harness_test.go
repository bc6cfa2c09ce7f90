//go:build cgo

package gpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/packer-dev/packer/gpu/kernels"
	"github.com/packer-dev/packer/transforms"
)

// hostRun runs a batch through the planner and the kernels' per-thread bodies compiled for
// the host (the CPU harness), exactly as Resizer.Run does on the device.
type hostResult struct {
	outs [][]byte
	plan *batchPlan
	mid  []byte
	pool *hostPool
}

func hostRun(t testing.TB, spec transforms.Spec, imgs []transforms.Image, luts *lutSet) hostResult {
	t.Helper()
	var rec recordPool
	plan, err := planBatch(spec.MustCompile(), imgs, nil, &rec, luts)
	if err != nil {
		t.Fatalf("planBatch: %v", err)
	}
	pool := &hostPool{}
	if err := plan.placeWeights(&rec, pool); err != nil {
		t.Fatalf("placeWeights: %v", err)
	}
	src := make([]byte, plan.srcBytes)
	plan.stageSources(imgs, src)
	mid := make([]byte, plan.midBytes)
	dst := make([]byte, plan.dstBytes)
	hg, vg := plan.grid(plan.maxHWork), plan.grid(plan.maxVWork)
	kernels.HPass(hg.X, hg.Y, BlockSize, plan.jobs, src, pool.words, mid)
	kernels.VPass(vg.X, vg.Y, BlockSize, plan.jobs, mid, pool.words, luts.words, dst, plan.layout, plan.esize)
	outs := make([][]byte, len(imgs))
	for i := range outs {
		outs[i] = make([]byte, plan.dstSizes[i])
	}
	if err := plan.scatter(dst, outs); err != nil {
		t.Fatal(err)
	}
	return hostResult{outs: outs, plan: plan, mid: mid, pool: pool}
}

// reference is the CPU answer for one image. It is transforms.Worker.Apply when the
// transforms package accepts the spec; until resize, crop and float dtypes land there, it is
// composed from transforms.Resize (Pillow-exact), a centre crop/pad at PlanGeometry's offsets
// (checked against torchvision by TestPlanGeometry), and the layout/dtype conversion through
// the same lookup table the kernels get. usedWorker says which.
func reference(t testing.TB, spec transforms.Spec, im transforms.Image, luts *lutSet) (out []byte, usedWorker bool) {
	t.Helper()
	c := spec.MustCompile()
	_, lutErr := conversionLUT(c, im.C) // when transforms refuses this channel count, the table is synthetic
	if lutErr == nil {
		dst := make([]byte, mustOutputSize(t, spec, im))
		if err := c.NewWorker().Apply(im, dst); err != nil {
			t.Fatalf("Worker.Apply: %v", err)
		}
		return dst, true
	}
	g, err := PlanGeometry(c, im.W, im.H)
	if err != nil {
		t.Fatal(err)
	}
	r, err := transforms.Resize(im, g.RW, g.RH, c.ResampleFilter())
	if err != nil {
		t.Fatal(err)
	}
	C := im.C
	layout, esize, _ := conversion(c)
	out = make([]byte, g.OutW*g.OutH*C*int(esize))
	for y := 0; y < g.OutH; y++ {
		for x := 0; x < g.OutW; x++ {
			for c := 0; c < C; c++ {
				var v byte
				rx, ry := x+g.OffX, y+g.OffY
				if rx >= 0 && rx < g.RW && ry >= 0 && ry < g.RH {
					v = r.Pix[(ry*g.RW+rx)*C+c]
				}
				e := (y*g.OutW+x)*C + c
				if layout == layoutCHW {
					e = c*g.OutW*g.OutH + y*g.OutW + x
				}
				if esize == 1 {
					out[e] = v
					continue
				}
				bits := luts.words[lutOffset(C)+c*256+int(v)]
				for k := 0; k < int(esize); k++ {
					out[e*int(esize)+k] = byte(bits >> (8 * k))
				}
			}
		}
	}
	return out, false
}

func mustOutputSize(t testing.TB, spec transforms.Spec, im transforms.Image) int {
	g, err := PlanGeometry(spec.MustCompile(), im.W, im.H)
	if err != nil {
		t.Fatal(err)
	}
	_, esize, _ := conversion(spec.MustCompile())
	return g.OutW * g.OutH * im.C * int(esize)
}

// testLUTs returns the real conversion tables for spec when transforms implements its dtype,
// and otherwise random bit patterns (the kernels only look values up, so any table tests
// them).
func testLUTs(t testing.TB, spec transforms.Spec, r *rand.Rand) *lutSet {
	l, err := newLUTSet(spec.MustCompile())
	if err != nil {
		t.Fatal(err)
	}
	if l.words == nil {
		return l
	}
	for c := 1; c <= 4; c++ {
		if l.errs[c] == nil {
			continue
		}
		l.errs[c] = nil
		for i := lutOffset(c); i < lutOffset(c)+256*c; i++ {
			l.words[i] = r.Uint32()
		}
	}
	return l
}

type harnessCase struct {
	w, h, c int
	spec    transforms.Spec
}

func (hc harnessCase) String() string {
	s := hc.spec
	return fmt.Sprintf("%dx%dx%d/%s/r%d_s%dx%d/crop%dx%d/%s/%s", hc.w, hc.h, hc.c, s.Filter, s.Resize, s.Width, s.Height, s.CropW, s.CropH, s.Layout, s.DType)
}

// TestHarnessMatchesCPU runs the kernels' bodies on the CPU over random images, every
// filter, downscale and upscale, odd sizes, crop and pad, both layouts and all dtypes, in
// mixed batches, and compares every record byte for byte with the CPU reference.
func TestHarnessMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	type geom struct {
		resize, sw, sh, cw, ch int
	}
	geoms := []geom{
		{resize: 16},                     // shorter side down/up
		{resize: 7, cw: 5, ch: 5},        // crop
		{resize: 9, cw: 12, ch: 4},       // pad one axis, crop the other
		{sw: 13, sh: 5},                  // exact size
		{sw: 40, sh: 33, cw: 41, ch: 30}, // upscale, pad + crop
		{cw: 3, ch: 3},                   // crop only
		{sw: 1, sh: 1},                   // to a single pixel
		{resize: 23, cw: 31, ch: 31},     // pad both axes
		{sw: 17, sh: 17},                 // identity for 17x17 images
	}
	sizes := [][2]int{{1, 1}, {2, 3}, {17, 17}, {31, 9}, {64, 48}, {7, 100}, {101, 37}}
	layouts := []transforms.Layout{transforms.HWC, transforms.CHW}
	imagenet := [2][]float64{{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}}
	dtypes := []struct {
		dtype     transforms.DType
		mean, std []float64
	}{{transforms.Uint8, nil, nil}, {transforms.Float16, imagenet[0], imagenet[1]}, {transforms.Float32, nil, nil}, {transforms.Float32, []float64{0.5}, []float64{0.25}}}
	n := 0
	for _, f := range allFilters {
		for _, g := range geoms {
			for _, layout := range layouts {
				for _, dt := range dtypes {
					spec := transforms.Spec{Resize: g.resize, Width: g.sw, Height: g.sh, CropW: g.cw, CropH: g.ch,
						Filter: f, Layout: layout, DType: dt.dtype, Mean: dt.mean, Std: dt.std}
					luts := testLUTs(t, spec, r)
					// One batch with every size and channel count.
					var imgs []transforms.Image
					for _, sz := range sizes {
						for _, c := range []int{1, 3} {
							imgs = append(imgs, randomImage(r, sz[0], sz[1], c))
						}
					}
					imgs = append(imgs, randomImage(r, 9, 5, 2), randomImage(r, 5, 9, 4))
					got := hostRun(t, spec, imgs, luts)
					for i, im := range imgs {
						want, _ := reference(t, spec, im, luts)
						if !bytes.Equal(got.outs[i], want) {
							hc := harnessCase{im.W, im.H, im.C, spec}
							t.Fatalf("%v: harness differs from CPU reference at byte %d of %d", hc, firstDiff(got.outs[i], want), len(want))
						}
						n++
					}
				}
			}
		}
	}
	t.Logf("%d records identical", n)
}

// TestHarnessPasses checks each pass on its own against transforms.Weights.Apply, the
// reference form of the per-sample formula: the horizontal pass's 8-bit intermediate row by
// row, then the vertical pass column by column on that intermediate.
func TestHarnessPasses(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, f := range allFilters {
		for _, sz := range [][4]int{{37, 23, 11, 50}, {200, 120, 64, 33}, {5, 5, 80, 3}, {64, 64, 64, 17}} {
			im := randomImage(r, sz[0], sz[1], 3)
			spec := transforms.Spec{Width: sz[2], Height: sz[3], Filter: f}
			luts := testLUTs(t, spec, r)
			res := hostRun(t, spec, []transforms.Image{im}, luts)
			wx := transforms.ComputeWeights(im.W, sz[2], f)
			wy := transforms.ComputeWeights(im.H, sz[3], f)
			job := res.plan.jobs[:jobWords]
			ry0, ry1 := int(job[jRY0]), int(job[jRY1])
			kw := sz[2] * 3
			row := make([]byte, kw)
			for y := ry0; y < ry1; y++ {
				for c := 0; c < 3; c++ {
					wx.Apply(row[c:], im.Pix[y*im.W*3+c:], 3)
				}
				if got := res.mid[(y-ry0)*kw : (y-ry0+1)*kw]; !bytes.Equal(got, row) {
					t.Fatalf("%s %v: horizontal pass differs from Weights.Apply at source row %d", f, sz, y)
				}
			}
			// Vertical: column x, channel c of the intermediate (rows ry0..ry1, padded to the
			// full height with what Weights.Apply never reads).
			colIn := make([]byte, im.H)
			colOut := make([]byte, sz[3])
			for x := 0; x < kw; x++ {
				for y := ry0; y < ry1; y++ {
					colIn[y] = res.mid[(y-ry0)*kw+x]
				}
				wy.Apply(colOut, colIn, 1)
				for y := 0; y < sz[3]; y++ {
					if got := res.outs[0][y*kw+x]; got != colOut[y] {
						t.Fatalf("%s %v: vertical pass differs from Weights.Apply at (%d, %d)", f, sz, x, y)
					}
				}
			}
		}
	}
}

type wallCase struct {
	im   transforms.Image
	spec transforms.Spec
}

// TestHarnessWallpapers compares the harness with the CPU reference on real photographs:
// a whole 4K wallpaper through Resize(256) + CenterCrop(224), and a 1000×600 region of it
// (a 1080p-class photo) and a small region upscaled past its crop (padded) through every
// filter, both layouts and the float dtypes.
func TestHarnessWallpapers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	n := 2
	filters := allFilters
	if testing.Short() {
		n, filters = 1, []transforms.Filter{transforms.Bilinear}
	}
	paths := wallpapers(n)
	if len(paths) == 0 {
		t.Skip("no wallpapers in /usr/share/backgrounds (apt-get install ukui-wallpapers)")
	}
	for _, path := range paths {
		full := loadWallpaper(t, path)
		cases := []wallCase{
			{full, transforms.Spec{Resize: 256, CropW: 224, CropH: 224, Filter: transforms.Bilinear}},
		}
		region := crop(full, full.W/2-500, full.H/2-300, 1000, 600)
		small := crop(full, 2000, 1000, 37, 29)
		for _, f := range filters {
			for _, spec := range []transforms.Spec{
				{Resize: 256, CropW: 224, CropH: 224, Filter: f, Layout: transforms.HWC},
				{Resize: 256, CropW: 224, CropH: 224, Filter: f, Layout: transforms.CHW, DType: transforms.Float32,
					Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225}},
			} {
				cases = append(cases, wallCase{region, spec})
			}
			cases = append(cases, wallCase{small, transforms.Spec{Width: 60, Height: 45, CropW: 64, CropH: 40, Filter: f, Layout: transforms.HWC, DType: transforms.Float16}})
		}
		for _, c := range cases {
			luts := testLUTs(t, c.spec, r)
			got := hostRun(t, c.spec, []transforms.Image{c.im}, luts)
			want, worker := reference(t, c.spec, c.im, luts)
			if !bytes.Equal(got.outs[0], want) {
				t.Fatalf("%s %dx%d, %+v: harness differs from the CPU reference (worker=%v) at byte %d",
					filepath.Base(path), c.im.W, c.im.H, c.spec, worker, firstDiff(got.outs[0], want))
			}
		}
	}
}

// TestWorkerReference says which CPU reference the harness tests compared with, so a run's
// log shows whether transforms.Worker.Apply already covers resize, crop and float dtypes.
func TestWorkerReference(t *testing.T) {
	for _, spec := range []transforms.Spec{
		{Layout: transforms.CHW},
		{Resize: 256, CropW: 224, CropH: 224},
		{DType: transforms.Float32, Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225}},
	} {
		if _, err := spec.Compile(); err != nil {
			t.Logf("%+v: compared with transforms.Resize + crop + table (Worker.Apply does not accept it yet: %v)", spec, err)
		} else {
			t.Logf("%+v: compared with transforms.Worker.Apply", spec)
		}
	}
}

// TestJobLayout checks the Go job-table indices against resize_body.h's.
func TestJobLayout(t *testing.T) {
	want := []int{jC, jSrcW, jSrcOff, jXB, jXC, jXK, jYB, jYC, jYK, jX0, jX1, jY0, jY1, jRY0, jRY1, jMidOff,
		jOutW, jOutH, jOffX, jOffY, jDstOff, jHWork, jVWork, jLUTOff, jSrcX0, jobWords,
		transforms.PrecisionBits, layoutHWC, layoutCHW}
	if got := kernels.Layout(); !slices.Equal(got, want) {
		t.Fatalf("resize_body.h constants %v, Go has %v", got, want)
	}
}

func TestPlanGeometry(t *testing.T) {
	// Expected values from torchvision 0.14.1: _compute_resized_output_size and center_crop.
	cases := []struct {
		w, h, resize, maxSize, cw, ch int
		want                          Geometry
	}{
		{640, 480, 256, 0, 224, 224, Geometry{RW: 341, RH: 256, OutW: 224, OutH: 224, OffX: 58, OffY: 16}},
		{480, 640, 256, 0, 224, 224, Geometry{RW: 256, RH: 341, OutW: 224, OutH: 224, OffX: 16, OffY: 58}},
		{3840, 2400, 256, 0, 224, 224, Geometry{RW: 409, RH: 256, OutW: 224, OutH: 224, OffX: 92, OffY: 16}},
		{3640, 2400, 256, 0, 224, 224, Geometry{RW: 388, RH: 256, OutW: 224, OutH: 224, OffX: 82, OffY: 16}},
		{17, 9, 256, 0, 224, 224, Geometry{RW: 483, RH: 256, OutW: 224, OutH: 224, OffX: 130, OffY: 16}},
		{300, 301, 255, 0, 224, 223, Geometry{RW: 255, RH: 255, OutW: 224, OutH: 223, OffX: 16, OffY: 16}},
		{1000, 10, 32, 100, 32, 32, Geometry{RW: 100, RH: 1, OutW: 32, OutH: 32, OffX: 34, OffY: -15}},
		{10, 1000, 32, 100, 40, 40, Geometry{RW: 1, RH: 100, OutW: 40, OutH: 40, OffX: -19, OffY: 30}},
		{333, 500, 224, 0, 225, 224, Geometry{RW: 224, RH: 336, OutW: 225, OutH: 224, OffX: 0, OffY: 56}},
		{101, 37, 50, 0, 60, 30, Geometry{RW: 136, RH: 50, OutW: 60, OutH: 30, OffX: 38, OffY: 10}},
		{7, 7, 7, 0, 3, 5, Geometry{RW: 7, RH: 7, OutW: 3, OutH: 5, OffX: 2, OffY: 1}},
		{2, 3, 0, 0, 4, 4, Geometry{RW: 2, RH: 3, OutW: 4, OutH: 4, OffX: -1, OffY: 0}},
	}
	for _, c := range cases {
		spec := transforms.Spec{Resize: c.resize, MaxSize: c.maxSize, CropW: c.cw, CropH: c.ch}
		got, err := PlanGeometry(spec.MustCompile(), c.w, c.h)
		if err != nil || got != c.want {
			t.Errorf("PlanGeometry(%+v, %d, %d) = %+v, %v; want %+v", spec, c.w, c.h, got, err, c.want)
		}
	}
	for _, bad := range []struct {
		spec transforms.Spec
		w, h int
	}{
		{transforms.Spec{}, 0, 5},
		{transforms.Spec{CropW: 5}, 5, 5},
		{transforms.Spec{Resize: 10, MaxSize: 10}, 5, 6},
		{transforms.Spec{Resize: 1 << 24}, 1, 1000},
	} {
		c, err := bad.spec.Compile()
		if err == nil {
			_, err = PlanGeometry(c, bad.w, bad.h)
		}
		if err == nil {
			t.Errorf("PlanGeometry(%+v, %d, %d): no error", bad.spec, bad.w, bad.h)
		}
	}
}

// TestPlanRejectsBadInput: bad images and weights give errors, never a table that would make
// the kernels read or write outside a buffer.
func TestPlanRejectsBadInput(t *testing.T) {
	spec := transforms.Spec{Resize: 8}
	luts, _ := newLUTSet(spec.MustCompile())
	for _, im := range []transforms.Image{
		{W: 0, H: 3, C: 3}, {W: 3, H: 3, C: 3, Pix: make([]byte, 26)}, {W: 3, H: 3, C: 5, Pix: make([]byte, 45)},
	} {
		if _, err := planBatch(spec.MustCompile(), []transforms.Image{im}, nil, &recordPool{}, luts); err == nil {
			t.Errorf("planBatch accepted %dx%dx%d with %d bytes", im.W, im.H, im.C, len(im.Pix))
		}
	}
	w := transforms.ComputeWeights(10, 4, transforms.Bilinear)
	bad := *w
	bad.Bounds = slices.Clone(w.Bounds)
	bad.Bounds[2] = 9 // taps past the input
	if err := checkWeights(&bad); err == nil {
		t.Error("checkWeights accepted taps outside the input")
	}
	if err := checkWeights(w); err != nil {
		t.Error(err)
	}
	full := &hostPool{limit: 4}
	if _, _, err := full.place(w); err != errPoolFull {
		t.Errorf("place into a full pool: %v", err)
	}
}

// BenchmarkHarness measures the CPU harness (the kernels' bodies run serially on one core):
// a sanity figure for the kernels' work, not a GPU measurement.
func BenchmarkHarness(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 4))
	im := randomImage(r, 1920, 1080, 3)
	for _, f := range []transforms.Filter{transforms.Bilinear, transforms.Lanczos} {
		for _, crop := range []int{224, 512} {
			b.Run(fmt.Sprintf("%s/1080p_to_%d", f, crop), func(b *testing.B) {
				spec := transforms.Spec{Resize: crop * 8 / 7, CropW: crop, CropH: crop, Filter: f}
				luts, _ := newLUTSet(spec.MustCompile())
				b.SetBytes(int64(len(im.Pix)))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					hostRun(b, spec, []transforms.Image{im}, luts)
				}
			})
		}
	}
}

// TestPaperBound logs the bytes one 1080p image moves through Resize(256) + CenterCrop(224)
// (the README's on-paper bound) and the time that takes at an H100 SXM's peak memory and
// PCIe bandwidths.
func TestPaperBound(t *testing.T) {
	im := transforms.Image{W: 1920, H: 1080, C: 3, Pix: make([]byte, 1920*1080*3)}
	for _, f := range []transforms.Filter{transforms.Bilinear, transforms.Bicubic, transforms.Lanczos} {
		spec := transforms.Spec{Resize: 256, CropW: 224, CropH: 224, Filter: f}
		luts, _ := newLUTSet(spec.MustCompile())
		plan, err := planBatch(spec.MustCompile(), []transforms.Image{im}, nil, &recordPool{}, luts)
		if err != nil {
			t.Fatal(err)
		}
		link, dram := plan.traffic()
		// Only the region under the kept pixels' support goes up, not the whole image.
		if plan.srcBytes != plan.srcRead || link != int64(plan.srcRead)+224*224*3 || plan.srcBytes >= 1920*1080*3 {
			t.Errorf("link bytes %d, staged %d, region %d", link, plan.srcBytes, plan.srcRead)
		}
		h100 := Info{MemoryClockKHz: 2619000, MemoryBusBits: 5120} // H100 SXM5 80GB, as the driver reports it
		const pcie5 = 64e9                                         // PCIe 5.0 x16, per direction, before overheads
		t.Logf("%s: source read %d B, intermediate %d B, record %d B; link %d B, device memory %d B; "+
			"at %.2f TB/s: %.2f us/image (%.0f images/s); over PCIe 5.0 x16: %.0f us/image (%.0f images/s)",
			f, plan.srcRead, plan.midBytes, plan.dstBytes, link, dram, h100.MemoryBandwidth()/1e12,
			float64(dram)/h100.MemoryBandwidth()*1e6, h100.MemoryBandwidth()/float64(dram),
			float64(link)/pcie5*1e6, pcie5/float64(link))
	}
}
