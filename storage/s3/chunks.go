package s3

import (
	"container/list"
	"sync"
)

// Small reads are served from whole chunks of the object kept in memory: a shuffled epoch
// reads records one by one in an order that stays within a window of the shard stream
// (shard/ORDER.md's shuffle buffer), so neighbouring small records are asked for soon after
// one another, and one GET per record would be bound by the request rate, not the link. A
// read of at most smallRead bytes fetches the chunkSize-aligned chunk(s) it lies in with one
// ranged GET each and keeps them, up to Options.ChunkCache bytes per Backend (chunkBudget by
// default; least recently used first out). Larger reads, such as a Loader's sequential buffers, go straight to one GET
// into the caller's buffer.
//
// The budget holds the window a default shuffle buffer (4096 records) keeps drawing from
// (about five times its size in stream bytes) for records up to smallRead: larger records
// would evict chunks before their neighbours are read, so they are read one GET each.
//
// A chunk fetched because a read missed it also starts fetches of the chunkReadAhead chunks
// after it, in the background: a shuffle buffer takes in the stream in order, so the next
// chunks are the next to be asked for.
//
// That locality is reading order 1's. Under order 2 a shuffled epoch draws its records from
// the whole dataset, and for a dataset larger than the budget each small record would cost a
// chunk and its read-ahead; the reader's ReadRangeAt (shard.RangeReaderAt) reads exactly the
// bytes asked for, and the shard Loader reads such passes (and shard headers and indexes)
// with it, as Dataset.Record reads single records of such a dataset.
const (
	chunkSize      = 2 << 20
	smallRead      = 16 << 10
	chunkBudget    = 256 << 20
	chunkReadAhead = 8
)

type chunkKey struct {
	key, etag string
	index     int64
}

type chunk struct {
	key   chunkKey
	ready chan struct{} // closed when data or err is set
	data  []byte
	err   error
	elem  *list.Element // in the LRU list, once ready and kept
}

// chunkCache is a Backend's cache of chunks, safe for concurrent use; concurrent reads of one
// chunk share one GET.
type chunkCache struct {
	mu     sync.Mutex
	budget int // bytes kept at most (Options.ChunkCache)
	m      map[chunkKey]*chunk
	lru    list.List // of *chunk, most recent at the front
	bytes  int
}

// get returns chunk k's bytes, fetching them with fetch unless they are cached or being
// fetched; missed reports whether this call fetched them.
func (c *chunkCache) get(k chunkKey, fetch func() ([]byte, error)) (data []byte, missed bool, err error) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[chunkKey]*chunk{}
	}
	if ch, ok := c.m[k]; ok {
		if ch.elem != nil {
			c.lru.MoveToFront(ch.elem)
		}
		c.mu.Unlock()
		<-ch.ready
		return ch.data, false, ch.err
	}
	ch := &chunk{key: k, ready: make(chan struct{})}
	c.m[k] = ch
	c.mu.Unlock()
	return c.fill(ch, fetch)
}

// prefetch starts fetching chunk k in the background unless it is cached or being fetched.
func (c *chunkCache) prefetch(k chunkKey, fetch func() ([]byte, error)) {
	c.mu.Lock()
	if _, ok := c.m[k]; ok {
		c.mu.Unlock()
		return
	}
	ch := &chunk{key: k, ready: make(chan struct{})}
	c.m[k] = ch
	c.mu.Unlock()
	go c.fill(ch, fetch)
}

func (c *chunkCache) fill(ch *chunk, fetch func() ([]byte, error)) ([]byte, bool, error) {
	k := ch.key
	ch.data, ch.err = fetch()
	c.mu.Lock()
	if ch.err != nil {
		delete(c.m, k) // a failed fetch is not kept: the next read tries again
	} else {
		ch.elem = c.lru.PushFront(ch)
		c.bytes += len(ch.data)
		for c.bytes > c.budget && c.lru.Len() > 1 {
			old := c.lru.Remove(c.lru.Back()).(*chunk)
			delete(c.m, old.key)
			c.bytes -= len(old.data)
		}
	}
	c.mu.Unlock()
	close(ch.ready)
	return ch.data, true, ch.err
}

// readSmall fills p from the object's bytes at off (all within the object) through the chunk
// cache.
func (r *reader) readSmall(p []byte, off int64) error {
	fetcher := func(idx int64) func() ([]byte, error) {
		return func() ([]byte, error) {
			start := idx * chunkSize
			buf := make([]byte, min(chunkSize, r.size-start))
			return buf, r.get(buf, start)
		}
	}
	for len(p) > 0 {
		idx := off / chunkSize
		start := idx * chunkSize
		data, missed, err := r.b.chunks.get(chunkKey{r.key, r.etag, idx}, fetcher(idx))
		if err != nil {
			return err
		}
		if missed {
			for next := idx + 1; next <= idx+chunkReadAhead && next*chunkSize < r.size; next++ {
				r.b.chunks.prefetch(chunkKey{r.key, r.etag, next}, fetcher(next))
			}
		}
		n := copy(p, data[off-start:])
		p, off = p[n:], off+int64(n)
	}
	return nil
}
