package gpu

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/packer-dev/packer/transforms"
)

// ResizerOptions tune a Resizer. The zero value gives the defaults.
type ResizerOptions struct {
	// Streams is how many device batches may be in flight at once, each with its own stream
	// and buffers, so the uploads of one overlap the kernels and copy back of others and the
	// host stages the next while earlier ones run. Default 4.
	Streams int
	// MaxBatchBytes is the byte budget of one device batch: the staged source bytes (the
	// regions the kept pixels read, not whole images). Run fills a device batch with images
	// until the next would pass it; a single larger image gets a batch of its own. Default
	// 64 MiB.
	MaxBatchBytes int
	// FrameBytes bounds the pinned memory of Frame, the frames callers decode into (the
	// pipeline's batch workers): past it, Frame hands out Go memory, which Run stages as
	// before. Default Streams × MaxBatchBytes.
	FrameBytes int
}

// DefaultStreams is ResizerOptions.Streams' default: more than two batches in flight, so one
// can upload, one compute and one copy back while the host stages a fourth.
const DefaultStreams = 4

func (o ResizerOptions) withDefaults() ResizerOptions {
	if o.Streams <= 0 {
		o.Streams = DefaultStreams
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 64 << 20
	}
	if o.MaxBatchBytes > maxBufferBytes/2 {
		o.MaxBatchBytes = maxBufferBytes / 2
	}
	if o.FrameBytes <= 0 {
		o.FrameBytes = o.Streams * o.MaxBatchBytes
	}
	return o
}

// A Resizer applies a transforms.Spec (resize, centre crop/pad, layout, dtype and
// normalisation) to batches of decoded images on a Device, producing exactly the bytes of
// transforms.Worker.Apply. Run is safe for concurrent use; calling it from at least
// ResizerOptions.Streams goroutines keeps the device busy while each caller stages its
// batch. Close releases the device memory.
type Resizer struct {
	dev   *Device
	spec  transforms.Compiled
	opts  ResizerOptions
	luts  *lutSet
	slots chan *slot

	mu    sync.Mutex
	queue []*piece // pieces of Run calls waiting for a slot, oldest first

	frames framePool // pinned frames (Frame), uploaded without staging

	enqueued func(imgs []transforms.Image) // tests: called after a batch is enqueued, before its wait

	closeOnce sync.Once
	closeErr  error

	// Owned by the device goroutine (touched only inside Do).
	dLUT DevicePtr // conversion tables (lutWords uint32, or 4 bytes for uint8)
	all  []*slot
}

// slot is one in-flight batch's stream and buffers. A Run holds it from staging to scatter,
// and gives it back only when no work it enqueued can still run: every copy and kernel of a
// batch goes on the slot's own stream and reads the slot's own buffers, so batches never
// depend on each other's timing, on the legacy default stream, or on a context-wide wait.
type slot struct {
	stream Stream
	done   Event
	broken error  // set when the stream could not be waited for: the slot is never used again
	hSrc   []byte // pinned, write-combined: written by the host, read only by the upload (images not in a Frame)
	hJobs  []byte // pinned, write-combined: the job table, then the batch's resampling weights
	hDst   []byte // pinned: the records, read by the host
	dSrc   DevicePtr
	dJobs  DevicePtr
	dMid   DevicePtr
	dDst   DevicePtr
	nSrc   int // device capacities
	nJobs  int
	nMid   int
	nDst   int
}

