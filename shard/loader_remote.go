package shard

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
)

// rangeReads reports whether the records of a buffer, grouped into parts, are to be read with
// exact ranged reads (fillRanges) rather than through the file's ReadAt: a shuffled buffer of
// several parts, of a dataset whose files are RangeReaderAts and that holds more than half of
// their cache. Such a pass draws records from the whole dataset, so a chunk fetched for one
// record is evicted before its neighbours are asked for.
func (l *Loader) rangeReads(parts []part) bool {
	if !l.opts.Shuffle || len(parts) < 2 || l.ds.pin != nil {
		return false
	}
	r, err := l.ds.Shard(parts[0].shard)
	if err != nil {
		return false // the fill reports it
	}
	ra, ok := r.r.(RangeReaderAt)
	return ok && l.ds.exactReads(ra)
}

// rangeAt is a RangeReaderAt as an io.ReaderAt whose reads are exact.
type rangeAt struct{ RangeReaderAt }

func (r rangeAt) ReadAt(p []byte, off int64) (int, error) { return r.ReadRangeAt(p, off) }

// rangeRead is one ranged read of fillRanges: the file bytes [start, end) of a shard, which
// hold the records of parts and, for each of checks, the whole checksum blocks of records
// [a, b), not all checked yet, to be checked from these bytes.
type rangeRead struct {
	shard      int
	start, end int64
	parts      []int
	checks     [][2]int64
}

