package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/packer-dev/packer/transforms"
)

// regionSpecs are transforms whose source regions touch every edge case: a crop well inside
// the image, a crop larger than the resized image (padding: the region is the whole axis),
// padding on one axis and a crop on the other, an exact resize without crop (the whole
// image), upscales, 1-pixel sources and extreme aspect ratios.
var regionSpecs = []transforms.Spec{
	{Resize: 64, CropW: 48, CropH: 48},
	{Resize: 40, CropW: 40, CropH: 40, Filter: transforms.Lanczos},
	{Resize: 32, CropW: 60, CropH: 20, Filter: transforms.Bicubic},
	{Width: 50, Height: 30, Filter: transforms.Box},
	{Resize: 90, CropW: 7, CropH: 5, Filter: transforms.Hamming},
	{Resize: 24, MaxSize: 400, CropW: 30, CropH: 30, Filter: transforms.Nearest},
}

var regionSizes = [][2]int{{1, 1}, {2, 3}, {5, 97}, {97, 5}, {61, 47}, {200, 150}, {150, 200}, {1000, 3}}

// TestPlanRegion: the region planBatch stages is exactly transforms' SourceRect (what a
// region decoder keeps), so the device reads no more and no less than the CPU path needs;
// a window covering it plans, one that misses a row or column of it is refused.
func TestPlanRegion(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	for _, spec := range regionSpecs {
		luts, err := newLUTSet(spec.MustCompile())
		if err != nil {
			t.Fatal(err)
		}
		for _, sz := range regionSizes {
			im := randomImage(r, sz[0], sz[1], 3)
			p, err := planBatch(spec.MustCompile(), []transforms.Image{im}, nil, &recordPool{}, luts)
			if err != nil {
				t.Fatalf("%+v %v: %v", spec, sz, err)
			}
			tp, err := spec.MustCompile().Plan(sz[0], sz[1])
			if err != nil {
				t.Fatal(err)
			}
			x0, y0, x1, y1 := tp.SourceRect()
			want := region{x: x0, y: y0, w: x1 - x0, h: y1 - y0}
			if x1 <= x0 || y1 <= y0 {
				want = region{}
			}
			if got := p.regions[0]; got != want {
				t.Errorf("%+v %v: staged region %+v, SourceRect %+v", spec, sz, got, want)
			}
			if p.srcBytes != want.w*want.h*3 {
				t.Errorf("%+v %v: staged %d bytes for a %dx%d region", spec, sz, p.srcBytes, want.w, want.h)
			}
			if want.w == 0 {
				continue
			}
			win := crop(im, want.x, want.y, want.w, want.h)
			w := Window{X: want.x, Y: want.y, FullW: sz[0], FullH: sz[1]}
			if _, err := planBatch(spec.MustCompile(), []transforms.Image{win}, []Window{w}, &recordPool{}, luts); err != nil {
				t.Errorf("%+v %v: window on the region: %v", spec, sz, err)
			}
			if want.w > 1 {
				short := crop(im, want.x+1, want.y, want.w-1, want.h)
				sw := Window{X: want.x + 1, Y: want.y, FullW: sz[0], FullH: sz[1]}
				if _, err := planBatch(spec.MustCompile(), []transforms.Image{short}, []Window{sw}, &recordPool{}, luts); err == nil ||
					!strings.Contains(err.Error(), "does not cover") {
					t.Errorf("%+v %v: a window missing a column: %v", spec, sz, err)
				}
			}
		}
	}
	luts, _ := newLUTSet(regionSpecs[0].MustCompile())
	im := randomImage(r, 10, 10, 3)
	for _, w := range []Window{{X: -1, FullW: 10, FullH: 10}, {X: 1, FullW: 10, FullH: 10}, {FullW: 9, FullH: 10}} {
		if _, err := planBatch(regionSpecs[0].MustCompile(), []transforms.Image{im}, []Window{w}, &recordPool{}, luts); err == nil {
			t.Errorf("window %+v outside its image: no error", w)
		}
	}
}

