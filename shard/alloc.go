package shard

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// Allocator provides the buffers of a Loader's ring. It is the plug point for pinned memory: an
// allocator may register its buffers with a GPU driver so host-to-device copies are true DMA.
// Alloc must return a slice of length n whose first byte is aligned to at least Align (needed
// for O_DIRECT reads). Free receives a slice that Alloc returned, with the same start and
// capacity (its length may differ). A Loader calls Alloc and Free from its own goroutines, one
// call at a time per Loader.
type Allocator interface {
	Alloc(n int) ([]byte, error)
	Free(b []byte) error
}

// MmapAllocator is the default Allocator: page-aligned anonymous memory mappings, outside the
// Go heap. On Linux a buffer of 2 MiB or more is offered transparent huge pages and faulted
// in when allocated (its memory is in use from then on). With Lock set it also locks the pages
// in RAM (mlock) when the process is permitted to; when it is not, the memory is used unlocked
// and Locked reports false. It is safe for concurrent use.
type MmapAllocator struct {
	Lock bool

	allocs    atomic.Int64
	unlocked  atomic.Int64
	lastError atomic.Value // error from the last failed lock
}

// Locked reports whether every buffer allocated so far is locked in memory (false before the
// first allocation, or when Lock is not set).
func (a *MmapAllocator) Locked() bool {
	return a.Lock && a.allocs.Load() > 0 && a.unlocked.Load() == 0
}

// LockError returns why the last lock failed, or nil.
func (a *MmapAllocator) LockError() error {
	if err, ok := a.lastError.Load().(error); ok {
		return err
	}
	return nil
}

// ringPool keeps the ring buffers of a Dataset's Loaders that use the default allocator from
// one Loader to the next: a Loader's Close hands its buffers back, and the next Loader (the
// next epoch, typically) takes them again, already mapped, faulted in and locked, instead of
// mapping, faulting and locking fresh memory every epoch.
//
// It never holds more than its Loaders held at once: the bytes in use plus the bytes kept
// spare stay at most the peak of the bytes in use, so a single Loader per epoch keeps one
// ring's worth of memory between epochs and no more. Buffers taken with and without Lock are
// kept apart. It is safe for concurrent use.
type ringPool struct {
	mu     sync.Mutex
	allocs [2]MmapAllocator // [0] without Lock, [1] with Lock
	spare  [2][]pooledBuf
	closed bool

	inUse, spareBytes, peak int
}

// pooledBuf is one buffer of a ringPool with whether it is locked in memory.
type pooledBuf struct {
	b      []byte
	locked bool
}

func lockIndex(lock bool) int {
	if lock {
		return 1
	}
	return 0
}

// get returns a buffer of length n (aligned to Align) and whether it is locked in memory: a
// spare one whose capacity is at least n and at most twice n when there is one, the smallest
// such, and a new one otherwise.
func (p *ringPool) get(n int, lock bool) (pooledBuf, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	li := lockIndex(lock)
	best := -1
	for i, s := range p.spare[li] {
		if c := cap(s.b); c >= n && c <= 2*n && (best < 0 || c < cap(p.spare[li][best].b)) {
			best = i
		}
	}
	if best >= 0 {
		s := p.spare[li][best]
		p.spare[li] = slices.Delete(p.spare[li], best, best+1)
		p.spareBytes -= cap(s.b)
		p.inUse += cap(s.b)
		s.b = s.b[:n]
		return s, nil
	}
	a := &p.allocs[li]
	unlocked := a.unlocked.Load()
	b, err := a.Alloc(n)
	if err != nil {
		return pooledBuf{}, err
	}
	p.inUse += cap(b)
	p.peak = max(p.peak, p.inUse)
	// Spare buffers that did not fit give way so that the total stays within the peak.
	var ferr error
	for p.inUse+p.spareBytes > p.peak {
		ferr = errors.Join(ferr, p.dropLargest())
	}
	return pooledBuf{b: b, locked: lock && a.unlocked.Load() == unlocked}, ferr
}

// dropLargest frees the largest spare buffer.
func (p *ringPool) dropLargest() error {
	li, best := -1, -1
	for l := range p.spare {
		for i, s := range p.spare[l] {
			if best < 0 || cap(s.b) > cap(p.spare[li][best].b) {
				li, best = l, i
			}
		}
	}
	s := p.spare[li][best]
	p.spare[li] = slices.Delete(p.spare[li], best, best+1)
	p.spareBytes -= cap(s.b)
	return p.allocs[li].Free(s.b)
}

// put hands back a buffer from get, taken with the same lock; it is kept for a later get, or
// freed once the pool is closed.
func (p *ringPool) put(s pooledBuf, lock bool) error {
	if cap(s.b) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inUse -= cap(s.b)
	li := lockIndex(lock)
	if p.closed || p.inUse+p.spareBytes+cap(s.b) > p.peak {
		return p.allocs[li].Free(s.b)
	}
	p.spare[li] = append(p.spare[li], s)
	p.spareBytes += cap(s.b)
	return nil
}

// release frees every spare buffer; with closing set, buffers handed back later are freed
// too.
func (p *ringPool) release(closing bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = p.closed || closing
	var err error
	for p.spareBytes > 0 {
		err = errors.Join(err, p.dropLargest())
	}
	return err
}