// fillRanges reads the parts of s (records [0, n) of the buffer) with one exact ranged read
// (RangeReaderAt) per run of neighbouring records, up to rangeDepth of them in flight. Where
// the CRC of a part's checksum block is still to be checked (and SkipCRC is not set) the read
// covers the whole block, which is checked from those bytes, once: a shuffled first epoch
// then fetches each block once plus the records of blocks checked before, at most about
// twice the data's bytes, and later epochs the records' bytes alone. The bytes handed out
// are the bytes checked, as in fill.
func (l *Loader) fillRanges(s *slot, n int) error {
	parts := s.parts
	at := make([]int64, len(parts)) // where each part's data goes in the buffer's data
	type span struct {
		shard      int
		start, end int64
		check      [2]int64
		part       int
	}
	spans := make([]span, len(parts))
	var need int64
	var (
		own, waits []chan struct{} // blocks this buffer checks; blocks other buffers check
		ownKeys    [][2]int64
		waitParts  []int // the parts that wait
	)
	defer func() { // checked or not, other buffers waiting for these blocks go on
		l.claimsMu.Lock()
		for i, k := range ownKeys {
			delete(l.claims, k)
			close(own[i])
		}
		l.claimsMu.Unlock()
	}()
	for i := range parts {
		p := &parts[i]
		if _, err := l.openPart(p, false); err != nil {
			return err
		}
		at[i] = need
		need += p.len
		sp := span{shard: p.shard, start: p.off, end: p.off + p.len, part: i}
		if r := p.r; !l.opts.SkipCRC {
			fb, lb := int64(p.a)/r.ft.k, int64(p.b-1)/r.ft.k
			mine := false
			for blk := fb; blk <= lb; blk++ {
				if r.isVerified(blk) {
					continue
				}
				// A block another buffer is reading whole to check it is not read whole
				// again: this buffer reads its records alone and waits for that check.
				k := [2]int64{int64(p.shard), blk}
				l.claimsMu.Lock()
				if c, ok := l.claims[k]; ok {
					if !slices.Contains(own, c) {
						waits = append(waits, c)
						waitParts = append(waitParts, i)
					}
				} else {
					c := make(chan struct{})
					l.claims[k] = c
					own, ownKeys = append(own, c), append(ownKeys, k)
					mine = true
				}
				l.claimsMu.Unlock()
			}
			if mine {
				a, _ := r.blockRange(fb)
				_, b := r.blockRange(lb)
				sp.check = [2]int64{a, b}
				sp.start, sp.end = r.ft.dataOffset+r.off(a), r.ft.dataOffset+r.off(b)
			}
		}
		spans[i] = sp
	}
	slices.SortFunc(spans, func(x, y span) int {
		if x.shard != y.shard {
			return x.shard - y.shard
		}
		return cmp.Compare(x.start, y.start)
	})
	var reads []rangeRead
	for _, sp := range spans {
		if k := len(reads) - 1; k >= 0 && reads[k].shard == sp.shard && sp.start <= reads[k].end {
			reads[k].end = max(reads[k].end, sp.end)
		} else {
			reads = append(reads, rangeRead{shard: sp.shard, start: sp.start, end: sp.end})
		}
		rd := &reads[len(reads)-1]
		rd.parts = append(rd.parts, sp.part)
		if sp.check[1] > sp.check[0] {
			rd.checks = append(rd.checks, sp.check)
		}
	}
	if need > int64(cap(s.buf)) {
		if err := l.freeBuf(s); err != nil {
			return err
		}
		if err := l.allocBuf(s, int(alignUp(need+need/4))); err != nil {
			return err
		}
	}
	buf := s.buf[:need]

	var (
		next atomic.Int64
		errs firstError
		wg   sync.WaitGroup
	)
	read := func(rd *rangeRead, scratch []byte) ([]byte, error) {
		r, err := l.ds.Shard(rd.shard)
		if err != nil {
			return scratch, err
		}
		f := rangeAt{r.r.(RangeReaderAt)}
		name := l.ds.ShardPath(rd.shard)
		if len(rd.parts) == 1 && len(rd.checks) == 0 { // straight into place
			i := rd.parts[0]
			return scratch, readFull(f, buf[at[i]:at[i]+parts[i].len], rd.start, name)
		}
		if int64(cap(scratch)) < rd.end-rd.start {
			scratch = make([]byte, rd.end-rd.start)
		}
		data := scratch[:rd.end-rd.start]
		if err := readFull(f, data, rd.start, name); err != nil {
			return scratch, err
		}
		for _, c := range rd.checks {
			d0 := r.ft.dataOffset + r.off(c[0]) - rd.start
			if err := r.verifyRange(c[0], c[1], data[d0:d0+r.off(c[1])-r.off(c[0])]); err != nil {
				return scratch, err
			}
		}
		for _, i := range rd.parts {
			p := &parts[i]
			copy(buf[at[i]:at[i]+p.len], data[p.off-rd.start:])
		}
		return scratch, nil
	}
	for range min(l.rangeDepth, len(reads)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []byte
			for !errs.failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(reads) {
					return
				}
				var err error
				if scratch, err = read(&reads[i], scratch); err != nil {
					errs.set(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errs.get(); err != nil {
		return err
	}
	// Where another buffer was checking a block of this one's records, wait for its check;
	// were it to fail, the block is checked here again (reading the rest of it), so that no
	// unchecked byte is handed out.
	if len(waits) > 0 {
		l.claimsMu.Lock()
		for i, k := range ownKeys {
			delete(l.claims, k)
			close(own[i])
		}
		own, ownKeys = nil, nil
		l.claimsMu.Unlock()
		for _, c := range waits {
			<-c
		}
		for _, i := range waitParts {
			p := &parts[i]
			if err := p.r.verifyRange(int64(p.a), int64(p.b), buf[at[i]:at[i]+p.len]); err != nil {
				return err
			}
		}
	}
	for i := range parts {
		if err := l.partMeta(s, &parts[i], at[i]); err != nil {
			return err
		}
	}
	s.offs[n] = need
	s.data = buf
	return nil
}

var _ io.ReaderAt = rangeAt{}

// firstError keeps the first error of concurrent reads; failed tells the others to stop.
type firstError struct {
	failed atomic.Bool
	mu     sync.Mutex
	err    error
}

func (e *firstError) set(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
	e.failed.Store(true)
}

func (e *firstError) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// recordExact is Record for a file read through a cache (RangeReaderAt) that a random read is
// not to go through (Dataset.exactReads): one exact ranged read of the record, or, where its
// checksum block is still to be checked, one of the whole block, which is checked and which
// the record is taken from.
func (r *Reader) recordExact(i int, ra RangeReaderAt) ([]byte, error) {
	if i < 0 || int64(i) >= r.ft.n {
		return nil, fmt.Errorf("shard: %s: record %d out of range [0, %d)", r.name, i, r.ft.n)
	}
	off, n := r.DataRange(i, i+1)
	buf := make([]byte, n)
	blk := int64(i) / r.ft.k
	if r.opts.SkipCRC || r.isVerified(blk) {
		if err := readFull(rangeAt{ra}, buf, off, r.name); err != nil {
			return nil, err
		}
		return buf, nil
	}
	a, b := r.blockRange(blk)
	boff, bn := r.DataRange(int(a), int(b))
	block := make([]byte, bn)
	if err := readFull(rangeAt{ra}, block, boff, r.name); err != nil {
		return nil, err
	}
	if err := r.verifyRange(a, b, block); err != nil {
		return nil, err
	}
	copy(buf, block[off-boff:])
	return buf, nil
}