// NewResizer prepares a Resizer for the compiled transform spec on dev: the CPU path's
// transform, which the GPU path reproduces.
func NewResizer(dev *Device, spec transforms.Compiled, opts ResizerOptions) (*Resizer, error) {
	if dev == nil {
		return nil, fmt.Errorf("gpu: NewResizer: no device")
	}
	luts, err := newLUTSet(spec)
	if err != nil {
		return nil, err
	}
	r := &Resizer{dev: dev, spec: spec, opts: opts.withDefaults(), luts: luts}
	r.frames.budget = r.opts.FrameBytes
	err = dev.Do(func() error {
		var err error
		lutBytes := 4
		if luts.words != nil {
			lutBytes = 4 * len(luts.words)
		}
		if r.dLUT, err = dev.MemAlloc(lutBytes); err != nil {
			return err
		}
		if luts.words != nil {
			b := make([]byte, lutBytes)
			putUint32s(b, luts.words)
			if err := dev.CopyHtoD(r.dLUT, b); err != nil {
				return err
			}
		}
		for i := 0; i < r.opts.Streams; i++ {
			s := &slot{}
			r.all = append(r.all, s)
			if s.stream, err = dev.NewStream(); err != nil {
				return err
			}
			if s.done, err = dev.NewEvent(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(err, r.free(nil))
	}
	r.slots = make(chan *slot, len(r.all))
	for _, s := range r.all {
		r.slots <- s
	}
	return r, nil
}

// OutputSize returns the record size, in bytes, of a w×h×c image.
func (r *Resizer) OutputSize(w, h, c int) (int, error) {
	g, err := PlanGeometry(r.spec, w, h)
	if err != nil {
		return 0, err
	}
	_, esize, _ := conversion(r.spec)
	return g.OutW * g.OutH * c * int(esize), nil
}

// Run transforms imgs[i] into dsts[i], which must be exactly the record size (OutputSize).
// It returns when every record is written. The images are only read, and may be reused when
// Run returns. Only the part of each image that the kept pixels read is staged and uploaded;
// an image whose pixels are a Frame is not staged: the rows its kept pixels read go up
// straight from it.
// The images are split into device batches of at most MaxBatchBytes of staged source, up to
// Streams of them in flight at once.
func (r *Resizer) Run(imgs []transforms.Image, dsts [][]byte) error {
	return r.run(imgs, nil, dsts)
}

// RunWindows is Run for images of which only a window was decoded (region decoding on the
// CPU): imgs[i] holds the pixels of wins[i] of a larger image, and must cover the source
// region the transform reads (transforms.Spec.Region). dsts[i] is the record of the full
// image, byte-identical to transforms.Worker.ApplyWindow.
func (r *Resizer) RunWindows(imgs []transforms.Image, wins []Window, dsts [][]byte) error {
	if len(wins) != len(imgs) {
		return fmt.Errorf("gpu: %d windows for %d images", len(wins), len(imgs))
	}
	return r.run(imgs, wins, dsts)
}

func (r *Resizer) run(imgs []transforms.Image, wins []Window, dsts [][]byte) error {
	if len(imgs) != len(dsts) {
		return fmt.Errorf("gpu: %d destinations for %d images", len(dsts), len(imgs))
	}
	ends, sizes, err := r.chunks(imgs, wins, dsts)
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(r.opts.Streams)
	start := 0
	for k, end := range ends {
		p := &piece{imgs: imgs[start:end], dsts: dsts[start:end], bytes: sizes[k], done: make(chan error, 1)}
		if wins != nil {
			p.wins = wins[start:end]
		}
		g.Go(func() error { return r.submit(p) })
		start = end
	}
	return g.Wait()
}

// A piece is part of one Run call waiting for a device batch: images, their windows (nil for
// whole images) and destinations, its staged bytes, and where its batch's result goes.
type piece struct {
	imgs  []transforms.Image
	wins  []Window
	dsts  [][]byte
	bytes int
	done  chan error // buffered: the batch that ran the piece sends its error once
}

// submit queues p and runs device batches until p has run. Whoever gets a free slot takes
// the queued pieces, oldest first, up to MaxBatchBytes (at least one) and runs them as one
// device batch: while every slot is busy, the pieces of concurrent Run calls (the pipeline's
// workers) gather into larger batches, and when a slot is idle a piece goes at once. Every
// piece is taken: its owner queues it before asking for a slot, and each owner that gets one
// takes at least one piece if any is queued.
func (r *Resizer) submit(p *piece) error {
	r.mu.Lock()
	r.queue = append(r.queue, p)
	r.mu.Unlock()
	s, ok := <-r.slots
	if !ok {
		r.mu.Lock()
		if i := slices.Index(r.queue, p); i >= 0 {
			r.queue = slices.Delete(r.queue, i, i+1)
			r.mu.Unlock()
			return ErrClosed
		}
		r.mu.Unlock()
		return <-p.done
	}
	batch := r.take()
	if len(batch) == 0 {
		r.slots <- s
		return <-p.done // another slot's holder took p
	}
	var imgs []transforms.Image
	var wins []Window
	var dsts [][]byte
	windowed := false
	for _, q := range batch {
		imgs = append(imgs, q.imgs...)
		dsts = append(dsts, q.dsts...)
		windowed = windowed || q.wins != nil
	}
	if windowed {
		for _, q := range batch {
			if q.wins != nil {
				wins = append(wins, q.wins...)
			} else {
				wins = append(wins, make([]Window, len(q.imgs))...) // the zero Window: whole images
			}
		}
	}
	err := r.runOnSlot(s, imgs, wins, dsts)
	r.slots <- s
	for _, q := range batch {
		q.done <- err
	}
	return <-p.done
}

// take removes the oldest queued pieces that fit MaxBatchBytes and maxChunkImages together
// (always at least one, if any is queued).
func (r *Resizer) take() []*piece {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, bytes, imgs := 0, 0, 0
	for n < len(r.queue) {
		q := r.queue[n]
		if n > 0 && (bytes+q.bytes > r.opts.MaxBatchBytes || imgs+len(q.imgs) > maxChunkImages) {
			break
		}
		bytes += q.bytes
		imgs += len(q.imgs)
		n++
	}
	batch := slices.Clone(r.queue[:n])
	r.queue = slices.Delete(r.queue, 0, n)
	return batch
}

// chunks splits a batch into device batches by staged bytes: each ends where the next image's
// region would pass MaxBatchBytes (or at maxChunkImages). It returns the end indices and each
// chunk's staged bytes. It first verifies what would make a device batch fail for this
// caller's input (sizes, windows, channel counts, and the destination sizes unless dsts is
// nil), so that a batch merging several callers' pieces fails only for device errors.
func (r *Resizer) chunks(imgs []transforms.Image, wins []Window, dsts [][]byte) (ends, sizes []int, err error) {
	f := r.spec.ResampleFilter()
	_, esize, err := conversion(r.spec)
	if err != nil {
		return nil, nil, err
	}
	bytes, n := 0, 0
	for i, im := range imgs {
		var win Window
		if wins != nil {
			win = wins[i]
		}
		ip, err := planImage(r.spec, f, im, win)
		if err != nil {
			return nil, nil, fmt.Errorf("image %d: %w", i, err)
		}
		if esize != 1 {
			if err := r.luts.errs[im.C]; err != nil {
				return nil, nil, fmt.Errorf("image %d (%d channels): %w", i, im.C, err)
			}
		}
		if want := ip.g.OutW * ip.g.OutH * im.C * int(esize); dsts != nil && len(dsts[i]) != want {
			return nil, nil, fmt.Errorf("gpu: destination %d is %d bytes, want %d", i, len(dsts[i]), want)
		}
		b := ip.stagedBytes(im.C)
		if b > 0 && r.frames.isFrame(im) {
			b = im.W * (ip.ry1 - ip.ry0) * im.C // a Frame uploads whole rows (planBatchDirect)
		}
		if n > 0 && (bytes+b > r.opts.MaxBatchBytes || n >= maxChunkImages) {
			ends, sizes = append(ends, i), append(sizes, bytes)
			bytes, n = 0, 0
		}
		bytes += b
		n++
	}
	if n > 0 {
		ends, sizes = append(ends, len(imgs)), append(sizes, bytes)
	}
	return ends, sizes, nil
}

// maxChunkImages bounds the images of one device batch (the grid's y dimension).
const maxChunkImages = 4096

// runOnSlot runs one device batch on slot s, which the caller holds. The batch's weights are
// not shared with other batches: they travel after the job table in the slot's pinned job
// buffer, uploaded by the same asynchronous copy on the slot's stream, so the kernels that
// read them are ordered after their upload by the stream alone.
func (r *Resizer) runOnSlot(s *slot, imgs []transforms.Image, wins []Window, dsts [][]byte) error {
	// The frames among imgs are held until nothing this batch enqueued can still read them.
	held, anyFrame := r.frames.hold(imgs)
	lost := false
	defer func() { r.frames.unhold(held, lost) }()
	var direct []bool
	if anyFrame {
		direct = make([]bool, len(imgs))
		for i, f := range held {
			direct[i] = f != nil
		}
	}
	var rec recordPool
	plan, err := planBatchDirect(r.spec, imgs, wins, &rec, r.luts, direct)
	if err != nil {
		return err
	}
	if err := plan.checkDsts(dsts); err != nil {
		return err
	}
	var wts hostPool
	if err := plan.placeWeights(&rec, &wts); err != nil {
		return err
	}
	jobBytes := 4 * len(plan.jobs)
	tableBytes := int64(jobBytes) + 4*int64(len(wts.words))
	if tableBytes > maxBufferBytes {
		return fmt.Errorf("gpu: job table and weights of %d bytes exceed %d", tableBytes, maxBufferBytes)
	}
	if s.broken != nil {
		return fmt.Errorf("gpu: stream unusable since an earlier failure: %w", s.broken)
	}
	if err := r.dev.Do(func() error {
		return r.grow(s, plan.hostBytes, plan.srcBytes, int(tableBytes), plan.midBytes, plan.dstBytes)
	}); err != nil {
		return err
	}
	plan.stageSources(imgs, s.hSrc)
	ups := plan.uploads(imgs, s.hSrc)
	putInt32s(s.hJobs, plan.jobs)
	putInt32s(s.hJobs[jobBytes:], wts.words)
	err = r.dev.Do(func() error {
		d := r.dev
		dWts := s.dJobs + DevicePtr(jobBytes)
		for _, u := range ups { // none when no kept pixel reads the source
			if err := d.CopyHtoDAsync(s.dSrc+DevicePtr(u.dev), u.host, s.stream); err != nil {
				return err
			}
		}
		if err := d.CopyHtoDAsync(s.dJobs, s.hJobs[:tableBytes], s.stream); err != nil {
			return err
		}
		block := Dim{BlockSize, 1, 1}
		if err := d.Launch(kernelHPass, plan.grid(plan.maxHWork), block, s.stream,
			hpassParams(s.dJobs, s.dSrc, dWts, s.dMid)); err != nil {
			return err
		}
		if err := d.Launch(kernelVPass, plan.grid(plan.maxVWork), block, s.stream,
			vpassParams(s.dJobs, s.dMid, dWts, r.dLUT, s.dDst, plan.layout, plan.esize)); err != nil {
			return err
		}
		if err := d.CopyDtoHAsync(s.hDst[:plan.dstBytes], s.dDst, s.stream); err != nil {
			return err
		}
		return d.RecordEvent(s.done, s.stream)
	})
	if err == nil {
		if r.enqueued != nil {
			r.enqueued(imgs)
		}
		err = r.dev.Wait(s.done)
	}
	if err != nil {
		// Part of the batch may be enqueued and still running: the slot goes back only
		// once its stream is idle, or is retired if even that cannot be known.
		if serr := r.dev.Do(func() error { return r.dev.StreamSynchronize(s.stream) }); serr != nil {
			s.broken = serr
			lost = true // the device may still read this batch's frames
			return errors.Join(err, serr)
		}
		return err
	}
	return plan.scatter(s.hDst, dsts)
}

// grow makes the slot's buffers at least the given sizes: host staging of hostSrc bytes,
// device sources of src. The slot is idle (its last batch was waited for). Runs inside Do.
func (r *Resizer) grow(s *slot, hostSrc, src, jobs, mid, dst int) error {
	d := r.dev
	var err error
	growHost := func(b *[]byte, n int, flags uint32) error {
		if len(*b) >= n {
			return nil
		}
		if *b != nil {
			if err := d.FreeHost(*b); err != nil {
				return err
			}
			*b = nil
		}
		*b, err = d.hostAlloc(roundUp(n), flags)
		return err
	}
	growDev := func(p *DevicePtr, have *int, n int) error {
		if *have >= n {
			return nil
		}
		if err := d.MemFree(*p); err != nil {
			return err
		}
		*p, *have = 0, 0
		if *p, err = d.MemAlloc(roundUp(n)); err != nil {
			return err
		}
		*have = roundUp(n)
		return nil
	}
	// Upload staging is only written by the host: write-combined memory suits it (and the
	// fake driver scribbles over it after each wait, so nothing may rely on what it held).
	const upload = HostAllocPortable | HostAllocWriteCombined
	if err := growHost(&s.hSrc, hostSrc, upload); err != nil {
		return err
	}
	if err := growHost(&s.hJobs, jobs, upload); err != nil {
		return err
	}
	if err := growHost(&s.hDst, dst, HostAllocPortable); err != nil {
		return err
	}
	if err := growDev(&s.dSrc, &s.nSrc, src); err != nil {
		return err
	}
	if err := growDev(&s.dJobs, &s.nJobs, jobs); err != nil {
		return err
	}
	if err := growDev(&s.dMid, &s.nMid, mid); err != nil {
		return err
	}
	return growDev(&s.dDst, &s.nDst, dst)
}

// roundUp rounds a buffer size up to a multiple of 1 MiB (at least 64 KiB), so that buffers
// settle after a few batches.
func roundUp(n int) int {
	if n < 64<<10 {
		return 64 << 10
	}
	return (n + (1<<20 - 1)) &^ (1<<20 - 1)
}

// Close waits for the batches in flight and frees the Resizer's device and pinned memory.
// Run calls that start after Close return ErrClosed. Close is idempotent.
func (r *Resizer) Close() error {
	r.closeOnce.Do(func() {
		n := cap(r.slots)
		for i := 0; i < n; i++ {
			<-r.slots
		}
		close(r.slots)
		r.closeErr = r.free(r.frames.close())
	})
	return r.closeErr
}

// free releases the slots' memory, the LUT and frames (the frame pool's chunks), after a
// synchronize, so nothing can still read them.
func (r *Resizer) free(frames [][]byte) error {
	return r.dev.Do(func() error {
		d := r.dev
		errs := []error{d.Synchronize()}
		for _, b := range frames {
			errs = append(errs, d.FreeHost(b))
		}
		for _, s := range r.all {
			for _, b := range [][]byte{s.hSrc, s.hJobs, s.hDst} {
				if b != nil {
					errs = append(errs, d.FreeHost(b))
				}
			}
			for _, p := range []DevicePtr{s.dSrc, s.dJobs, s.dMid, s.dDst} {
				errs = append(errs, d.MemFree(p))
			}
			if s.done != 0 {
				errs = append(errs, d.DestroyEvent(s.done))
			}
			if s.stream != 0 {
				errs = append(errs, d.DestroyStream(s.stream))
			}
		}
		errs = append(errs, d.MemFree(r.dLUT))
		r.all = nil
		r.dLUT = 0
		return errors.Join(errs...)
	})
}
