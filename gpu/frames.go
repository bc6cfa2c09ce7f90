package gpu

import (
	"sort"
	"sync"
	"unsafe"

	"github.com/packer-dev/packer/transforms"
)

// frameChunkBytes is the size of the pinned chunks the frame pool allocates as it grows (less
// when less is left of the budget; a larger frame gets a chunk of its own size).
const frameChunkBytes = 32 << 20

// frameAlign is the alignment of every frame in its chunk.
const frameAlign = 256

// framePool is the Resizer's pinned memory for decoded frames (Resizer.Frame): chunks of
// write-combined pinned memory, allocated as needed up to a byte budget and carved first-fit.
// A frame goes back to its chunk when its holder has released it and no device batch that
// uploads from it is running; a frame that a batch read and whose stream could not be
// waited for is never reused (it is freed with its chunk at Close, after a synchronize).
type framePool struct {
	budget int
	mu     sync.Mutex
	chunks []*frameChunk
	total  int // bytes of chunks
	live   map[*byte]*frame
	closed bool
	failed bool // a chunk allocation failed: no more pinned frames
	lost   int  // bytes of frames never reused (see above)
	poison bool // tests: overwrite each frame when it goes back to its chunk
}

type frameChunk struct {
	mem  []byte
	free []span // free ranges, by offset, coalesced
}

type span struct{ off, n int }

type frame struct {
	c        *frameChunk
	off, n   int // n: the carved size (a multiple of frameAlign)
	busy     int // running device batches that upload from the frame
	released bool
	lost     bool
}

// Frame returns n bytes for one decoded frame's pixels (transforms.Image.Pix) and the
// function that gives them back. Run and RunWindows upload an image whose Pix is such a
// frame (from its first byte) straight from it, with no copy into the slot's staging; any
// other image is staged as before. The memory is pinned and write-combined: fill it with
// sequential writes and do not read it back (reads are very slow, and after the batch that
// uploads it the frame's uploaded rows hold nothing useful). When the pool's budget
// (ResizerOptions.FrameBytes) is used up, or pinned memory cannot be had, Frame returns Go
// memory, which Run stages as any image. Frame never blocks.
//
// Call release exactly once, when the frame is no longer needed: after the Run call that
// reads it has returned, or at once if it will not be run; a release while a device batch
// may still read the frame defers its reuse until the batch is done. Release every frame
// before Close.
func (r *Resizer) Frame(n int) (pix []byte, release func()) {
	if b, release := r.frames.get(r.dev, n); b != nil {
		return b, release
	}
	return make([]byte, n), func() {}
}

// get carves n bytes from a chunk, allocating one if the budget allows; nil when it cannot.
func (p *framePool) get(dev *Device, n int) ([]byte, func()) {
	if n <= 0 {
		return nil, nil
	}
	size := (n + frameAlign - 1) &^ (frameAlign - 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.failed {
		return nil, nil
	}
	f := p.carve(size)
	if f == nil {
		// A chunk of frameChunkBytes, or what is left of the budget, or the frame's own size.
		csize := max(size, min(frameChunkBytes, p.budget-p.total))
		if p.total+csize > p.budget {
			return nil, nil
		}
		var mem []byte
		err := dev.Do(func() error {
			var err error
			mem, err = dev.hostAlloc(csize, HostAllocPortable|HostAllocWriteCombined)
			return err
		})
		if err != nil {
			p.failed = true
			return nil, nil
		}
		p.chunks = append(p.chunks, &frameChunk{mem: mem, free: []span{{0, csize}}})
		p.total += csize
		if f = p.carve(size); f == nil {
			return nil, nil
		}
	}
	if p.live == nil {
		p.live = make(map[*byte]*frame)
	}
	b := f.c.mem[f.off : f.off+n : f.off+n]
	p.live[&b[0]] = f
	return b, func() { p.release(f) }
}

// carve takes size bytes from the first free range that holds them. Called with p.mu held.
func (p *framePool) carve(size int) *frame {
	for _, c := range p.chunks {
		for i, s := range c.free {
			if s.n < size {
				continue
			}
			f := &frame{c: c, off: s.off, n: size}
			if s.n == size {
				c.free = append(c.free[:i], c.free[i+1:]...)
			} else {
				c.free[i] = span{s.off + size, s.n - size}
			}
			return f
		}
	}
	return nil
}

// release is a frame's release function: idempotent.
func (p *framePool) release(f *frame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.released {
		return
	}
	f.released = true
	delete(p.live, &f.c.mem[f.off])
	if f.busy == 0 {
		p.recycle(f)
	}
}

// recycle gives a released frame that no batch reads back to its chunk, unless it is lost.
// Called with p.mu held.
func (p *framePool) recycle(f *frame) {
	if f.lost {
		p.lost += f.n
		return
	}
	if p.poison {
		b := f.c.mem[f.off : f.off+f.n]
		for i := range b {
			b[i] = 0x6B
		}
	}
	c := f.c
	i := sort.Search(len(c.free), func(i int) bool { return c.free[i].off > f.off })
	c.free = append(c.free, span{})
	copy(c.free[i+1:], c.free[i:])
	c.free[i] = span{f.off, f.n}
	// Coalesce with the next range, then with the previous one.
	if i+1 < len(c.free) && c.free[i].off+c.free[i].n == c.free[i+1].off {
		c.free[i].n += c.free[i+1].n
		c.free = append(c.free[:i+1], c.free[i+2:]...)
	}
	if i > 0 && c.free[i-1].off+c.free[i-1].n == c.free[i].off {
		c.free[i-1].n += c.free[i].n
		c.free = append(c.free[:i], c.free[i+1:]...)
	}
}

// lookup returns the live frame that im's pixels are, or nil. Called with p.mu held.
func (p *framePool) lookup(im transforms.Image) *frame {
	if len(im.Pix) == 0 || p.live == nil {
		return nil
	}
	f := p.live[unsafe.SliceData(im.Pix)]
	if f == nil || len(im.Pix) > f.n {
		return nil
	}
	return f
}

// isFrame reports whether im's pixels are a live frame.
func (p *framePool) isFrame(im transforms.Image) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lookup(im) != nil
}

// hold marks the frames among imgs as read by a device batch, which must call unhold when
// nothing it enqueued can still run. held[i] is nil for an image that is not a frame.
func (p *framePool) hold(imgs []transforms.Image) (held []*frame, any bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	held = make([]*frame, len(imgs))
	for i, im := range imgs {
		if f := p.lookup(im); f != nil {
			f.busy++
			held[i], any = f, true
		}
	}
	return held, any
}

// unhold ends a batch's hold; lost is set when the batch's stream could not be waited for,
// so the device may still read the frames: they are never reused.
func (p *framePool) unhold(held []*frame, lost bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range held {
		if f == nil {
			continue
		}
		f.busy--
		f.lost = f.lost || lost
		if f.busy == 0 && f.released {
			p.recycle(f)
		}
	}
}

// close stops handing out frames and returns the chunks to free (after a synchronize).
func (p *framePool) close() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var mems [][]byte
	for _, c := range p.chunks {
		mems = append(mems, c.mem)
	}
	p.chunks, p.live, p.total = nil, nil, 0
	return mems
}

// frameStats is the pool's state, for tests: chunk bytes, bytes handed out and not yet back
// in a chunk (live or busy or lost), and lost bytes.
func (p *framePool) stats() (total, used, lost int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	free := 0
	for _, c := range p.chunks {
		for _, s := range c.free {
			free += s.n
		}
	}
	return p.total, p.total - free, p.lost
}