// TestResizerChunks: device batches are filled by staged bytes (the regions, not whole
// images) up to MaxBatchBytes, so many small images share a batch and a huge one gets its
// own; no batch passes the budget unless it is a single image.
func TestResizerChunks(t *testing.T) {
	spec := transforms.Spec{Resize: 256, CropW: 224, CropH: 224}
	r := &Resizer{spec: spec.MustCompile(), opts: ResizerOptions{MaxBatchBytes: 4 << 20}.withDefaults()}
	var imgs []transforms.Image
	add := func(n, w, h int) {
		for range n {
			imgs = append(imgs, transforms.Image{W: w, H: h, C: 3, Pix: make([]byte, w*h*3)})
		}
	}
	add(300, 64, 48)   // small: about 9 KiB each
	add(2, 4000, 3000) // huge: a 2816x3000 region, 25 MiB, each alone
	add(200, 320, 240) // medium
	add(1, 1920, 1080) // whole image 6 MiB, region 2.6 MiB
	add(100, 64, 48)
	ends, _, err := r.chunks(imgs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := r.spec.ResampleFilter()
	start, whole, staged := 0, 0, 0
	for _, end := range ends {
		sum := 0
		for _, im := range imgs[start:end] {
			ip, err := planImage(r.spec, f, im, Window{})
			if err != nil {
				t.Fatal(err)
			}
			sum += ip.stagedBytes(3)
			whole += im.W * im.H * 3
		}
		staged += sum
		if sum > r.opts.MaxBatchBytes && end-start > 1 {
			t.Errorf("batch [%d,%d) stages %d bytes, budget %d", start, end, sum, r.opts.MaxBatchBytes)
		}
		start = end
	}
	if start != len(imgs) {
		t.Fatalf("chunks end at %d of %d", start, len(imgs))
	}
	// 603 images: the 300 small ones and the 2 huge ones alone take at least 3 batches; the
	// budget, not an image count, closes them, so there are few.
	if len(ends) < 4 || len(ends) > 12 {
		t.Errorf("%d device batches for %d images: %v", len(ends), len(imgs), ends)
	}
	if ends[0] < 300 {
		t.Errorf("the first batch holds %d of the 300 small images", ends[0])
	}
	t.Logf("%d images in %d device batches; %d bytes staged of %d decoded", len(imgs), len(ends), staged, whole)
	r.opts.MaxBatchBytes = 1
	if ends, _, _ := r.chunks(imgs[:5], nil, nil); len(ends) != 5 {
		t.Errorf("a budget below every image: %d batches for 5 images", len(ends))
	}
}

// testRegionEdges: records of images whose staged region touches the image's edges, and of
// windows (region-decoded images with their offsets, RunWindows), equal the CPU path's
// (Worker.Apply on the whole image, which ApplyWindow matches).
func testRegionEdges(t *testing.T, d *Device) {
	r := rand.New(rand.NewPCG(12, 12))
	for _, spec := range regionSpecs {
		rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 3, MaxBatchBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		var imgs, wimgs []transforms.Image
		var wins []Window
		var want [][]byte
		for _, sz := range regionSizes {
			for _, c := range []int{1, 3, 4} {
				im := randomImage(r, sz[0], sz[1], c)
				n, err := rs.OutputSize(im.W, im.H, im.C)
				if err != nil {
					t.Fatal(err)
				}
				w := make([]byte, n)
				if err := spec.MustCompile().NewWorker().Apply(im, w); err != nil {
					t.Fatal(err)
				}
				// The window: the region transforms asks a decoder for, with a margin where
				// the image has room, at its offset.
				reg := spec.MustCompile().Region(im.W, im.H)
				x0, y0 := max(reg.Min.X-r.IntN(3), 0), max(reg.Min.Y-r.IntN(3), 0)
				x1, y1 := min(reg.Max.X+r.IntN(3), im.W), min(reg.Max.Y+r.IntN(3), im.H)
				if reg.Empty() {
					x0, y0, x1, y1 = 0, 0, im.W, im.H
				}
				imgs, want = append(imgs, im), append(want, w)
				wimgs = append(wimgs, crop(im, x0, y0, x1-x0, y1-y0))
				wins = append(wins, Window{X: x0, Y: y0, FullW: im.W, FullH: im.H})
			}
		}
		for _, windows := range []bool{false, true} {
			got := make([][]byte, len(want))
			for i := range got {
				got[i] = make([]byte, len(want[i]))
			}
			if windows {
				err = rs.RunWindows(wimgs, wins, got)
			} else {
				err = rs.Run(imgs, got)
			}
			if err != nil {
				t.Fatalf("%+v windows=%v: %v", spec, windows, err)
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("%+v windows=%v: image %d (%dx%dx%d, window %+v) differs from the CPU at byte %d",
						spec, windows, i, imgs[i].W, imgs[i].H, imgs[i].C, wins[i], firstDiff(got[i], want[i]))
				}
			}
		}
		// A window that misses part of the region is refused, not resized from garbage.
		if reg := spec.MustCompile().Region(200, 150); reg.Dx() > 1 {
			im := randomImage(r, 200, 150, 3)
			n, _ := rs.OutputSize(200, 150, 3)
			short := crop(im, reg.Min.X+1, reg.Min.Y, reg.Dx()-1, reg.Dy())
			err := rs.RunWindows([]transforms.Image{short}, []Window{{X: reg.Min.X + 1, Y: reg.Min.Y, FullW: 200, FullH: 150}}, [][]byte{make([]byte, n)})
			if err == nil || !strings.Contains(err.Error(), "does not cover") {
				t.Errorf("%+v: a window short of the region: %v", spec, err)
			}
		}
		if err := rs.RunWindows(imgs[:1], nil, want[:1]); err == nil {
			t.Errorf("RunWindows without windows: no error")
		}
		if err := rs.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// testByteBudget: many small and a few huge images, batched by a small byte budget over
// three slots, give the CPU's bytes.
func testByteBudget(t *testing.T, d *Device) {
	r := rand.New(rand.NewPCG(13, 13))
	spec := transforms.Spec{Resize: 48, CropW: 40, CropH: 40, Filter: transforms.Bicubic}
	rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 3, MaxBatchBytes: 96 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var imgs []transforms.Image
	for i := 0; i < 120; i++ {
		imgs = append(imgs, randomImage(r, 8+r.IntN(60), 8+r.IntN(60), 3))
		if i%50 == 25 {
			imgs = append(imgs, randomImage(r, 900+r.IntN(200), 700+r.IntN(200), 3))
		}
	}
	want := make([][]byte, len(imgs))
	got := make([][]byte, len(imgs))
	for i, im := range imgs {
		want[i] = make([]byte, 40*40*3)
		if err := spec.MustCompile().NewWorker().Apply(im, want[i]); err != nil {
			t.Fatal(err)
		}
		got[i] = make([]byte, len(want[i]))
	}
	ends, _, err := rs.chunks(imgs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Run(imgs, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("image %d (%dx%d): differs from the CPU at byte %d", i, imgs[i].W, imgs[i].H, firstDiff(got[i], want[i]))
		}
	}
	t.Logf("%d images in %d device batches", len(imgs), len(ends))
}

// TestFakeDriverInFlight: with Streams 4, more than two device batches are queued on the
// fake's streams at once (each stream runs on its own thread), and the records are right.
func TestFakeDriverInFlight(t *testing.T) {
	d := openFakeDevice(t)
	k, err := fakeControl()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(14, 14))
	spec := transforms.Spec{Resize: 24, CropW: 20, CropH: 20}
	rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 4, MaxBatchBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var imgs []transforms.Image
	var want, got [][]byte
	for range 96 {
		im := randomImage(r, 40+r.IntN(20), 40+r.IntN(20), 3)
		w := make([]byte, 20*20*3)
		if err := spec.MustCompile().NewWorker().Apply(im, w); err != nil {
			t.Fatal(err)
		}
		imgs, want, got = append(imgs, im), append(want, w), append(got, make([]byte, len(w)))
	}
	k.maxBusy()
	scribbled := k.scribbled()
	if err := rs.Run(imgs, got); err != nil {
		t.Fatal(err)
	}
	busy := k.maxBusy()
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("image %d differs from the CPU at byte %d", i, firstDiff(got[i], want[i]))
		}
	}
	if busy < 3 {
		t.Errorf("at most %d streams had work queued at once, want at least 3 of 4", busy)
	}
	// The fake scribbled over the batches' staging after each wait, and the bytes are right:
	// no batch relies on what an earlier one left in staging or device buffers.
	if k.scribbled() == scribbled {
		t.Error("the fake scribbled over no staging: the uploads are not from write-combined staging")
	}
	t.Logf("%d streams busy at once", busy)
}

