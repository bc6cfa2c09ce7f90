package shard

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

// Loader defaults.
const (
	// DefaultPrefetch is the number of buffers in a Loader's ring.
	DefaultPrefetch = 4
	// DefaultReadSize is the amount of record data a Loader aims to put in one buffer: small
	// batches are grouped so that reads stay large. 4 MiB reads are as fast as larger ones
	// (dd bs=4M is the baseline), and a small ring (16 MiB with DefaultPrefetch) stays in
	// the CPU caches: on the reference machine a 4 × 8 MiB ring read 10-25% slower from the
	// page cache than 4 × 4 MiB, and O_DIRECT reads slowed down in the same way.
	DefaultReadSize = 4 << 20
	// DefaultDirectReadSize is DefaultReadSize for O_DIRECT reads (Direct): an even smaller
	// ring (8 MiB) measured 10-20% faster than 4 × 4 MiB for O_DIRECT passes on the reference
	// machine (a virtual disk: its host copies the data in, likely through the CPU caches).
	DefaultDirectReadSize = 2 << 20

	// Defaults for a dataset read through an FS that is not local (an object store): each
	// buffer's reads are ranged GETs, so buffers are larger (fewer requests, each long enough
	// to amortise its latency) and several are filled at once (Fetch), so that requests
	// overlap: DefaultRemoteFetch GETs in flight, each of about DefaultRemoteReadSize bytes,
	// into a ring of DefaultRemotePrefetch buffers.
	DefaultRemoteReadSize = 8 << 20
	DefaultRemoteFetch    = 4
	DefaultRemotePrefetch = 8

	// DefaultDepth is the number of reads a Loader keeps in flight at once within one buffer
	// whose records are not all consecutive (a shuffled pass, or a rank's share of unshuffled
	// order-2 batches), for a dataset on the local file system. Such a buffer is read with
	// one read per run of consecutive records, and a disk serves several small random
	// reads at once several times faster than one after the other: on the reference machine
	// (a virtual disk) fio random reads of 150528 bytes gave 0.97 GB/s at queue depth 1 and
	// 2.2 GB/s at 8, of 3072 bytes 0.038 and 0.22 GB/s (docs/bench/order-cold.md); Depth 8
	// made a cold shuffled Loader pass 1.8× (150528-byte records) and 4.6× (3072) faster.
	DefaultDepth = 8
)

// LoaderOptions configures a Loader. The zero value of every field but BatchSize is a usable
// default.
type LoaderOptions struct {
	BatchSize int // records per batch, ≥ 1

	// The record order, as ORDER.md specifies. Order is its version: 0 or OrderV2 (the
	// default), or OrderV1. Shuffle, Seed and Epoch select the epoch's permutation, Rank and
	// World this reader's part. Under v2 every rank yields the same number of batches and a
	// batch does not depend on how a rank's batches are shared among loader workers (give
	// each worker every nw-th batch); Buffer is unused. Under v1 combine loader workers into
	// Rank and World as ORDER.md v1 says, and Buffer is the shuffle buffer size (0:
	// DefaultShuffleBuffer).
	Order   int
	Shuffle bool
	Seed    uint64
	Epoch   uint64
	Rank    int
	World   int // 0 means 1
	Buffer  int

	// Start is the position to resume from. Under v2 it is the global position of
	// LoaderState (records of the epoch consumed by all ranks together; set it with Restore).
	// Under v1 it is the number of records of this rank's epoch sequence already consumed
	// (Loader.Position of the last batch processed). Batches are grouped from Start on.
	Start int64
	// DropLast drops the last batch of the epoch when it has fewer than BatchSize records.
	// Under v2 it drops the last, partial global batch on every rank; without it that batch
	// is padded by repeating records from the start of the epoch so that every rank's last
	// batch has the same size (ORDER.md v2, step 4).
	DropLast bool

	// Prefetch is the number of buffers in the ring (0: DefaultPrefetch, or
	// DefaultRemotePrefetch for a dataset not on the local file system): one is handed out to
	// the caller while the others are filled ahead.
	Prefetch int
	// Fetch is the number of buffers filled at once, each by its own goroutine (0: 1 for a
	// dataset on the local file system, where one reader keeps up with the disk, and
	// DefaultRemoteFetch for one read through another FS, such as an object store, where
	// requests must overlap to reach the link's speed). Batches come out in order whatever
	// the order the buffers are filled in. At most Prefetch-1.
	Fetch int
	// ReadSize is the amount of record data to read into one buffer (0: DefaultReadSize, or
	// DefaultDirectReadSize with Direct, or DefaultRemoteReadSize for a dataset not on the
	// local file system), rounded to whole batches; one buffer holds at least
	// one batch.
	ReadSize int
	// Direct reads with O_DIRECT, bypassing the page cache, where the OS and file system
	// support it; elsewhere (tmpfs, non-Linux) reads fall back to the page cache. See
	// Loader.DirectIO.
	Direct bool
	// Lock locks the default allocator's buffers in memory (mlock) when the process is
	// permitted to; see Loader.Locked. It is ignored when Alloc is set.
	Lock bool
	// Alloc provides the ring's buffers. nil means the default: MmapAllocator buffers that
	// the Dataset keeps from one Loader to the next, so that a new epoch's Loader reuses the
	// last one's ring (mapped, faulted in and locked already) instead of mapping fresh memory;
	// see Dataset.ReleaseBuffers. Buffers from a custom Allocator are freed at Close.
	Alloc Allocator
	// SkipCRC turns off the CRC-32C check of the record data. By default the loader checks
	// the CRC-32C of every checksum block it reads from before the block's records are handed
	// out, so flipped bytes are an error naming the shard and records, never a silent batch.
	// The bytes checked are the buffer's own; the part of a block that a buffer does not hold
	// is read from the file, once, so checking can
	// cost up to one checksum block (1 MiB) of extra reading per buffer, and with Shuffle about
	// one extra pass over the data, in the first epoch of an opened Dataset (each block is
	// checked once per Dataset): with Direct, a cold shuffled first epoch reads about twice the
	// data's bytes from the disk (docs/bench/order-cold.md); through the page cache the block
	// reads bring the block's other records in with them. The CPU cost is measured in
	// docs/bench (a few per cent of warm read throughput). Set SkipCRC only where the data is
	// checked otherwise.
	SkipCRC bool
	// Depth is the number of reads in flight at once within one buffer whose records are
	// not all consecutive (0: DefaultDepth for a dataset on the local file system, 1
	// otherwise, where Fetch overlaps requests, except for the exact ranged reads of a
	// shuffled pass over a dataset larger than its files' cache (RangeReaderAt), where 0 is
	// DefaultDepth too: Fetch × Depth requests in flight). The reads of a buffer go into
	// their places in it whatever order they finish in, so the batches do not depend on Depth.
	Depth int

	restored restoredRun // set by Restore, checked by NewLoader
}

