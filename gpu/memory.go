package gpu

import (
	"fmt"
	"unsafe"

	"github.com/packer-dev/packer/gpu/internal/cuda"
)

// DevicePtr is a device memory address (CUdeviceptr).
type DevicePtr uint64

// Stream is a CUDA stream (CUstream); 0 is the legacy default stream.
type Stream uintptr

// Event is a CUDA event (CUevent).
type Event uintptr

// Flags of cuMemHostAlloc and cuMemHostRegister (cuda.h).
const (
	HostAllocPortable = 0x01 // CU_MEMHOSTALLOC_PORTABLE: pinned for every context
	HostAllocMapped   = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP
	// HostAllocWriteCombined (CU_MEMHOSTALLOC_WRITECOMBINED) is for buffers the host only
	// writes and the device only reads: uploads from it can be faster, host reads are very
	// slow. The Resizer's upload staging uses it and never reads it back.
	HostAllocWriteCombined = 0x04
	HostRegPortable        = 0x01 // CU_MEMHOSTREGISTER_PORTABLE
)

// MemAlloc allocates n bytes of device memory. Call it inside Do.
func (d *Device) MemAlloc(n int) (DevicePtr, error) {
	if err := d.call("cuMemAlloc_v2"); err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("gpu: MemAlloc(%d): size must be positive", n)
	}
	var p uint64
	if err := cuda.Check("cuMemAlloc_v2", d.drv.MemAlloc(&p, uintptr(n))); err != nil {
		return 0, fmt.Errorf("allocate %d bytes of device memory: %w", n, err)
	}
	return DevicePtr(p), nil
}

// MemFree frees device memory from MemAlloc; 0 is ignored. Call it inside Do.
func (d *Device) MemFree(p DevicePtr) error {
	if err := d.call("cuMemFree_v2"); err != nil {
		return err
	}
	if p == 0 {
		return nil
	}
	return cuda.Check("cuMemFree_v2", d.drv.MemFree(uint64(p)))
}

// HostAlloc allocates n bytes of page-locked host memory (cuMemHostAlloc with
// CU_MEMHOSTALLOC_PORTABLE), usable by every context for asynchronous copies. The slice is
// not Go memory: release it with FreeHost, never let it outlive the Device. Call it inside Do.
func (d *Device) HostAlloc(n int) ([]byte, error) {
	return d.hostAlloc(n, HostAllocPortable)
}

// hostAlloc is HostAlloc with the given cuMemHostAlloc flags.
func (d *Device) hostAlloc(n int, flags uint32) ([]byte, error) {
	if err := d.call("cuMemHostAlloc"); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("gpu: HostAlloc(%d): size must be positive", n)
	}
	var p unsafe.Pointer
	if err := cuda.Check("cuMemHostAlloc", d.drv.MemHostAlloc(&p, uintptr(n), flags)); err != nil {
		return nil, fmt.Errorf("allocate %d bytes of pinned host memory: %w", n, err)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// FreeHost releases memory from HostAlloc (the slice as returned, or any reslice starting at
// its first byte). Call it inside Do.
func (d *Device) FreeHost(b []byte) error {
	if err := d.call("cuMemFreeHost"); err != nil {
		return err
	}
	if cap(b) == 0 {
		return nil
	}
	return cuda.Check("cuMemFreeHost", d.drv.MemFreeHost(unsafe.Pointer(unsafe.SliceData(b))))
}

// HostRegister page-locks existing host memory (cuMemHostRegister, portable) so that copies
// from and to it are asynchronous DMA. b must stay alive and unmoved until HostUnregister:
// use memory that is not managed by the Go garbage collector (mmap), or keep the slice
// reachable. Call it inside Do.
func (d *Device) HostRegister(b []byte) error {
	if err := d.call("cuMemHostRegister_v2"); err != nil {
		return err
	}
	if len(b) == 0 {
		return fmt.Errorf("gpu: HostRegister: empty buffer")
	}
	return cuda.Check("cuMemHostRegister_v2", d.drv.MemHostRegister(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)), HostRegPortable))
}

// HostUnregister undoes HostRegister. Call it inside Do.
func (d *Device) HostUnregister(b []byte) error {
	if err := d.call("cuMemHostUnregister"); err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	return cuda.Check("cuMemHostUnregister", d.drv.MemHostUnregister(unsafe.Pointer(unsafe.SliceData(b))))
}

