package shards

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"os"
	"sync"
	"unsafe"

	"github.com/packer-dev/packer/shard"
)

// sinkChunk is the size of the buffers a sink hands to its goroutines.
const sinkChunk = 4 << 20

// sinkBuffers is how many chunks a sink owns: one being filled, the others hashed or written.
const sinkBuffers = 4

// sink writes a file and computes its SHA-256 on goroutines of its own, so the caller's
// goroutine (the single build writer) only copies bytes into a buffer. A chunk is hashed on one
// goroutine and then written on another, so hashing (the larger cost) and the write system
// calls run on different cores. Writes are in order.
type sink struct {
	p    *shard.Pending // the file, committed by the caller after finish
	f    *os.File       // p's file
	h    hash.Hash
	cur  []byte
	ch   chan []byte // filled chunks, to the hasher
	wch  chan []byte // hashed chunks, to the file writer
	free chan []byte
	done chan struct{}
	err  error // set by the writing goroutine, read after done
	size int64

	direct bool // f is open with O_DIRECT (writeLoop only)

	// A file written through the page cache has its bytes sent to the disk as they are written
	// (every writebackStep, by wbLoop), not all at its commit's fsync.
	wb   chan int64 // end offsets of the bytes written so far, to wbLoop
	woff int64      // bytes written (writeLoop only)
}

// writebackStep is how many bytes a sink writing through the page cache writes between two
// requests to start writing them to the disk.
const writebackStep = 32 << 20

// directAlign is the alignment of memory, sizes and offsets that O_DIRECT writes need.
const directAlign = 4096

// alignedChunk returns an empty buffer of capacity sinkChunk whose start is directAlign-aligned.
func alignedChunk() []byte {
	b := make([]byte, sinkChunk+directAlign)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1))
	return b[off : off : off+sinkChunk]
}

// newSink creates dir/name+".tmp" (shard.Create, with O_DIRECT where the file system allows it)
// and starts the sink's goroutines.
func newSink(dir, name string) (*sink, error) { return newSinkDirect(dir, name, true) }

// newSinkDirect is newSink with O_DIRECT only when direct is set; otherwise the file is written
// through the page cache.
func newSinkDirect(dir, name string, direct bool) (*sink, error) {
	p, err := shard.Create(dir, name, direct)
	if err != nil {
		return nil, err
	}
	s := &sink{p: p, f: p.File(), direct: p.Direct(), h: sha256.New(), ch: make(chan []byte, sinkBuffers), wch: make(chan []byte, sinkBuffers),
		free: make(chan []byte, sinkBuffers), done: make(chan struct{})}
	for i := 0; i < sinkBuffers; i++ {
		s.free <- alignedChunk()
	}
	s.cur = <-s.free
	if !s.direct {
		s.wb = make(chan int64, 1)
	}
	go s.hashLoop()
	go s.writeLoop()
	return s, nil
}

// hashLoop hashes each chunk in order and passes it on to writeLoop.
func (s *sink) hashLoop() {
	defer close(s.wch)
	for b := range s.ch {
		s.h.Write(b)
		s.wch <- b
	}
}

// writeLoop writes each hashed chunk in order and returns it to the free list.
func (s *sink) writeLoop() {
	defer close(s.done)
	if s.wb != nil {
		wbDone := make(chan struct{})
		go s.wbLoop(wbDone)
		defer func() { close(s.wb); <-wbDone }()
	}
	for b := range s.wch {
		if s.err == nil {
			s.err = s.write(b)
		}
		s.free <- b[:0]
		if s.wb != nil && s.err == nil {
			prev := s.woff
			s.woff += int64(len(b))
			if s.woff/writebackStep != prev/writebackStep {
				select {
				case s.wb <- s.woff:
				default: // wbLoop is busy: its next request covers these bytes too
				}
			}
		}
	}
}

// wbLoop starts the writeback of the bytes written so far each time writeLoop says, on a
// goroutine of its own, so that a busy disk never holds up the writes.
func (s *sink) wbLoop(done chan struct{}) {
	defer close(done)
	var from int64
	for end := range s.wb {
		startWriteback(s.f, from, end-from)
		from = end
	}
}

// write writes one chunk. Files are written with O_DIRECT where the file system allows it: the
// bytes go from the chunk to the disk without a copy into the page cache (which cost as much
// CPU as the rest of the writer) and without a burst of dirty pages for the final fsync. Every
// chunk but the last is a multiple of directAlign; a last chunk that is not, or a file system
// that refuses the writes, turns O_DIRECT off for the rest of the file.
func (s *sink) write(b []byte) error {
	if s.direct && len(b)%directAlign != 0 {
		s.direct = false
		if err := shard.ClearDirect(s.f); err != nil {
			return err
		}
	}
	n, err := s.f.Write(b)
	if err != nil && s.direct && shard.DirectUnsupported(err) {
		s.direct = false
		if err := shard.ClearDirect(s.f); err != nil {
			return err
		}
		_, err = s.f.Write(b[n:])
	}
	return err
}

// Write copies p into the sink. It never fails itself; errors show at finish.
func (s *sink) Write(p []byte) (int, error) {
	n := len(p)
	s.size += int64(n)
	for len(p) > 0 {
		k := copy(s.cur[len(s.cur):cap(s.cur)], p)
		s.cur = s.cur[:len(s.cur)+k]
		p = p[k:]
		if len(s.cur) == cap(s.cur) {
			s.ch <- s.cur
			s.cur = <-s.free
		}
	}
	return n, nil
}

// finish flushes the sink and waits for its goroutine; it returns the SHA-256 in hex.
func (s *sink) finish() (string, error) {
	if len(s.cur) > 0 {
		s.ch <- s.cur
	}
	close(s.ch)
	<-s.done
	if s.err != nil {
		s.f.Close()
		return "", s.err
	}
	return hex.EncodeToString(s.h.Sum(nil)), nil
}

// abort stops the sink and removes its file.
func (s *sink) abort() {
	select {
	case <-s.done:
	default:
		close(s.ch)
		<-s.done
	}
	s.p.Abort()
}

// syncer completes files in the background (fsync, check, rename) while the build goes on.
type syncer struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

func (y *syncer) run(fn func() error) {
	y.wg.Add(1)
	go func() {
		defer y.wg.Done()
		if err := fn(); err != nil {
			y.mu.Lock()
			y.err = errors.Join(y.err, err)
			y.mu.Unlock()
		}
	}()
}

func (y *syncer) wait() error {
	y.wg.Wait()
	return y.err
}