// TestFakeDriverMidBatchFailures: with several device batches in flight on several slots, a
// call failing in one of them (not the first) fails Run with that call, Run returns only when
// nothing it enqueued is still queued, and the Resizer then gives the CPU's bytes again.
func TestFakeDriverMidBatchFailures(t *testing.T) {
	d := openFakeDevice(t)
	k, err := fakeControl()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(15, 15))
	spec := transforms.Spec{Resize: 24, CropW: 20, CropH: 20, Filter: transforms.Lanczos}
	rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 3, MaxBatchBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var imgs []transforms.Image
	var want [][]byte
	for range 40 {
		im := randomImage(r, 30+r.IntN(30), 30+r.IntN(30), 3)
		w := make([]byte, 20*20*3)
		if err := spec.MustCompile().NewWorker().Apply(im, w); err != nil {
			t.Fatal(err)
		}
		imgs, want = append(imgs, im), append(want, w)
	}
	fresh := func() [][]byte {
		got := make([][]byte, len(want))
		for i := range got {
			got[i] = make([]byte, len(want[i]))
		}
		return got
	}
	for _, c := range []struct {
		call string
		nth  int32
	}{
		{"cuMemcpyHtoDAsync_v2", 7}, {"cuLaunchKernel", 6}, {"cuLaunchKernel", 9},
		{"cuMemcpyDtoHAsync_v2", 4}, {"cuEventRecord", 3}, {"cuEventQuery", 5},
	} {
		k.fail(c.call, c.nth, 719)
		err := rs.Run(imgs, fresh())
		k.fail("", 0, 0)
		var ce *Error
		if !errors.As(err, &ce) || ce.Call != c.call || ce.Code != 719 {
			t.Errorf("%s #%d failing: Run returned %v", c.call, c.nth, err)
		}
		if n := k.queued(); n != 0 {
			t.Errorf("%s #%d failing: Run returned with %d operations still queued", c.call, c.nth, n)
		}
		got := fresh()
		if err := rs.Run(imgs, got); err != nil {
			t.Fatalf("after %s #%d failed: %v", c.call, c.nth, err)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("after %s #%d failed: image %d differs from the CPU", c.call, c.nth, i)
			}
		}
	}
}

