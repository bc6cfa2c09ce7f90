//go:build !unix

package shard

import (
	"errors"
	"fmt"
	"unsafe"
)

// Alloc returns n bytes of Go memory aligned to Align. Memory locking is not supported on this
// platform, so Locked reports false.
func (a *MmapAllocator) Alloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("shard: allocate %d bytes", n)
	}
	a.allocs.Add(1)
	if a.Lock {
		a.unlocked.Add(1)
		a.lastError.Store(errors.New("memory locking is not supported on this platform"))
	}
	b := make([]byte, n+Align)
	skip := int(alignUp(int64(uintptr(unsafe.Pointer(&b[0])))) - int64(uintptr(unsafe.Pointer(&b[0]))))
	return b[skip : skip+n : skip+n], nil
}

// Free releases nothing: the garbage collector reclaims the memory.
func (a *MmapAllocator) Free(b []byte) error { return nil }