// Batch is one batch of records. Every slice in it is a view into the Loader's buffers and is
// valid until the next call to Next or Close; copy what must outlive that.
type Batch struct {
	// Data holds the batch's records back to back. For fixed-size records it is a [B, ...]
	// array of the dataset's sample spec, ready to be wrapped as a tensor. In a dataset with
	// fields (format version 3) a record is its sample value followed by its field values:
	// read them with Sample and Field.
	Data []byte
	// Offsets is nil for fixed-size records; for variable-size records, record k of the batch
	// is Data[Offsets[k]:Offsets[k+1]].
	Offsets []int64
	// Dims is nil for fixed-size records; for variable-size records it holds, row-major
	// [B, v], the values of the v dimensions of the sample shape that are -1 (for images of
	// shape [-1, -1, 3]: each record's height and width). Shape(k) expands record k's row into
	// its full shape. A version-1 shard with more than one -1 dimension did not record its
	// records' shapes: their values are -1 (see Reader.RecordShape).
	Dims    []int
	Labels  []int64 // label of each record
	Aux     []int64 // aux label values, row-major [B, len(aux columns)]; nil when there are none
	Indices []int64 // dataset record number of each record
	// Position is the position of the batch's first record in the Loader's sequence. Under
	// v1 it is the epoch position (ORDER.md) and the position after the batch, to resume from,
	// is Position+len(Labels). Under v2 it counts from Start, and the state to resume from is
	// Loader.State.
	Position int64

	sample []int // the dataset's sample shape
	v      int   // number of -1 dimensions in sample
	dtype  DType // the dataset's element type

	fields    []Field  // the dataset's schema; nil without fields
	fieldLens []uint32 // [B, len(fields)] field value lengths, row-major
}

// Len returns the number of records in the batch.
func (b *Batch) Len() int { return len(b.Labels) }

// Shape returns the shape of record k of the batch: the dataset's sample shape for fixed-size
// records, the record's own shape (the -1 dimensions replaced by its row of Dims) otherwise.
func (b *Batch) Shape(k int) []int {
	out := slices.Clone(b.sample)
	if b.Dims == nil {
		return out
	}
	row := b.Dims[k*b.v : (k+1)*b.v]
	j := 0
	for i, d := range out {
		if d < 0 {
			out[i] = row[j]
			j++
		}
	}
	return out
}

// Loader streams one epoch of a rank's records in batches. One goroutine fills a small ring of
// reusable page-aligned buffers ahead of the caller with large sequential reads (aligned, for
// O_DIRECT); batches are views into those buffers. Without Shuffle, the consecutive records
// of a buffer are read with one read per shard they come from, straight into the buffer, and
// batches are subslices of it (no copy; only with O_DIRECT, when a buffer's records continue
// into the next shard and the data so far does not end on a 512-byte boundary, or the device
// refuses reads at that alignment, that shard's part is moved down to follow the first).
// Without a custom Allocator, the ring's buffers go back to the Dataset at Close and the next
// Loader of the Dataset (the next epoch) reuses them. With Shuffle,
// records are gathered into the buffer in the ORDER.md order, one positioned read per run of
// consecutive records, Depth of them in flight at once (O_DIRECT ones through Linux native
// asynchronous I/O where the kernel allows it), each into its own place in the buffer.
//
// The call order is: NewLoader (Next Batch)* Close; Err after Next returns false. A Loader is
// not safe for concurrent use: call it from one goroutine. Close must be called to stop the
// prefetching goroutine and release the buffers.
type Loader struct {
	ds         *Dataset
	opts       LoaderOptions
	rangeDepth int // reads in flight within a buffer read by fillRanges
	claimsMu   sync.Mutex
	claims     map[[2]int64]chan struct{} // shard, block: being read whole by fillRanges, closed when done
	alloc      Allocator                  // nil: the Dataset's pool
	unlocked   atomic.Int64               // buffers of the ring not locked in memory
	recordSize int64
	naux       int
	fields     []Field // the dataset's schema (version 3); nil without fields
	sample     []int   // the dataset's sample shape
	v          int     // number of -1 dimensions in sample
	order      []int64 // this rank's epoch sequence when shuffling or under v2; nil otherwise
	plan       PlanV2  // under v2
	v2         bool
	nbatches   int64 // batches handed out
	lo         int64 // first stream index of this rank, when not shuffling
	start, end int64 // positions to deliver
	perSlot    int   // records per buffer, a multiple of BatchSize

	slots       []*slot
	free, ready chan *slot
	done        chan struct{}
	wg          sync.WaitGroup

	// Producer state. With Fetch > 1 several fills run at once: files and direct are guarded
	// by filesMu, the counters are atomic, and each fill has its own slot.
	fetch    int
	filesMu  sync.Mutex
	files    []readerAtCloser
	direct   []bool
	indirect atomic.Bool  // some read went through the page cache
	noSector atomic.Bool  // an O_DIRECT read at sector (not page) alignment was refused
	moved    atomic.Int64 // bytes moved within buffers after O_DIRECT reads (for tests)
	overlap  atomic.Int64 // buffers read with several reads in flight (for tests)

	// Consumer state.
	cur      *slot
	curBatch int
	batch    Batch
	boffs    []int64
	pos      int64
	err      error
	closed   bool
	locked   bool // Locked when closed
}

