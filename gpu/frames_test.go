package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"github.com/packer-dev/packer/transforms"
)

// frameCase is one image for the frame tests: what a decoder produced (the whole image, or a
// window of it with its place), and the CPU's record.
type frameCase struct {
	im   transforms.Image
	win  Window
	want []byte
}

// frameCases makes n images of varied sizes and channels, every third a window of its image
// with a margin of 0 to 2 pixels around the region the transform reads.
func frameCases(t *testing.T, r *rand.Rand, spec transforms.Spec, n int) []frameCase {
	t.Helper()
	var cs []frameCase
	for i := range n {
		c := 1 + i%4 // 1 to 4 channels
		full := randomImage(r, 20+r.IntN(50), 20+r.IntN(50), c)
		_, esize, err := conversion(spec.MustCompile())
		if err != nil {
			t.Fatal(err)
		}
		g, err := PlanGeometry(spec.MustCompile(), full.W, full.H)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, g.OutW*g.OutH*c*int(esize))
		if err := spec.MustCompile().NewWorker().Apply(full, want); err != nil {
			t.Fatal(err)
		}
		fc := frameCase{im: full, want: want}
		if reg := spec.MustCompile().Region(full.W, full.H); i%3 == 2 && !reg.Empty() {
			m := i % 3
			x0, y0 := max(reg.Min.X-m, 0), max(reg.Min.Y-m, 0)
			x1, y1 := min(reg.Max.X+m, full.W), min(reg.Max.Y+m, full.H)
			fc.im = crop(full, x0, y0, x1-x0, y1-y0)
			fc.win = Window{X: x0, Y: y0, FullW: full.W, FullH: full.H}
		}
		cs = append(cs, fc)
	}
	return cs
}

// runFrames copies each case into a Frame of rs (all of them when every is 1, every other
// when 2), as the pipeline's batch worker does, runs them in one call, checks the records
// against the CPU and releases the frames. It returns how many were pinned frames, and their
// bytes.
func runFrames(t *testing.T, rs *Resizer, k *fakeHooks, cs []frameCase, every int) (pinned, pinnedBytes int, err error) {
	imgs := make([]transforms.Image, len(cs))
	wins := make([]Window, len(cs))
	dsts := make([][]byte, len(cs))
	var releases []func()
	defer func() {
		for _, rel := range releases {
			rel()
		}
	}()
	for i, c := range cs {
		imgs[i], wins[i], dsts[i] = c.im, c.win, make([]byte, len(c.want))
		if i%every != 0 {
			continue
		}
		pix, rel := rs.Frame(len(c.im.Pix))
		releases = append(releases, rel)
		copy(pix, c.im.Pix)
		imgs[i].Pix = pix
		if k.writeCombined(unsafe.SliceData(pix), uintptr(len(pix))) == 1 {
			pinned++
			pinnedBytes += len(pix)
		}
	}
	if err := rs.RunWindows(imgs, wins, dsts); err != nil {
		return pinned, pinnedBytes, err
	}
	for i := range dsts {
		if !bytes.Equal(dsts[i], cs[i].want) {
			return pinned, pinnedBytes, fmt.Errorf("image %d (%dx%dx%d, window %+v) differs from the CPU at byte %d",
				i, cs[i].im.W, cs[i].im.H, cs[i].im.C, cs[i].win, firstDiff(dsts[i], cs[i].want))
		}
	}
	return pinned, pinnedBytes, nil
}

