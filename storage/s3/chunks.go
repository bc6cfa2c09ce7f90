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
// ranged GET each and keeps them, up to chunkBudget bytes per Backend (least recently used
// first out). Larger reads, such as a Loader's sequential buffers, go straight to one GET
// into the caller's buffer.
const (
	chunkSize   = 1 << 20
	smallRead   = 64 << 10
	chunkBudget = 128 << 20
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
	mu    sync.Mutex
	m     map[chunkKey]*chunk
	lru   list.List // of *chunk, most recent at the front
	bytes int
}

func (c *chunkCache) get(k chunkKey, fetch func() ([]byte, error)) ([]byte, error) {
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
		return ch.data, ch.err
	}
	ch := &chunk{key: k, ready: make(chan struct{})}
	c.m[k] = ch
	c.mu.Unlock()

	ch.data, ch.err = fetch()
	c.mu.Lock()
	if ch.err != nil {
		delete(c.m, k) // a failed fetch is not kept: the next read tries again
	} else {
		ch.elem = c.lru.PushFront(ch)
		c.bytes += len(ch.data)
		for c.bytes > chunkBudget && c.lru.Len() > 1 {
			old := c.lru.Remove(c.lru.Back()).(*chunk)
			delete(c.m, old.key)
			c.bytes -= len(old.data)
		}
	}
	c.mu.Unlock()
	close(ch.ready)
	return ch.data, ch.err
}

// readSmall fills p from the object's bytes at off (all within the object) through the chunk
// cache.
func (r *reader) readSmall(p []byte, off int64) error {
	for len(p) > 0 {
		idx := off / chunkSize
		start := idx * chunkSize
		data, err := r.b.chunks.get(chunkKey{r.key, r.etag, idx}, func() ([]byte, error) {
			buf := make([]byte, min(chunkSize, r.size-start))
			return buf, r.get(buf, start)
		})
		if err != nil {
			return err
		}
		n := copy(p, data[off-start:])
		p, off = p[n:], off+int64(n)
	}
	return nil
}