// slot is one buffer of the ring with the records it holds.
type slot struct {
	buf    []byte // from the Allocator
	locked bool   // buf is locked in memory (default allocator)
	data   []byte // the records' bytes, within buf
	offs   []int64
	labels []int64
	aux    []int64
	idx    []int64
	dims   []int    // [n, v] record shape values, variable-size records only
	flens  []uint32 // [n, F] field value lengths, datasets with fields only
	parts  []part
	pos    int64 // position of the first record
	n      int   // number of records
	err    error
	aio    *aioContext // for scattered O_DIRECT reads (fillConcurrently); nil until needed
	noAIO  bool        // the kernel refused an aio context
}

// part is a run of consecutive records of one shard within a slot.
type part struct {
	shard    int
	r        *Reader
	a, b     int   // records [a, b) of the shard
	k        int   // index in the slot of record a
	off, len int64 // file range
	// ext is how many bytes past len the read goes on, to the end of the checksum block that
	// holds record b-1 (last part of a buffer, CRC checked): the block is then checked from the
	// buffer, and none of it is read again on its own. Records past b are not handed out.
	ext  int64
	extB int // the record that ends the extension
}

// NewLoader starts a Loader over the dataset. Its goroutine starts reading at once.
func (d *Dataset) NewLoader(opts LoaderOptions) (*Loader, error) {
	if opts.BatchSize < 1 {
		return nil, fmt.Errorf("shard: batch size %d, want ≥ 1", opts.BatchSize)
	}
	oo := OrderOptions{Shuffle: opts.Shuffle, Seed: opts.Seed, Epoch: opts.Epoch, Rank: opts.Rank, World: opts.World, Buffer: opts.Buffer}
	if err := oo.normalize(); err != nil {
		return nil, err
	}
	if opts.Prefetch < 0 || opts.ReadSize < 0 || opts.Start < 0 || opts.Fetch < 0 || opts.Depth < 0 {
		return nil, fmt.Errorf("shard: negative Prefetch, Fetch, ReadSize, Start or Depth")
	}
	_, local := d.fsys.(LocalFS)
	rangeDepth := opts.Depth
	if rangeDepth == 0 {
		rangeDepth = DefaultDepth
	}
	if opts.Depth == 0 {
		opts.Depth = 1
		if local {
			opts.Depth = DefaultDepth
		}
	}
	if opts.Prefetch == 0 {
		opts.Prefetch = DefaultPrefetch
		if !local {
			opts.Prefetch = max(DefaultRemotePrefetch, opts.Fetch+1)
		}
	}
	if opts.Fetch == 0 {
		opts.Fetch = 1
		if !local {
			opts.Fetch = min(DefaultRemoteFetch, max(1, opts.Prefetch-1))
		}
	}
	if opts.Fetch > 1 && opts.Fetch >= opts.Prefetch {
		return nil, fmt.Errorf("shard: Fetch %d needs a Prefetch of more buffers (%d)", opts.Fetch, opts.Prefetch)
	}
	if opts.ReadSize == 0 {
		opts.ReadSize = DefaultReadSize
		if opts.Direct {
			opts.ReadSize = DefaultDirectReadSize
		}
		if !local {
			opts.ReadSize = DefaultRemoteReadSize
		}
	}
	l := &Loader{ds: d, opts: opts, rangeDepth: rangeDepth, claims: map[[2]int64]chan struct{}{}, fetch: opts.Fetch, alloc: opts.Alloc, naux: len(d.m.Label.Aux), fields: d.Fields(), sample: d.m.Sample.Shape, v: int(varDims(d.m.Sample.Shape))}
	switch opts.Order {
	case 0, OrderV2:
		l.v2 = true
		if err := opts.checkRestored(d.Len()); err != nil {
			return nil, err
		}
		var err error
		l.order, l.plan, err = EpochOrderV2(d.Len(), OrderV2Options{Shuffle: opts.Shuffle, Seed: opts.Seed, Epoch: opts.Epoch,
			BatchSize: opts.BatchSize, Rank: oo.Rank, World: oo.World, DropLast: opts.DropLast, Start: opts.Start})
		if err != nil {
			return nil, err
		}
		l.start, l.end = 0, int64(len(l.order))
	case OrderV1:
		lo, hi := RankRange(d.Len(), oo.Rank, oo.World)
		total := hi - lo
		if opts.Shuffle {
			var err error
			if l.order, err = EpochOrder(d.ShardCounts(), oo); err != nil {
				return nil, err
			}
		}
		l.lo = lo
		if opts.Start > total {
			return nil, fmt.Errorf("shard: start position %d is past the end of the epoch (%d records for rank %d of %d)", opts.Start, total, oo.Rank, oo.World)
		}
		l.start, l.end, l.pos = opts.Start, total, opts.Start
		if opts.DropLast {
			l.end = l.start + (total-l.start)/int64(opts.BatchSize)*int64(opts.BatchSize)
		}
	default:
		return nil, fmt.Errorf("shard: reading order version %d, want %d or %d", opts.Order, OrderV1, OrderV2)
	}

	// Size the buffers from the record size (the average one for variable-size records).
	avg := d.m.Sample.Size()
	l.recordSize = max(avg, 0)
	if len(l.fields) > 0 {
		avg, l.recordSize = -1, 0 // the records' sizes vary with their fields
	}
	if avg < 0 {
		avg = 1
		if d.NumShards() > 0 {
			r, err := d.Shard(0)
			if err != nil {
				return nil, err
			}
			if r.Len() > 0 {
				avg = max(1, r.DataSize()/int64(r.Len()))
			}
		}
	}
	batchBytes := avg * int64(opts.BatchSize)
	perSlot := int64(opts.BatchSize) * max(1, int64(opts.ReadSize)/batchBytes)
	perSlot = max(1, min(perSlot, l.end-l.start))
	l.perSlot = int(perSlot)
	bufSize := int(perSlot*avg + 3*Align)
	if !opts.SkipCRC && l.recordSize > 0 {
		// Room to read on to the end of the checksum block the buffer's last record is in
		// (part.ext): up to a block, which packer's writer keeps within BlockTarget.
		bufSize += int(min(BlockTarget, max(0, (BlockTarget/l.recordSize-1)*l.recordSize)))
	}

	l.files = make([]readerAtCloser, d.NumShards())
	l.direct = make([]bool, d.NumShards())
	l.free = make(chan *slot, opts.Prefetch)
	l.ready = make(chan *slot, opts.Prefetch)
	l.done = make(chan struct{})
	for range opts.Prefetch {
		s := &slot{offs: make([]int64, perSlot+1), labels: make([]int64, perSlot),
			aux: make([]int64, perSlot*int64(l.naux)), idx: make([]int64, perSlot)}
		if l.recordSize == 0 {
			s.dims = make([]int, perSlot*int64(l.v))
		}
		if len(l.fields) > 0 {
			s.flens = make([]uint32, perSlot*int64(len(l.fields)))
		}
		if err := l.allocBuf(s, bufSize); err != nil {
			l.Close()
			return nil, err
		}
		l.slots = append(l.slots, s)
		l.free <- s
	}
	l.wg.Add(1)
	go l.produce()
	return l, nil
}