// TestFakeDriverFrames: frames from Resizer.Frame are write-combined pinned memory (the fake
// tells), and Run uploads them with no host copy (nothing is staged: the slots' staging is
// never even allocated), byte-identical to the CPU, whole images and windows, every dtype;
// images that are not frames are staged as before, in the same calls.
func TestFakeDriverFrames(t *testing.T) {
	d := openFakeDevice(t)
	k, err := fakeControl()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(21, 21))
	for _, spec := range []transforms.Spec{
		{Resize: 24, CropW: 20, CropH: 20},
		{Resize: 30, CropW: 36, CropH: 12, Filter: transforms.Lanczos, DType: transforms.Float16, Layout: transforms.CHW},
		{Width: 17, Height: 41, Filter: transforms.Bicubic, DType: transforms.Float32, Mean: []float64{0.5}, Std: []float64{0.25}},
	} {
		t.Run(fmt.Sprintf("%s/%s/%dx%d", spec.Filter, spec.DType, spec.CropW, spec.CropH), func(t *testing.T) {
			rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 2, MaxBatchBytes: 16 << 10, FrameBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			cs := frameCases(t, r, spec, 30)
			staged := hostStaged.Load()
			pinned, _, err := runFrames(t, rs, k, cs, 1)
			if err != nil {
				t.Fatal(err)
			}
			if pinned != len(cs) {
				t.Errorf("%d of %d frames in write-combined pinned memory", pinned, len(cs))
			}
			if n := hostStaged.Load() - staged; n != 0 {
				t.Errorf("%d frames were copied again into staging", n)
			}
			for i, s := range rs.all {
				if s.hSrc != nil {
					t.Errorf("slot %d allocated %d bytes of upload staging for frames", i, len(s.hSrc))
				}
			}
			// Half frames, half Go memory: only the latter are staged.
			staged = hostStaged.Load()
			if _, _, err := runFrames(t, rs, k, cs, 2); err != nil {
				t.Fatal(err)
			}
			if n := hostStaged.Load() - staged; n != int64(len(cs)/2) {
				t.Errorf("%d images staged, want the %d that are not frames", n, len(cs)/2)
			}
			if total, used, lost := rs.frames.stats(); used != 0 || lost != 0 || total > rs.opts.FrameBytes {
				t.Errorf("frame pool: %d bytes, %d in use, %d lost after every frame was released", total, used, lost)
			}
		})
	}
}