// TestFakeDriverScribbles: the fake really scribbles over an upload's write-combined source
// and device destination after the wait, and over a copy back's device source, so that a
// program relying on them afterwards reads garbage; pinned memory that is not write-combined
// (a reader's batch) keeps its bytes, as on a GPU.
func TestFakeDriverScribbles(t *testing.T) {
	d := openFakeDevice(t)
	const n = 4096
	var wc, plain, back []byte
	var buf, buf2 DevicePtr
	var s Stream
	var ev Event
	err := d.Do(func() error {
		var err error
		if wc, err = d.hostAlloc(n, HostAllocPortable|HostAllocWriteCombined); err != nil {
			return err
		}
		if plain, err = d.HostAlloc(n); err != nil {
			return err
		}
		if back, err = d.HostAlloc(n); err != nil {
			return err
		}
		if buf, err = d.MemAlloc(n); err != nil {
			return err
		}
		if buf2, err = d.MemAlloc(n); err != nil {
			return err
		}
		if s, err = d.NewStream(); err != nil {
			return err
		}
		ev, err = d.NewEvent()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Do(func() error {
		return errors.Join(d.FreeHost(wc), d.FreeHost(plain), d.FreeHost(back), d.MemFree(buf), d.MemFree(buf2),
			d.DestroyEvent(ev), d.DestroyStream(s))
	})
	run := func(f func() error) {
		t.Helper()
		if err := d.Do(func() error {
			if err := f(); err != nil {
				return err
			}
			return d.RecordEvent(ev, s)
		}); err != nil {
			t.Fatal(err)
		}
		if err := d.Wait(ev); err != nil {
			t.Fatal(err)
		}
	}
	for i := range wc {
		wc[i], plain[i] = byte(i), byte(i)
	}
	run(func() error {
		return errors.Join(d.CopyHtoDAsync(buf, wc, s), d.CopyHtoDAsync(buf2, plain, s))
	})
	if !bytes.Equal(wc, bytes.Repeat([]byte{0xD9}, n)) {
		t.Error("the write-combined upload source kept its bytes after the wait")
	}
	if plain[7] != 7 || plain[n-1] != byte((n-1)%256) {
		t.Error("a plain pinned upload source was changed")
	}
	run(func() error { return d.CopyDtoHAsync(back, buf, s) })
	if !bytes.Equal(back, bytes.Repeat([]byte{0xD9}, n)) {
		t.Errorf("the device destination of a staged upload kept its bytes after the wait: % x", back[:8])
	}
	run(func() error { return d.CopyDtoHAsync(back, buf2, s) })
	if back[7] != 7 {
		t.Errorf("the copy back did not bring the plain upload's bytes: % x", back[:8])
	}
	run(func() error { return d.CopyDtoHAsync(back, buf2, s) })
	if back[7] != 0xD9 {
		t.Errorf("a copy back's device source kept its bytes after the wait: % x", back[:8])
	}
}

// TestFakeDriverCoalesces: small Run calls made at once by many goroutines (the pipeline's
// workers) are merged into fewer device batches while the slots are busy, windowed and whole
// images together, and every caller gets the CPU's bytes.
func TestFakeDriverCoalesces(t *testing.T) {
	d := openFakeDevice(t)
	k, err := fakeControl()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(16, 16))
	spec := transforms.Spec{Resize: 24, CropW: 20, CropH: 20, Filter: transforms.Hamming}
	rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	const callers = 24
	type call struct {
		imgs, full []transforms.Image
		wins       []Window
		want       [][]byte
	}
	calls := make([]call, callers)
	for c := range calls {
		for range 2 {
			im := randomImage(r, 30+r.IntN(40), 30+r.IntN(40), 3)
			w := make([]byte, 20*20*3)
			if err := spec.MustCompile().NewWorker().Apply(im, w); err != nil {
				t.Fatal(err)
			}
			calls[c].want = append(calls[c].want, w)
			calls[c].full = append(calls[c].full, im)
			if c%2 == 1 { // odd callers send region-decoded windows
				reg := spec.MustCompile().Region(im.W, im.H)
				calls[c].imgs = append(calls[c].imgs, crop(im, reg.Min.X, reg.Min.Y, reg.Dx(), reg.Dy()))
				calls[c].wins = append(calls[c].wins, Window{X: reg.Min.X, Y: reg.Min.Y, FullW: im.W, FullH: im.H})
			} else {
				calls[c].imgs = append(calls[c].imgs, im)
			}
		}
	}
	launches := k.calls("cuLaunchKernel")
	errs := make(chan error, callers)
	start := make(chan struct{})
	for c := range calls {
		go func() {
			<-start
			cl := calls[c]
			got := [][]byte{make([]byte, 20*20*3), make([]byte, 20*20*3)}
			var err error
			if cl.wins != nil {
				err = rs.RunWindows(cl.imgs, cl.wins, got)
			} else {
				err = rs.Run(cl.imgs, got)
			}
			for i := range got {
				if err == nil && !bytes.Equal(got[i], cl.want[i]) {
					err = fmt.Errorf("caller %d image %d differs from the CPU at byte %d", c, i, firstDiff(got[i], cl.want[i]))
				}
			}
			errs <- err
		}()
	}
	close(start)
	for range callers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	batches := (k.calls("cuLaunchKernel") - launches) / 2
	if batches >= callers {
		t.Errorf("%d device batches for %d calls: nothing was merged", batches, callers)
	}
	t.Logf("%d calls ran as %d device batches", callers, batches)
	// A caller's bad destination fails that caller alone, before anything is queued.
	if err := rs.Run(calls[0].imgs, [][]byte{make([]byte, 5), make([]byte, 20*20*3)}); err == nil ||
		!strings.Contains(err.Error(), "destination 0") {
		t.Errorf("bad destination: %v", err)
	}
}