// Len returns the number of records the Loader delivers in all (from Start to the end of the
// epoch, less a dropped last batch; under v2 with the padding of the last batch).
func (l *Loader) Len() int64 { return l.end - l.start }

// Batches returns the number of batches the Loader delivers in all; under v2 it is the same
// on every rank.
func (l *Loader) Batches() int64 {
	if l.v2 {
		return l.plan.Batches()
	}
	return (l.end - l.start + int64(l.opts.BatchSize) - 1) / int64(l.opts.BatchSize)
}

// State returns the v2 loader state after the batches handed out so far: saved with a
// checkpoint by any rank once the current batch is processed (every rank holds the same
// one), it resumes the epoch in a run of any number of ranks and workers (Restore). Under v1
// it has Order OrderV1 and cannot be restored; resume v1 with Position.
func (l *Loader) State() LoaderState {
	st := LoaderState{Version: LoaderStateVersion, Order: OrderV1, Seed: l.opts.Seed, Epoch: l.opts.Epoch, Position: l.pos}
	if l.v2 {
		st.Order, st.Position = OrderV2, l.plan.StateAfter(l.nbatches)
		st.Records, st.Shuffle = l.ds.Len(), l.opts.Shuffle
	}
	return st
}

// Restore sets the options to continue the epoch of a saved LoaderState: Order, Seed, Epoch
// and Start. The batch size, shuffle and drop-last settings must be the run's own: NewLoader
// refuses the options when the state's record count or shuffle setting is not the run's, and
// when they are reused for another epoch with the restored Start (set Start again, 0 for a
// whole epoch).
func (o *LoaderOptions) Restore(s LoaderState) error {
	if s.Version != LoaderStateVersion {
		return fmt.Errorf("shard: loader state version %d, this reader knows version %d", s.Version, LoaderStateVersion)
	}
	if s.Order != OrderV2 {
		return fmt.Errorf("shard: a loader state of reading order %d cannot be restored (only order %d states are independent of ranks and workers)", s.Order, OrderV2)
	}
	if s.Position < 0 {
		return fmt.Errorf("shard: loader state position %d is negative", s.Position)
	}
	o.Order, o.Seed, o.Epoch, o.Start = OrderV2, s.Seed, s.Epoch, s.Position
	o.restored = restoredRun{set: true, records: s.Records, shuffle: s.Shuffle, epoch: s.Epoch, start: s.Position}
	return nil
}

// restoredRun is what Restore keeps of a state for NewLoader to check against the run.
type restoredRun struct {
	set     bool
	records int64 // 0: not known (a state of an earlier reader)
	shuffle bool
	epoch   uint64 // the state's epoch and position: Start is that epoch's
	start   int64
}

// checkRestored refuses a restored state of a run over another number of records or with the
// other shuffle setting, and a Start restored for one epoch used for another (options reused
// for the next epoch without setting Start again).
func (o *LoaderOptions) checkRestored(n int64) error {
	r := o.restored
	if r.set && r.start != 0 && o.Start == r.start && o.Epoch != r.epoch {
		return fmt.Errorf("shard: Start %d was restored for epoch %d, these options read epoch %d: set Start for this epoch (0 to read it whole)", o.Start, r.epoch, o.Epoch)
	}
	if r.records == 0 {
		return nil
	}
	if r.records != n {
		return fmt.Errorf("shard: the loader state is of a dataset of %d records, this one has %d: its position does not continue this dataset's epoch", r.records, n)
	}
	if r.shuffle != o.Shuffle {
		return fmt.Errorf("shard: the loader state is of a run with shuffle %v, these options have shuffle %v: its position would select other records than the ones not read yet", r.shuffle, o.Shuffle)
	}
	return nil
}

// Position returns the epoch position after the current batch: the Start to resume from once
// the current batch has been processed. Under v1 it is this rank's own position (ORDER.md
// v1); under v2 it is the global position of State (records of the epoch consumed by all
// ranks together, the same on every rank).
func (l *Loader) Position() int64 {
	if l.v2 {
		return l.plan.StateAfter(l.nbatches)
	}
	return l.pos
}

