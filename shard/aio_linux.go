//go:build linux

package shard

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// Linux native asynchronous I/O (io_submit), for a Loader's O_DIRECT reads of scattered
// records: one goroutine keeps Depth reads in flight with two system calls per round of
// completions. Blocking preads from Depth goroutines reach the same queue depth only when the Go
// runtime has a P free for each, and with GOMAXPROCS 2 it retakes the P of a goroutine blocked
// in a read only after a sysmon tick: a shuffled O_DIRECT pass of 3 KB records read 2-3 times
// slower that way than with GOMAXPROCS 16 on the reference machine (docs/bench/order-cold.md).

// iocb is the kernel's struct iocb (little-endian layout of linux/aio_abi.h).
type iocb struct {
	data   uint64
	_      uint32 // aio_key, set by the kernel
	_      int32  // aio_rw_flags
	opcode uint16
	_      int16 // aio_reqprio
	fildes uint32
	buf    uint64
	nbytes uint64
	offset int64
	_      uint64    // aio_reserved2
	_      [2]uint32 // aio_flags and aio_resfd: no eventfd is asked for
}

// ioEvent is the kernel's struct io_event.
type ioEvent struct {
	data uint64
	obj  uint64
	res  int64
	res2 int64
}

const iocbCmdPread = 0

// aioContext is an io_setup context of depth slots; nil where the kernel refuses one.
type aioContext struct {
	ctx   uintptr
	depth int
	cbs   []iocb
	ptrs  []*iocb
	evs   []ioEvent
}

func newAIO(depth int) *aioContext {
	if !littleEndian {
		return nil // the iocb layout above is the little-endian one
	}
	var ctx uintptr
	if _, _, e := syscall.Syscall(syscall.SYS_IO_SETUP, uintptr(depth), uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return nil // not permitted (a sandbox) or not built in: the goroutine path reads
	}
	return &aioContext{ctx: ctx, depth: depth, cbs: make([]iocb, depth), ptrs: make([]*iocb, depth), evs: make([]ioEvent, depth)}
}

func (a *aioContext) close() {
	if a != nil && a.ctx != 0 {
		syscall.Syscall(syscall.SYS_IO_DESTROY, a.ctx, 0, 0)
	}
}

// aioRead is one read: len(buf) bytes of file fd at off. name is for errors.
type aioRead struct {
	fd   uintptr
	buf  []byte
	off  int64
	name string
}

// readAll performs the reads, Depth at a time, and returns the first error: a read the file
// system refused (directUnsupported), an I/O error or a short read (the file ends early),
// naming the file and offset. buf memory must stay alive and unmoved until it returns: it
// is the Loader's ring buffer (mmap'd, or held by the slot).
func (a *aioContext) readAll(reads []aioRead) error {
	next, inflight := 0, 0
	free := make([]int, 0, a.depth) // free iocb slots
	for i := a.depth - 1; i >= 0; i-- {
		free = append(free, i)
	}
	var firstErr error
	for next < len(reads) || inflight > 0 {
		if firstErr != nil && inflight == 0 {
			break // nothing more is submitted after an error, and nothing is in flight
		}
		// Submit as many as there are free slots (none after an error).
		n := 0
		for firstErr == nil && next < len(reads) && len(free) > 0 {
			c := free[len(free)-1]
			free = free[:len(free)-1]
			r := &reads[next]
			a.cbs[c] = iocb{data: uint64(next)<<16 | uint64(c), opcode: iocbCmdPread, fildes: uint32(r.fd),
				buf: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(r.buf)))), nbytes: uint64(len(r.buf)), offset: r.off}
			a.ptrs[n] = &a.cbs[c]
			n++
			next++
		}
		for done := 0; done < n; {
			k, _, e := syscall.Syscall(syscall.SYS_IO_SUBMIT, a.ctx, uintptr(n-done), uintptr(unsafe.Pointer(&a.ptrs[done])))
			if e == syscall.EINTR || e == syscall.EAGAIN {
				continue
			}
			if e != 0 {
				// None of the rest went in: give their slots back and stop submitting.
				for _, p := range a.ptrs[done:n] {
					free = append(free, int(p.data&0xffff))
				}
				if firstErr == nil {
					r := &reads[a.ptrs[done].data>>16]
					firstErr = &os.PathError{Op: "read", Path: r.name, Err: e}
				}
				break
			}
			done += int(k)
			inflight += int(k)
		}
		if inflight == 0 {
			continue
		}
		k, _, e := syscall.Syscall6(syscall.SYS_IO_GETEVENTS, a.ctx, 1, uintptr(len(a.evs)), uintptr(unsafe.Pointer(&a.evs[0])), 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			// The context is broken: io_destroy waits for the reads in flight (no read may
			// land in the buffer after this returns), and the context is not used again.
			a.close()
			a.ctx, a.depth = 0, 0
			return fmt.Errorf("shard: io_getevents: %w", e)
		}
		for _, ev := range a.evs[:k] {
			inflight--
			free = append(free, int(ev.data&0xffff))
			r := &reads[ev.data>>16]
			switch {
			case ev.res < 0:
				if firstErr == nil {
					firstErr = &os.PathError{Op: "read", Path: r.name, Err: syscall.Errno(-ev.res)}
				}
			case ev.res < int64(len(r.buf)):
				if firstErr == nil {
					firstErr = corrupt(r.name, r.off+ev.res, ErrTruncated, "read %d bytes, want %d", ev.res, len(r.buf))
				}
			}
		}
	}
	return firstErr
}
