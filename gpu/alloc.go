package gpu

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/packer-dev/packer/shard"
)

// PinnedAllocator is a shard.Allocator whose buffers are page-locked host memory from the
// CUDA driver (cuMemHostAlloc, portable), so that copies from the reader's ring to the device
// are asynchronous DMA (CopyBatchAsync). Without a device it falls back to
// shard.MmapAllocator with Lock set (mlock where permitted). It is safe for concurrent use.
type PinnedAllocator struct {
	dev      *Device // nil: fallback
	fallback shard.MmapAllocator

	mu   sync.Mutex
	live map[*byte]int // first byte -> size, of the buffers not yet freed
}

var _ shard.Allocator = (*PinnedAllocator)(nil)

// NewPinnedAllocator returns an allocator backed by dev's pinned memory, or by locked
// anonymous mappings when dev is nil.
func NewPinnedAllocator(dev *Device) *PinnedAllocator {
	return &PinnedAllocator{dev: dev, fallback: shard.MmapAllocator{Lock: true}, live: make(map[*byte]int)}
}

// Pinned reports whether the buffers come from the CUDA driver.
func (a *PinnedAllocator) Pinned() bool { return a.dev != nil }

// Alloc returns n bytes aligned to shard.Align.
func (a *PinnedAllocator) Alloc(n int) ([]byte, error) {
	if a.dev == nil {
		return a.fallback.Alloc(n)
	}
	if n <= 0 {
		return nil, fmt.Errorf("gpu: Alloc(%d): size must be positive", n)
	}
	var b []byte
	err := a.dev.Do(func() error {
		var err error
		b, err = a.dev.HostAlloc(n)
		return err
	})
	if err != nil {
		return nil, err
	}
	if uintptr(unsafe.Pointer(&b[0]))%shard.Align != 0 { // the driver returns page-aligned memory
		_ = a.dev.Do(func() error { return a.dev.FreeHost(b) })
		return nil, fmt.Errorf("gpu: cuMemHostAlloc returned memory not aligned to %d bytes", shard.Align)
	}
	a.mu.Lock()
	a.live[&b[0]] = n
	a.mu.Unlock()
	return b, nil
}

// Free releases a buffer from Alloc.
func (a *PinnedAllocator) Free(b []byte) error {
	if a.dev == nil {
		return a.fallback.Free(b)
	}
	if cap(b) == 0 {
		return nil
	}
	p := unsafe.SliceData(b)
	a.mu.Lock()
	_, ok := a.live[p]
	delete(a.live, p)
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("gpu: Free of a buffer this allocator did not allocate")
	}
	return a.dev.Do(func() error { return a.dev.FreeHost(b[:cap(b)]) })
}

// CopyBatchAsync enqueues the host-to-device copy of a batch (a page-locked buffer, such as
// one from PinnedAllocator) to dst on stream s, and records done after it, so that the caller
// can Wait(done) before reusing the buffer. It returns once the copy is enqueued.
func (d *Device) CopyBatchAsync(dst DevicePtr, batch []byte, s Stream, done Event) error {
	return d.Do(func() error {
		if err := d.CopyHtoDAsync(dst, batch, s); err != nil {
			return fmt.Errorf("copy batch of %d bytes to the device: %w", len(batch), err)
		}
		if done != 0 {
			return d.RecordEvent(done, s)
		}
		return nil
	})
}