// Locked reports whether the ring's buffers are locked in memory. It is false when Lock was not
// asked for, when the process may not lock that much memory, or when a custom Allocator is used
// (which then knows best).
func (l *Loader) Locked() bool {
	if l.closed {
		return l.locked
	}
	return l.alloc == nil && l.opts.Lock && len(l.slots) > 0 && l.unlocked.Load() == 0
}

// allocBuf gives s a buffer of n bytes from the Allocator or the Dataset's pool.
func (l *Loader) allocBuf(s *slot, n int) error {
	if l.alloc != nil {
		b, err := l.alloc.Alloc(n)
		if err != nil {
			return err
		}
		s.buf = b
		return nil
	}
	pb, err := l.ds.pool.get(n, l.opts.Lock)
	if pb.b == nil {
		return err
	}
	s.buf, s.locked = pb.b, pb.locked
	if l.opts.Lock && !s.locked {
		l.unlocked.Add(1)
	}
	return err
}

// freeBuf returns the buffer of s to the Allocator or the Dataset's pool.
func (l *Loader) freeBuf(s *slot) error {
	b := s.buf
	s.buf, s.data = nil, nil
	if b == nil {
		return nil
	}
	if l.alloc != nil {
		return l.alloc.Free(b)
	}
	if l.opts.Lock && !s.locked {
		l.unlocked.Add(-1)
	}
	return l.ds.pool.put(pooledBuf{b: b, locked: s.locked}, l.opts.Lock)
}

// DirectIO reports whether every read so far bypassed the page cache (O_DIRECT).
func (l *Loader) DirectIO() bool { return l.opts.Direct && !l.indirect.Load() }

// Next advances to the next batch and reports whether there is one. It returns false at the end
// of the epoch or on an error (see Err).
func (l *Loader) Next() bool {
	if l.err != nil || l.closed {
		return false
	}
	if s := l.cur; s != nil {
		if (l.curBatch+1)*l.opts.BatchSize < s.n {
			l.curBatch++
			l.setBatch()
			return true
		}
		l.cur = nil
		l.free <- s
	}
	s, ok := <-l.ready
	if !ok {
		return false
	}
	if s.err != nil {
		l.err = s.err
		l.free <- s
		return false
	}
	l.cur, l.curBatch = s, 0
	l.setBatch()
	return true
}

// setBatch also counts the batch as handed out.

func (l *Loader) setBatch() {
	l.nbatches++
	s := l.cur
	a := l.curBatch * l.opts.BatchSize
	b := min(a+l.opts.BatchSize, s.n)
	x, y := s.offs[a], s.offs[b]
	l.batch = Batch{
		Data:     s.data[x:y:y],
		Labels:   s.labels[a:b:b],
		Indices:  s.idx[a:b:b],
		Position: s.pos + int64(a),
		sample:   l.sample,
		v:        l.v,
		dtype:    l.ds.m.Sample.DType,
	}
	if l.naux > 0 {
		l.batch.Aux = s.aux[a*l.naux : b*l.naux : b*l.naux]
	}
	if l.recordSize == 0 {
		l.boffs = l.boffs[:0]
		for k := a; k <= b; k++ {
			l.boffs = append(l.boffs, s.offs[k]-x)
		}
		l.batch.Offsets = l.boffs
		l.batch.Dims = s.dims[a*l.v : b*l.v : b*l.v]
	}
	if nf := len(l.fields); nf > 0 {
		l.batch.fields = l.fields
		l.batch.fieldLens = s.flens[a*nf : b*nf : b*nf]
	}
	l.pos = s.pos + int64(b)
}

// Batch returns the current batch. Its slices are valid until the next call to Next or Close.
func (l *Loader) Batch() Batch { return l.batch }

// Err returns the error that ended the epoch early, or nil.
func (l *Loader) Err() error { return l.err }

// Close stops the prefetching goroutine, releases the buffers and closes the files. Batches
// handed out before are invalid after it.
func (l *Loader) Close() error {
	if l.closed {
		return nil
	}
	l.locked = l.Locked()
	l.closed = true
	if l.done != nil {
		close(l.done)
		l.wg.Wait()
	}
	l.cur = nil
	l.batch = Batch{}
	var err error
	for _, s := range l.slots {
		s.aio.close()
		s.aio = nil
		err = errors.Join(err, l.freeBuf(s))
	}
	for i, f := range l.files {
		if f != nil {
			err = errors.Join(err, f.Close())
			l.files[i] = nil
		}
	}
	return err
}

// produce fills free buffers in order and queues them, until the epoch ends, an error occurs
// or the Loader is closed. With Fetch > 1 it hands the fills to that many goroutines and
// queues the buffers in order as each is done.
func (l *Loader) produce() {
	defer l.wg.Done()
	defer close(l.ready)
	if l.fetch > 1 {
		l.produceConcurrently()
		return
	}
	for p := l.start; p < l.end; {
		var s *slot
		select {
		case s = <-l.free:
		case <-l.done:
			return
		}
		p1 := min(p+int64(l.perSlot), l.end)
		s.err = l.fill(s, p, p1)
		select {
		case l.ready <- s:
		case <-l.done:
			return
		}
		if s.err != nil {
			return
		}
		p = p1
	}
}

// fillJob is one buffer to fill with the records at positions [p0, p1); done is closed when
// it is.
type fillJob struct {
	s      *slot
	p0, p1 int64
	done   chan struct{}
}