// TestFakeDriverFramesInFlight: workers that stage frames, run them and release them at
// once, concurrently, with the asynchronous fake (a stream's copy reads its source when it
// runs) and a pool small enough that frames are reused all the time and poisoned as they go
// back: a frame reused while a batch could still read it would change the records.
func TestFakeDriverFramesInFlight(t *testing.T) {
	d := openFakeDevice(t)
	k, err := fakeControl()
	if err != nil {
		t.Fatal(err)
	}
	spec := transforms.Spec{Resize: 24, CropW: 20, CropH: 20, Filter: transforms.Hamming}
	const budget = 96 << 10
	rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 3, MaxBatchBytes: 12 << 10, FrameBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rs.frames.poison = true
	const workers, rounds = 4, 12
	r := rand.New(rand.NewPCG(22, 22))
	cases := make([][]frameCase, workers)
	for w := range cases {
		cases[w] = frameCases(t, r, spec, 6)
	}
	var mu sync.Mutex
	np, nt, nbytes := 0, 0, 0 // frames pinned, frames, bytes of pinned frames
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for range rounds {
				p, pb, err := runFrames(t, rs, k, cases[w], 1)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				mu.Lock()
				np, nt, nbytes = np+p, nt+len(cases[w]), nbytes+pb
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	size, used, lost := rs.frames.stats()
	if size > budget || used != 0 || lost != 0 {
		t.Errorf("frame pool: %d bytes (budget %d), %d in use, %d lost", size, budget, used, lost)
	}
	// Most frames were pinned, many times the pool's bytes: frames were reused all along.
	if np < nt/2 || nbytes < 4*size {
		t.Errorf("%d of %d frames pinned, %d bytes, with a %d-byte pool", np, nt, nbytes, size)
	}
	t.Logf("%d of %d frames pinned, pool %d bytes", np, nt, size)
}

// TestFakeDriverFramesReleasedInFlight: frames released while their batches are enqueued
// and not yet run (the fake runs each stream's work later, on its own thread) are not reused
// until the batches are done: new frames taken meanwhile and filled with garbage, and the
// poison of recycling, would otherwise reach the uploads.
func TestFakeDriverFramesReleasedInFlight(t *testing.T) {
	d := openFakeDevice(t)
	spec := transforms.Spec{Resize: 24, CropW: 20, CropH: 20}
	rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 2, MaxBatchBytes: 8 << 10, FrameBytes: 512 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rs.frames.poison = true
	cs := frameCases(t, rand.New(rand.NewPCG(24, 24)), spec, 24)
	for round := range 4 {
		imgs := make([]transforms.Image, len(cs))
		wins := make([]Window, len(cs))
		dsts := make([][]byte, len(cs))
		releases := make(map[*byte]func(), len(cs))
		for i, c := range cs {
			pix, rel := rs.Frame(len(c.im.Pix))
			copy(pix, c.im.Pix)
			imgs[i], wins[i], dsts[i] = c.im, c.win, make([]byte, len(c.want))
			imgs[i].Pix = pix
			releases[unsafe.SliceData(pix)] = rel
		}
		var mu sync.Mutex
		var others []func()
		rs.enqueued = func(batch []transforms.Image) {
			mu.Lock()
			defer mu.Unlock()
			for _, im := range batch { // the batch's own frames: the others are not held yet
				releases[unsafe.SliceData(im.Pix)]()
			}
			for _, im := range batch { // another worker's frames, filled meanwhile
				pix, rel := rs.Frame(len(im.Pix))
				for i := range pix {
					pix[i] = 0x3C
				}
				others = append(others, rel)
			}
		}
		err := rs.RunWindows(imgs, wins, dsts)
		rs.enqueued = nil
		if err != nil {
			t.Fatal(err)
		}
		for i := range dsts {
			if !bytes.Equal(dsts[i], cs[i].want) {
				t.Fatalf("round %d: image %d differs from the CPU at byte %d", round, i, firstDiff(dsts[i], cs[i].want))
			}
		}
		for _, rel := range others {
			rel()
		}
		if _, used, lost := rs.frames.stats(); used != 0 || lost != 0 {
			t.Fatalf("round %d: %d frame bytes in use, %d lost", round, used, lost)
		}
	}
}

// TestFakeDriverFrameRecycling: a frame released while a batch holds it goes back to the pool only
// when the batch ends; one that a batch read on a stream that could not be waited for never
// does; a frame released twice is released once; past the budget, Frame gives Go memory.
func TestFakeDriverFrameRecycling(t *testing.T) {
	d := openFakeDevice(t)
	k, err := fakeControl()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := NewResizer(d, transforms.Spec{Resize: 8}.MustCompile(), ResizerOptions{Streams: 1, FrameBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	const n = 1000
	pix, rel := rs.Frame(n)
	im := []transforms.Image{{W: 10, H: 10, C: 10, Pix: pix}}
	held, any := rs.frames.hold(im)
	if !any {
		t.Fatal("a frame is not recognised as one")
	}
	rel()
	rel() // twice: once
	if _, used, _ := rs.frames.stats(); used == 0 {
		t.Fatal("a frame held by a batch went back to the pool on release")
	}
	again, rel2 := rs.Frame(n)
	if unsafe.SliceData(again) == unsafe.SliceData(pix) {
		t.Fatal("a frame held by a batch was handed out again")
	}
	rs.frames.unhold(held, false)
	if _, used, _ := rs.frames.stats(); used != frameAlign*((n+frameAlign-1)/frameAlign) {
		t.Fatalf("after the batch: %d bytes in use, want the second frame's", used)
	}
	rel2()
	// A batch whose stream could not be waited for: its frames are lost, never reused.
	pix, rel = rs.Frame(n)
	held, _ = rs.frames.hold([]transforms.Image{{W: 10, H: 10, C: 10, Pix: pix}})
	rs.frames.unhold(held, true)
	rel()
	if _, _, lost := rs.frames.stats(); lost == 0 {
		t.Fatal("a frame of a batch that could not be waited for was reused")
	}
	for range 10 {
		b, r := rs.Frame(n)
		if unsafe.SliceData(b) == unsafe.SliceData(pix) {
			t.Fatal("a lost frame was handed out again")
		}
		r()
	}
	// Bounded: past the budget Frame gives Go memory; a released frame is pinned again.
	first, relFirst := rs.Frame(600 << 10)
	if k.writeCombined(unsafe.SliceData(first), uintptr(len(first))) == 0 {
		t.Error("a frame within the budget is not pinned")
	}
	over, relOver := rs.Frame(600 << 10)
	if k.writeCombined(unsafe.SliceData(over), uintptr(len(over))) == 1 {
		t.Error("a frame past the budget is pinned")
	}
	if size, _, _ := rs.frames.stats(); size > rs.opts.FrameBytes {
		t.Errorf("pool of %d bytes, budget %d", size, rs.opts.FrameBytes)
	}
	relFirst()
	relOver()
	again, relAgain := rs.Frame(600 << 10)
	if k.writeCombined(unsafe.SliceData(again), uintptr(len(again))) == 0 {
		t.Error("a frame is not pinned once the budget is free again")
	}
	relAgain()
	if b, r := rs.Frame(0); len(b) != 0 {
		t.Error("Frame(0) is not empty")
	} else {
		r()
	}
}

// TestFakeDriverFramesMidBatchFailures: a driver call failing mid-batch with frames in
// flight fails Run, which returns only when nothing it enqueued is queued; the frames are
// then released and reused (poisoned on the way) and the next Run gives the CPU's bytes.
// When even the stream cannot be waited for, the batch's frames are never reused.
func TestFakeDriverFramesMidBatchFailures(t *testing.T) {
	d := openFakeDevice(t)
	k, err := fakeControl()
	if err != nil {
		t.Fatal(err)
	}
	spec := transforms.Spec{Resize: 24, CropW: 20, CropH: 20, Filter: transforms.Lanczos}
	rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 3, MaxBatchBytes: 8 << 10, FrameBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rs.frames.poison = true
	cs := frameCases(t, rand.New(rand.NewPCG(23, 23)), spec, 30)
	for _, c := range []struct {
		call string
		nth  int32
	}{
		{"cuMemcpyHtoDAsync_v2", 9}, {"cuLaunchKernel", 6}, {"cuMemcpyDtoHAsync_v2", 4}, {"cuEventQuery", 5},
	} {
		k.fail(c.call, c.nth, 719)
		_, _, err := runFrames(t, rs, k, cs, 1)
		k.fail("", 0, 0)
		var ce *Error
		if !errors.As(err, &ce) || ce.Call != c.call || ce.Code != 719 {
			t.Errorf("%s #%d failing: Run returned %v", c.call, c.nth, err)
		}
		if n := k.queued(); n != 0 {
			t.Errorf("%s #%d failing: Run returned with %d operations still queued", c.call, c.nth, n)
		}
		if _, used, lost := rs.frames.stats(); used != 0 || lost != 0 {
			t.Errorf("%s #%d failing: %d frame bytes in use, %d lost after release", c.call, c.nth, used, lost)
		}
		if _, _, err := runFrames(t, rs, k, cs, 1); err != nil {
			t.Fatalf("after %s #%d failed: %v", c.call, c.nth, err)
		}
	}
	// The wait fails and so does the stream synchronize: the slot is retired and its batch's
	// frames are lost.
	k.fail("cuEventQuery", 1, 719)
	k.fail("cuStreamSynchronize", 1, 720)
	_, _, err = runFrames(t, rs, k, cs, 1)
	k.fail("", 0, 0)
	if err == nil {
		t.Fatal("Run succeeded with its wait and stream synchronize failing")
	}
	if _, used, lost := rs.frames.stats(); lost == 0 || used < lost {
		t.Errorf("a batch that could not be waited for: %d frame bytes lost, %d in use", lost, used)
	}
}