// CopyHtoD copies src to device memory synchronously, ordered on the legacy default stream
// (so after, and before, the work of every blocking stream). Call it inside Do.
func (d *Device) CopyHtoD(dst DevicePtr, src []byte) error {
	if err := d.call("cuMemcpyHtoD_v2"); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return cuda.Check("cuMemcpyHtoD_v2", d.drv.MemcpyHtoD(uint64(dst), unsafe.Pointer(unsafe.SliceData(src)), uintptr(len(src))))
}

// CopyHtoDAsync enqueues a copy of src to device memory on stream s. src must be page-locked
// (HostAlloc or HostRegister) and must not change until the copy is done. Call it inside Do.
func (d *Device) CopyHtoDAsync(dst DevicePtr, src []byte, s Stream) error {
	if err := d.call("cuMemcpyHtoDAsync_v2"); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return cuda.Check("cuMemcpyHtoDAsync_v2", d.drv.MemcpyHtoDAsync(uint64(dst), unsafe.Pointer(unsafe.SliceData(src)), uintptr(len(src)), uintptr(s)))
}

// CopyDtoHAsync enqueues a copy of len(dst) bytes of device memory into dst on stream s. dst
// must be page-locked and must not be read until the copy is done. Call it inside Do.
func (d *Device) CopyDtoHAsync(dst []byte, src DevicePtr, s Stream) error {
	if err := d.call("cuMemcpyDtoHAsync_v2"); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	return cuda.Check("cuMemcpyDtoHAsync_v2", d.drv.MemcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(dst)), uint64(src), uintptr(len(dst)), uintptr(s)))
}

// NewStream creates a stream (CU_STREAM_DEFAULT: it synchronises with the legacy default
// stream). Call it inside Do.
func (d *Device) NewStream() (Stream, error) {
	if err := d.call("cuStreamCreate"); err != nil {
		return 0, err
	}
	var s uintptr
	if err := cuda.Check("cuStreamCreate", d.drv.StreamCreate(&s, 0)); err != nil {
		return 0, err
	}
	return Stream(s), nil
}

// DestroyStream destroys s. Call it inside Do.
func (d *Device) DestroyStream(s Stream) error {
	if err := d.call("cuStreamDestroy_v2"); err != nil {
		return err
	}
	return cuda.Check("cuStreamDestroy_v2", d.drv.StreamDestroy(uintptr(s)))
}

// StreamSynchronize blocks the owner goroutine until s is idle; prefer RecordEvent + Wait,
// which does not hold up other Do calls. Call it inside Do.
func (d *Device) StreamSynchronize(s Stream) error {
	if err := d.call("cuStreamSynchronize"); err != nil {
		return err
	}
	return cuda.Check("cuStreamSynchronize", d.drv.StreamSynchronize(uintptr(s)))
}

// NewEvent creates an event (CU_EVENT_DEFAULT, timing enabled). Call it inside Do.
func (d *Device) NewEvent() (Event, error) {
	if err := d.call("cuEventCreate"); err != nil {
		return 0, err
	}
	var e uintptr
	if err := cuda.Check("cuEventCreate", d.drv.EventCreate(&e, 0)); err != nil {
		return 0, err
	}
	return Event(e), nil
}

// DestroyEvent destroys e. Call it inside Do.
func (d *Device) DestroyEvent(e Event) error {
	if err := d.call("cuEventDestroy_v2"); err != nil {
		return err
	}
	return cuda.Check("cuEventDestroy_v2", d.drv.EventDestroy(uintptr(e)))
}

// RecordEvent records e on stream s: it completes when the work enqueued on s so far does.
// Call it inside Do; wait for it with Device.Wait from outside.
func (d *Device) RecordEvent(e Event, s Stream) error {
	if err := d.call("cuEventRecord"); err != nil {
		return err
	}
	return cuda.Check("cuEventRecord", d.drv.EventRecord(uintptr(e), uintptr(s)))
}

// EventSynchronize blocks the owner goroutine until e completes. Call it inside Do.
func (d *Device) EventSynchronize(e Event) error {
	if err := d.call("cuEventSynchronize"); err != nil {
		return err
	}
	return cuda.Check("cuEventSynchronize", d.drv.EventSynchronize(uintptr(e)))
}

// ElapsedMs returns the time between two completed events, in milliseconds. Call it inside Do.
func (d *Device) ElapsedMs(start, end Event) (float32, error) {
	if err := d.call("cuEventElapsedTime"); err != nil {
		return 0, err
	}
	var ms float32
	if err := cuda.Check("cuEventElapsedTime", d.drv.EventElapsedTime(&ms, uintptr(start), uintptr(end))); err != nil {
		return 0, err
	}
	return ms, nil
}