// produceConcurrently is produce with l.fetch fills at once. Every goroutine it starts is in
// l.wg, so Close frees no buffer while a fill may still write into it.
func (l *Loader) produceConcurrently() {
	jobs := make(chan fillJob)
	order := make(chan fillJob, len(l.slots))
	for range l.fetch {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for j := range jobs {
				j.s.err = l.fill(j.s, j.p0, j.p1)
				close(j.done)
			}
		}()
	}
	l.wg.Add(1)
	go func() { // hand out the positions in order, a buffer each
		defer l.wg.Done()
		defer close(order)
		defer close(jobs)
		for p := l.start; p < l.end; {
			var s *slot
			select {
			case s = <-l.free:
			case <-l.done:
				return
			}
			j := fillJob{s: s, p0: p, p1: min(p+int64(l.perSlot), l.end), done: make(chan struct{})}
			order <- j // never blocks: it holds at most every buffer of the ring
			select {
			case jobs <- j:
			case <-l.done:
				close(j.done)
				return
			}
			p = j.p1
		}
	}()
	for j := range order {
		select {
		case <-j.done:
		case <-l.done:
			return
		}
		failed := j.s.err != nil // read before the buffer goes to the consumer, who reuses it
		select {
		case l.ready <- j.s:
		case <-l.done:
			return
		}
		if failed {
			return
		}
	}
}

// at returns the dataset record number at epoch position p.
func (l *Loader) at(p int64) int64 {
	if l.order != nil {
		return l.order[p]
	}
	return l.lo + p
}

// readerAtCloser is an open shard file of a Loader.
type readerAtCloser interface {
	io.ReaderAt
	io.Closer
}

// sharedFile is a shard Reader's file as a Loader's: the Loader's Close leaves it open.
type sharedFile struct{ io.ReaderAt }

func (sharedFile) Close() error { return nil }

// file returns the open file of shard s and whether it is read with O_DIRECT. A dataset on
// the local file system is read through descriptors of its own (O_DIRECT when asked), opened
// in the dataset's pinned directory and checked to be the file the shard's Reader checked;
// any other through the shard Reader's file.
func (l *Loader) file(s int) (readerAtCloser, bool, error) {
	l.filesMu.Lock()
	defer l.filesMu.Unlock()
	if f := l.files[s]; f != nil {
		return f, l.direct[s], nil
	}
	var (
		f      readerAtCloser
		direct bool
		err    error
	)
	if l.ds.pin == nil {
		// Through the FS (an object store): the very file the shard's Reader opened and
		// checked, so that no other version of the object is read.
		var r *Reader
		if r, err = l.ds.Shard(s); err == nil {
			f = sharedFile{r.r}
		}
	} else { // an npy array's end is not aligned: no O_DIRECT
		f, direct, err = l.ds.openLocal(s, l.opts.Direct && !l.ds.npy)
	}
	if err != nil {
		return nil, false, fmt.Errorf("open shard: %w", err)
	}
	if !direct {
		l.indirect.Store(true)
	}
	l.files[s], l.direct[s] = f, direct
	return f, direct, nil
}

// openPart opens part p's shard and sets its data range; the last part of a buffer, when its
// checksum block is still to be checked, is extended to the block's end (p.ext bytes, records
// up to p.extB), so that the block is checked from one read. It reports whether the shard is
// read with O_DIRECT.
func (l *Loader) openPart(p *part, last bool) (direct bool, err error) {
	r, err := l.ds.Shard(p.shard)
	if err != nil {
		return false, err
	}
	p.r = r
	p.off, p.len = r.DataRange(p.a, p.b)
	p.ext, p.extB = 0, p.b
	if !l.opts.SkipCRC && last {
		if eb := min((int64(p.b-1)/r.ft.k+1)*r.ft.k, int64(r.Len())); eb > int64(p.b) && !r.isVerified(int64(p.b-1)/r.ft.k) {
			p.extB = int(eb)
			p.ext = r.off(eb) - r.off(int64(p.b))
		}
	}
	_, direct, err = l.file(p.shard)
	return direct, err
}

// fill reads the records at positions [p0, p1) into s.
func (l *Loader) fill(s *slot, p0, p1 int64) error {
	n := int(p1 - p0)
	s.pos, s.n = p0, n
	for k := range n {
		s.idx[k] = l.at(p0 + int64(k))
	}
	// Group the records into runs of consecutive records of one shard.
	parts := s.parts[:0]
	for k := 0; k < n; {
		sh, local := l.ds.Locate(s.idx[k])
		end := l.ds.first[sh+1]
		j := k + 1
		for j < n && s.idx[j] == s.idx[j-1]+1 && s.idx[j] < end {
			j++
		}
		parts = append(parts, part{shard: sh, a: local, b: local + j - k, k: k})
		k = j
	}
	s.parts = parts
	if l.rangeReads(parts) {
		return l.fillRanges(s, n)
	}
	if l.opts.Shuffle && l.opts.Depth > 1 && len(parts) > 1 {
		err := l.fillConcurrently(s, n)
		if !errors.Is(err, errDirectFallback) {
			return err
		}
		// An O_DIRECT read was refused: the files now read through the page cache, and
		// the sequential path below reads the buffer again.
	}
	// Open what is needed and size the buffer: an O_DIRECT read lands at an aligned place at
	// or after the end of the data so far, and is moved down to it.
	need, cursor := 0, 0
	for i := range parts {
		p := &parts[i]
		direct, err := l.openPart(p, i == len(parts)-1)
		if err != nil {
			return err
		}
		if direct {
			start, end := p.off&^(Align-1), alignUp(p.off+p.len+p.ext)
			need = max(need, int(alignUp(int64(cursor))+end-start))
			if i == 0 {
				cursor = int(p.off - start)
			}
		} else {
			need = max(need, cursor+int(p.len+p.ext))
		}
		cursor += int(p.len)
	}
	if need > cap(s.buf) {
		if err := l.freeBuf(s); err != nil {
			return err
		}
		if err := l.allocBuf(s, int(alignUp(int64(need+need/4)))); err != nil {
			return err
		}
	}
	buf := s.buf[:cap(s.buf)]
	cursor, dataStart := 0, 0
	for i := range parts {
		p := &parts[i]
		p.len += p.ext // read the extension too; it is dropped again below
		at, err := l.readPart(p, buf, cursor, i == 0)
		p.len -= p.ext
		if err != nil {
			return err
		}
		if i == 0 {
			dataStart, cursor = at, at
		}
		if err := l.partMeta(s, p, int64(cursor-dataStart)); err != nil {
			return err
		}
		if !l.opts.SkipCRC {
			if err := p.r.verifyRange(int64(p.a), int64(p.extB), buf[cursor:cursor+int(p.len+p.ext)]); err != nil {
				return l.changedOr(p, err)
			}
		}
		cursor += int(p.len)
	}
	s.offs[n] = int64(cursor - dataStart)
	s.data = buf[dataStart:cursor]
	return nil
}

