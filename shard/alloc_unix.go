//go:build unix

package shard

import (
	"fmt"
	"syscall"
)

// Alloc maps n bytes of anonymous memory, rounded up to whole pages, and locks them when Lock
// is set and permitted.
func (a *MmapAllocator) Alloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("shard: allocate %d bytes", n)
	}
	size := int(alignUp(int64(n)))
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("shard: allocate %d bytes: %w", size, err)
	}
	if hugePage > 0 && size >= hugePage {
		// Transparent huge pages, faulted in now: an O_DIRECT read pins every page of the
		// buffer part it reads into, and a shuffled cold pass of 150 KB records into 38 MB
		// batch buffers read about 1.3× faster from huge pages once faulted in
		// (docs/bench/order-cold.md); faulting them in here keeps the zeroing of fresh huge
		// pages out of the reads, where it would stall the submission of the next ones.
		adviseHuge(b)
		populate(b)
	}
	a.allocs.Add(1)
	if a.Lock {
		if err := mlock(b); err != nil {
			a.unlocked.Add(1)
			a.lastError.Store(fmt.Errorf("mlock %d bytes: %w", size, err))
		}
	}
	return b[:n], nil
}

// Free unmaps a buffer from Alloc (unmapping also unlocks it).
func (a *MmapAllocator) Free(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	if err := syscall.Munmap(b[:cap(b)]); err != nil {
		return fmt.Errorf("shard: free buffer: %w", err)
	}
	return nil
}
