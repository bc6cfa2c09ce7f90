package shards

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"os"
	"sync"
	"unsafe"

	"github.com/packer-dev/packer/internal/fileutil"
)

// sinkChunk is the size of the buffers a sink hands to its goroutines.
const sinkChunk = 4 << 20

// sinkBuffers is the least number of chunks a chunk pool holds: one being filled, the others
// hashed or written.
const sinkBuffers = 4

// chunkPool hands out the sinkChunk buffers of the sinks of one output, at most max of them at
// a time, made when first needed. Sharing one pool between the sinks lets the output start the
// next shard while the shards before it are still being hashed and written, each on goroutines
// of its own: the SHA-256 of a file is sequential, but different shards hash on different
// cores. The pool's size bounds how far the build writer may run ahead of the hashing.
type chunkPool struct {
	free chan []byte
	made int // buffers made so far (get only: the build writer's goroutine)
	max  int
}

func newChunkPool(n int) *chunkPool {
	n = max(n, sinkBuffers)
	return &chunkPool{free: make(chan []byte, n), max: n}
}

// get returns a free buffer, waiting for one when max are in use.
func (c *chunkPool) get() []byte {
	select {
	case b := <-c.free:
		return b
	default:
	}
	if c.made < c.max {
		c.made++
		return alignedChunk()
	}
	return <-c.free
}

// put returns a buffer to the pool; it never blocks (the channel holds every buffer made).
func (c *chunkPool) put(b []byte) { c.free <- b[:0] }

// sink writes a file and computes its SHA-256 on goroutines of its own, so the caller's
// goroutine (the single build writer) only copies bytes into a buffer. A chunk is hashed on one
// goroutine and then written on another, so hashing (the larger cost) and the write system
// calls run on different cores. Writes are in order. The caller may start the next file's sink
// as soon as close returns: the sink finishes on its own goroutines, and wait gives its result.
type sink struct {
	p    *fileutil.Pending // the file, committed by the caller after wait
	f    *os.File          // p's file
	h    hash.Hash
	cur  []byte
	ch   chan []byte // filled chunks, to the hasher
	wch  chan []byte // hashed chunks, to the file writer
	pool *chunkPool
	done chan struct{}
	err  error // set by the writing goroutine, read after done
	size int64

	closed bool // ch is closed (close)

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

// newSink creates dir/name+".tmp" (fileutil.Create, with O_DIRECT where the file system allows it)
// and starts the sink's goroutines, with a pool of its own.
func newSink(dir, name string) (*sink, error) {
	return newSinkDirect(dir, name, true, newChunkPool(sinkBuffers))
}

// newSinkDirect is newSink with O_DIRECT only when direct is set (otherwise the file is written
// through the page cache), taking its buffers from pool.
func newSinkDirect(dir, name string, direct bool, pool *chunkPool) (*sink, error) {
	p, err := fileutil.Create(dir, name, direct)
	if err != nil {
		return nil, err
	}
	// ch and wch can hold every buffer of the pool, so a sink's goroutines never wait on each
	// other's channels for long, and the caller waits only for a free buffer.
	s := &sink{p: p, f: p.File(), direct: p.Direct(), h: sha256.New(), ch: make(chan []byte, pool.max), wch: make(chan []byte, pool.max),
		pool: pool, done: make(chan struct{})}
	s.cur = pool.get()
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
		s.pool.put(b)
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
		if err := fileutil.ClearDirect(s.f); err != nil {
			return err
		}
	}
	n, err := s.f.Write(b)
	if err != nil && s.direct && fileutil.DirectUnsupported(err) {
		s.direct = false
		if err := fileutil.ClearDirect(s.f); err != nil {
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
			s.cur = s.pool.get()
		}
	}
	return n, nil
}

// close hands the last bytes to the sink's goroutines and returns at once; no Write may follow.
func (s *sink) close() {
	if s.closed {
		return
	}
	s.closed = true
	if len(s.cur) > 0 {
		s.ch <- s.cur
	} else {
		s.pool.put(s.cur)
	}
	s.cur = nil
	close(s.ch)
}

// wait waits until every byte is hashed and written; it returns the SHA-256 in hex. It may run
// on another goroutine than the Writes, after close.
func (s *sink) wait() (string, error) {
	<-s.done
	if s.err != nil {
		s.f.Close()
		return "", s.err
	}
	return hex.EncodeToString(s.h.Sum(nil)), nil
}

// finish is close, then wait.
func (s *sink) finish() (string, error) {
	s.close()
	return s.wait()
}

// abort stops the sink and removes its file.
func (s *sink) abort() {
	s.close()
	<-s.done
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

// failed returns the errors of the functions that have ended so far, without waiting.
func (y *syncer) failed() error {
	y.mu.Lock()
	defer y.mu.Unlock()
	return y.err
}