// partMeta fills the offsets, labels, aux values and shapes of the records of part p, whose
// data starts at at in the buffer's data.
func (l *Loader) partMeta(s *slot, p *part, at int64) error {
	base := p.r.off(int64(p.a))
	for rec := p.a; rec < p.b; rec++ {
		k := p.k + rec - p.a
		s.offs[k] = at + p.r.off(int64(rec)) - base
		s.labels[k] = p.r.Label(rec)
		if l.naux > 0 {
			p.r.auxInto(rec, s.aux[k*l.naux:(k+1)*l.naux])
		}
		if nf := len(l.fields); nf > 0 {
			for f := range nf {
				s.flens[k*nf+f] = uint32(p.r.fieldLen(rec, f))
			}
		}
		if s.dims != nil {
			dst := s.dims[k*l.v : (k+1)*l.v]
			if err := p.r.shapeDims(rec, dst); errors.Is(err, ErrShapeUnknown) {
				for j := range dst {
					dst[j] = -1 // a version-1 shard did not record it
				}
			} else if err != nil {
				return err
			}
		}
	}
	return nil
}

// anyChangedOr is changedOr for the files of all of parts.
func (l *Loader) anyChangedOr(parts []part, err error) error {
	var seen []int
	for i := range parts {
		if slices.Contains(seen, parts[i].shard) {
			continue
		}
		seen = append(seen, parts[i].shard)
		if cerr := l.changedOr(&parts[i], nil); cerr != nil {
			return cerr
		}
	}
	return err
}

// errDirectFallback reports that fillConcurrently met an O_DIRECT read the file system
// refused: the buffer is to be read again the sequential way, which falls back to the page
// cache.
var errDirectFallback = errors.New("shard: O_DIRECT read refused")

// noAIOForTests makes fillConcurrently read with goroutines, as where the kernel refuses an
// aio context (set by tests only, before any Loader starts).
var noAIOForTests bool

