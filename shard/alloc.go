package shard

import "sync/atomic"

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
// Go heap. With Lock set it also locks the pages in RAM (mlock) when the process is permitted
// to; when it is not, the memory is used unlocked and Locked reports false. It is safe for
// concurrent use.
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