// fillConcurrently reads the parts of s (records [0, n) of the buffer, grouped by fill) with
// up to Depth reads in flight. Each part's read lands in a region of its own of the buffer
// (page-aligned for O_DIRECT), its checksum blocks are checked from the bytes read there (the
// reads of a block's other records, if any, go through the shard's file, as in fill), and
// then the parts are moved down, in buffer order, to lie back to back.
func (l *Loader) fillConcurrently(s *slot, n int) error {
	parts := s.parts
	type region struct {
		q, lead, rlen int64 // where the read lands, where the data starts in it, its length
		start         int64 // file offset of the read
		direct        bool
	}
	regs := make([]region, len(parts))
	var need int64
	// O_DIRECT reads are aligned to the sector, so that a 3072-byte record costs one
	// 3072-byte read (page alignment would read 4 or 8 KiB), unless the device refused that
	// alignment before.
	unit := int64(sector)
	if l.noSector.Load() {
		unit = Align
	}
	up := func(x int64) int64 { return (x + unit - 1) &^ (unit - 1) }
	for i := range parts {
		p := &parts[i]
		direct, err := l.openPart(p, i == len(parts)-1)
		if err != nil {
			return err
		}
		g := region{q: need, rlen: p.len + p.ext, start: p.off, direct: direct}
		if direct {
			g.start = p.off &^ (unit - 1)
			g.q, g.lead = up(need), p.off-g.start
			g.rlen = up(p.off+p.len+p.ext) - g.start
		}
		regs[i] = g
		need = g.q + g.rlen
	}
	if need > int64(cap(s.buf)) {
		if err := l.freeBuf(s); err != nil {
			return err
		}
		if err := l.allocBuf(s, int(alignUp(need+need/4))); err != nil {
			return err
		}
	}
	buf := s.buf[:cap(s.buf)]

	var (
		next     atomic.Int64
		fallback atomic.Bool
		errs     firstError
		wg       sync.WaitGroup
	)
	// Where every read is an O_DIRECT one, native asynchronous I/O keeps Depth reads in
	// flight from this goroutine; the checks then run on Depth goroutines.
	aio := false
	if s.aio == nil && !s.noAIO && !noAIOForTests {
		if s.aio = newAIO(l.opts.Depth); s.aio == nil {
			s.noAIO = true
		}
	}
	if s.aio != nil && s.aio.depth == l.opts.Depth {
		reads := make([]aioRead, 0, len(parts))
		for i := range parts {
			f, direct, err := l.file(parts[i].shard)
			if err != nil {
				return err
			}
			of, ok := f.(*os.File)
			if !direct || !regs[i].direct || !ok {
				break
			}
			g := regs[i]
			reads = append(reads, aioRead{fd: of.Fd(), buf: buf[g.q : g.q+g.rlen], off: g.start, name: l.ds.ShardPath(parts[i].shard)})
		}
		if len(reads) == len(parts) {
			aio = true
			if err := s.aio.readAll(reads); err != nil {
				if directUnsupported(err) {
					if unit == sector {
						l.noSector.Store(true)
					} else { // refused at page alignment too: read this slot with goroutines
						s.aio.close()
						s.aio, s.noAIO = nil, true
					}
					return errDirectFallback
				}
				return l.anyChangedOr(parts, err)
			}
		}
	}
	for range min(l.opts.Depth, len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !errs.failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(parts) {
					return
				}
				p, g := &parts[i], regs[i]
				if aio { // read already
					if !l.opts.SkipCRC {
						d := g.q + g.lead
						if err := p.r.verifyRange(int64(p.a), int64(p.extB), buf[d:d+p.len+p.ext]); err != nil {
							errs.set(err)
							return
						}
					}
					continue
				}
				f, direct, err := l.file(p.shard)
				if err != nil {
					errs.set(err)
					return
				}
				if direct != g.direct { // reopened through the page cache meanwhile
					fallback.Store(true)
					errs.set(errDirectFallback)
					return
				}
				if err := readFull(f, buf[g.q:g.q+g.rlen], g.start, l.ds.ShardPath(p.shard)); err != nil {
					if direct && directUnsupported(err) {
						// The sequential path reads the buffer again, at page alignment if
						// it was the sector alignment that was refused.
						if unit == sector {
							l.noSector.Store(true)
						}
						fallback.Store(true)
						err = errDirectFallback
					}
					errs.set(err)
					return
				}
				if !l.opts.SkipCRC {
					d := g.q + g.lead
					if err := p.r.verifyRange(int64(p.a), int64(p.extB), buf[d:d+p.len+p.ext]); err != nil {
						errs.set(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if fallback.Load() {
		return errDirectFallback
	}
	if err := errs.get(); err != nil {
		return l.anyChangedOr(parts, err)
	}
	// Every file read must still be what the shard's Reader opened: one check per shard of
	// the buffer, after its reads (a check per read would double the system calls of a
	// shuffled pass of small records).
	var seen []int // the buffer's shards: few
	for i := range parts {
		p := &parts[i]
		if slices.Contains(seen, p.shard) {
			continue
		}
		seen = append(seen, p.shard)
		if err := l.changedOr(p, nil); err != nil {
			return err
		}
	}
	dataStart := regs[0].q + regs[0].lead
	cursor := dataStart
	for i := range parts {
		p, g := &parts[i], regs[i]
		if src := g.q + g.lead; src != cursor {
			copy(buf[cursor:cursor+p.len], buf[src:src+p.len])
			l.moved.Add(p.len)
		}
		if err := l.partMeta(s, p, cursor-dataStart); err != nil {
			return err
		}
		cursor += p.len
	}
	s.offs[n] = cursor - dataStart
	s.data = buf[dataStart:cursor]
	l.overlap.Add(1)
	return nil
}

// sector is the smallest O_DIRECT alignment (of file offset, length and memory) that block
// devices accept: their logical block size is 512 bytes or more.
const sector = 512

// readPart reads part p into buf so that its data starts at cursor (or, for the first part of
// a buffer, wherever an aligned read puts it) and returns where the data starts.
func (l *Loader) readPart(p *part, buf []byte, cursor int, first bool) (int, error) {
	at, err := l.readPartAt(p, buf, cursor, first)
	if err != nil {
		return 0, l.changedOr(p, err)
	}
	// The file must still be what the shard's Reader opened: not written over in place since.
	if err := l.changedOr(p, nil); err != nil {
		return 0, err
	}
	return at, nil
}

// changedOr returns the error saying that the file of part p is no longer what its Reader
// opened (written over in place since), if it is not, and err otherwise: a read that came up
// short because the file was being rewritten reports the rewrite, not a truncated shard.
func (l *Loader) changedOr(p *part, err error) error {
	l.filesMu.Lock()
	f, _ := l.files[p.shard].(*os.File)
	l.filesMu.Unlock()
	if f != nil && p.r != nil {
		if cerr := p.r.unchanged(f); cerr != nil {
			return cerr
		}
	}
	return err
}

func (l *Loader) readPartAt(p *part, buf []byte, cursor int, first bool) (int, error) {
	f, direct, err := l.file(p.shard)
	if err != nil {
		return 0, err
	}
	name := l.ds.ShardPath(p.shard)
	if direct && !first && !l.noSector.Load() && p.off%sector == 0 && cursor%sector == 0 {
		// A part that starts a shard (its data section is page-aligned) after data ending
		// at a sector boundary, as with records of a multiple of 512 bytes: read it straight
		// into place. The fill sized the buffer for a page-aligned read, which is longer.
		// Where the device wants more than sector alignment, go the page-aligned way.
		n := (p.len + sector - 1) &^ (sector - 1)
		err := readFull(f, buf[cursor:cursor+int(n)], p.off, name)
		if err == nil {
			return cursor, nil
		}
		if !directUnsupported(err) {
			return 0, err
		}
		l.noSector.Store(true)
	}
	if direct {
		start, end := p.off&^(Align-1), alignUp(p.off+p.len)
		q := int(alignUp(int64(cursor)))
		err := readFull(f, buf[q:q+int(end-start)], start, name)
		if err == nil {
			src := q + int(p.off-start)
			if first {
				return src, nil
			}
			copy(buf[cursor:], buf[src:src+int(p.len)])
			l.moved.Add(p.len)
			return cursor, nil
		}
		if !directUnsupported(err) {
			return 0, err
		}
		// The file system took O_DIRECT at open but refuses the read: use the page cache.
		nf, _, err := l.ds.openLocal(p.shard, false)
		if err != nil {
			return 0, fmt.Errorf("open shard: %w", err)
		}
		f.Close()
		l.filesMu.Lock()
		l.files[p.shard], l.direct[p.shard], f = nf, false, nf
		l.filesMu.Unlock()
		l.indirect.Store(true)
	}
	if err := readFull(f, buf[cursor:cursor+int(p.len)], p.off, name); err != nil {
		return 0, err
	}
	return cursor, nil
}
