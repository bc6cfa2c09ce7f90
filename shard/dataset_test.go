package shard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// buildDataset writes recs into shards of the given record counts under a new directory, with
// a manifest, and returns the directory.
func buildDataset(t testing.TB, opts WriterOptions, recs []testRecord, counts []int) string {
	t.Helper()
	return buildDatasetWith(t, opts, counts, func(w *Writer, i int) error {
		r := recs[i]
		return w.AppendShape(r.data, r.shape, r.label, r.aux, r.meta)
	})
}

// buildDatasetWith is buildDataset with a function that appends record i.
func buildDatasetWith(t testing.TB, opts WriterOptions, counts []int, appendRec func(w *Writer, i int) error) string {
	t.Helper()
	dir := t.TempDir()
	m := &Manifest{Packer: "test", Format: "shards", FormatVersion: DatasetVersion(opts.Sample, opts.Fields), Sample: opts.Sample, Label: opts.Label, Fields: opts.Fields}
	next := 0
	for s, c := range counts {
		o := opts
		o.ShardIndex = s
		name := fmt.Sprintf("shard-%05d.pks", s)
		var buf bytes.Buffer
		w, err := NewWriter(&buf, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := next; i < next+c; i++ {
			if err := appendRec(w, i); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(buf.Bytes())
		m.Files = append(m.Files, FileEntry{Path: name, Size: int64(buf.Len()), SHA256: hex.EncodeToString(sum[:]), IndexSHA256: w.IndexSHA256(), Records: int64(c), FirstRecord: int64(next)})
		next += c
	}
	m.Count = int64(next)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

var fixedDatasetOpts = WriterOptions{Sample: SampleSpec{Shape: []int{8, 8, 3}, DType: Uint8, Layout: "hwc"}, Label: LabelSpec{DType: "int64", Aux: []string{"coarse"}}}

func TestDatasetRandomAccess(t *testing.T) {
	recs := randomRecords(fixedDatasetOpts, 100, 7)
	dir := buildDataset(t, fixedDatasetOpts, recs, []int{40, 1, 59})
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Len() != 100 || d.NumShards() != 3 || !slices.Equal(d.ShardCounts(), []int64{40, 1, 59}) {
		t.Fatalf("Len %d, shards %d, counts %v", d.Len(), d.NumShards(), d.ShardCounts())
	}
	for i := int64(99); i >= 0; i-- {
		got, err := d.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		lab, err := d.Label(i)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, recs[i].data) || lab != recs[i].label {
			t.Fatalf("record %d differs", i)
		}
	}
}

// loaderCase runs a Loader to the end and returns the batches' indices, and checks every
// record's bytes, label and aux values against recs.
func runLoader(t *testing.T, d *Dataset, recs []testRecord, opts LoaderOptions) (indices []int64, sizes []int) {
	t.Helper()
	l, err := d.NewLoader(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	base := opts.Start // v1: positions count the rank's epoch sequence; v2: from Start
	if opts.Order != OrderV1 {
		base = 0
	}
	for l.Next() {
		b := l.Batch()
		if b.Position != base+int64(len(indices)) {
			t.Fatalf("batch position %d, want %d", b.Position, base+int64(len(indices)))
		}
		sizes = append(sizes, b.Len())
		var off int64
		for k, idx := range b.Indices {
			want := recs[idx]
			var data []byte
			if b.Offsets != nil {
				data = b.Data[b.Offsets[k]:b.Offsets[k+1]]
			} else {
				n := int64(len(b.Data) / b.Len())
				data = b.Data[off : off+n]
				off += n
			}
			if !bytes.Equal(data, want.data) || b.Labels[k] != want.label {
				t.Fatalf("record %d (batch position %d+%d) differs", idx, b.Position, k)
			}
			if len(want.aux) > 0 && !slices.Equal(b.Aux[k*len(want.aux):(k+1)*len(want.aux)], want.aux) {
				t.Fatalf("record %d aux differs", idx)
			}
		}
		indices = append(indices, b.Indices...)
		if want := base + int64(len(indices)); opts.Order == OrderV1 && l.Position() != want {
			t.Fatalf("Position %d, want %d", l.Position(), want)
		} else if want := l.State().Position; opts.Order != OrderV1 && l.Position() != want {
			t.Fatalf("Position %d, want the state's global position %d", l.Position(), want)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	if int64(len(indices)) != l.Len() {
		t.Fatalf("delivered %d records, Len says %d", len(indices), l.Len())
	}
	return indices, sizes
}

func TestLoader(t *testing.T) {
	recs := randomRecords(fixedDatasetOpts, 300, 8)
	dir := buildDataset(t, fixedDatasetOpts, recs, []int{100, 7, 150, 43})
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	counts := d.ShardCounts()
	for _, shuffle := range []bool{false, true} {
		for _, direct := range []bool{false, true} {
			for _, bs := range []int{1, 7, 64, 512} {
				for _, readSize := range []int{1, 10000, 0} {
					name := fmt.Sprintf("shuffle=%v/direct=%v/batch=%d/read=%d", shuffle, direct, bs, readSize)
					t.Run(name, func(t *testing.T) {
						for world := 1; world <= 3; world += 2 {
							var all []int64
							for rank := range world {
								opts := LoaderOptions{Order: OrderV1, BatchSize: bs, Shuffle: shuffle, Seed: 9, Epoch: 1, Rank: rank, World: world,
									Buffer: 50, ReadSize: readSize, Direct: direct, Prefetch: 1 + rank, SkipCRC: bs != 7, Lock: true}
								got, sizes := runLoader(t, d, recs, opts)
								want, _ := EpochOrder(counts, OrderOptions{Shuffle: shuffle, Seed: 9, Epoch: 1, Rank: rank, World: world, Buffer: 50})
								if !slices.Equal(got, want) {
									t.Fatalf("rank %d/%d: order %v, want %v", rank, world, got, want)
								}
								for i, s := range sizes {
									if s != bs && i != len(sizes)-1 {
										t.Fatalf("batch %d has %d records", i, s)
									}
								}
								all = append(all, got...)
								// Resume in the middle equals the tail.
								if len(want) > 5 {
									opts.Start = int64(len(want)) / 3
									tail, _ := runLoader(t, d, recs, opts)
									if !slices.Equal(tail, want[opts.Start:]) {
										t.Fatalf("resume at %d: %v, want %v", opts.Start, tail, want[opts.Start:])
									}
								}
								opts.Start, opts.DropLast = 0, true
								dropped, sizes := runLoader(t, d, recs, opts)
								if len(dropped) != len(want)/bs*bs || (len(sizes) > 0 && sizes[len(sizes)-1] != bs) {
									t.Fatalf("DropLast delivered %d records in batches %v", len(dropped), sizes)
								}
							}
							slices.Sort(all)
							for i, x := range all {
								if x != int64(i) {
									t.Fatalf("world %d does not read every record once", world)
								}
							}
						}
					})
				}
			}
		}
	}
}

func TestLoaderVarSize(t *testing.T) {
	// A version-1 shard (no shapes part), which may hold an empty record.
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{-1, 3}, DType: Uint8, Layout: "thwc"}, HasMeta: true, NoShapes: true}
	recs := randomRecords(opts, 80, 9)
	recs[5].data, recs[5].shape = nil, nil // an empty record
	dir := buildDataset(t, opts, recs, []int{30, 50})
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, direct := range []bool{false, true} {
		for _, shuffle := range []bool{false, true} {
			got, _ := runLoader(t, d, recs, LoaderOptions{BatchSize: 6, Shuffle: shuffle, Seed: 3, Buffer: 10, Direct: direct, ReadSize: 20000})
			if len(got) != 80 {
				t.Fatalf("read %d records", len(got))
			}
		}
	}
}

// countingAlloc checks that the Loader frees what it allocates.
type countingAlloc struct {
	mu   sync.Mutex
	live map[*byte]int
	max  int
	def  MmapAllocator
}

func (a *countingAlloc) Alloc(n int) ([]byte, error) {
	b, err := a.def.Alloc(n)
	if err == nil {
		a.mu.Lock()
		a.live[&b[:1][0]] = n
		a.max = max(a.max, len(a.live))
		a.mu.Unlock()
	}
	return b, err
}

func (a *countingAlloc) Free(b []byte) error {
	a.mu.Lock()
	delete(a.live, &b[:1][0])
	a.mu.Unlock()
	return a.def.Free(b)
}

func TestLoaderAllocatorAndClose(t *testing.T) {
	recs := randomRecords(fixedDatasetOpts, 200, 10)
	dir := buildDataset(t, fixedDatasetOpts, recs, []int{200})
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a := &countingAlloc{live: map[*byte]int{}}
	l, err := d.NewLoader(LoaderOptions{BatchSize: 3, ReadSize: 1, Prefetch: 3, Alloc: a})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5 && l.Next(); i++ { // stop early: Close must stop the producer
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(a.live) != 0 || a.max != 3 {
		t.Errorf("allocations live after Close: %d (max %d, want 3)", len(a.live), a.max)
	}
	if l.Next() {
		t.Error("Next after Close")
	}
	if _, err := d.NewLoader(LoaderOptions{BatchSize: 0}); err == nil {
		t.Error("batch size 0 accepted")
	}
	if _, err := d.NewLoader(LoaderOptions{BatchSize: 1, Start: 201}); err == nil {
		t.Error("start past the end accepted")
	}
}

func TestLoaderCorruption(t *testing.T) {
	// Block 1 holds records 4-7. With batches of 2 or 3 and one batch per buffer, buffers cut
	// blocks, so the damaged byte lies in the part of the block the buffer holds, or in the
	// part the check reads from the file, or in a head checked with the previous buffer.
	for _, rec := range []int{4, 5, 6, 7} {
		for _, bs := range []int{2, 3} {
			t.Run(fmt.Sprintf("record%d/batch%d", rec, bs), func(t *testing.T) { testLoaderCorruption(t, rec, bs) })
		}
	}
}

func testLoaderCorruption(t *testing.T, rec, batch int) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{256, 1024}, DType: Uint8, Layout: "hwc"}} // k = 4
	recs := randomRecords(opts, 12, 11)
	dir := buildDataset(t, opts, recs, []int{12})
	path := filepath.Join(dir, "shard-00000.pks")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[Align+rec*(256<<10)+3] ^= 1 // block 1 (records 4-7)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, shuffle := range []bool{false, true} {
		l, err := d.NewLoader(LoaderOptions{BatchSize: batch, Shuffle: shuffle, ReadSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		for l.Next() {
			for _, idx := range l.Batch().Indices {
				if idx >= 4 && idx < 8 {
					t.Fatalf("record %d of the damaged block handed out", idx)
				}
			}
		}
		var ce *CorruptionError
		if !errors.As(l.Err(), &ce) || !errors.Is(l.Err(), ErrChecksum) || ce.Record != 4 || ce.Records != 4 || ce.Path != path {
			t.Errorf("Err = %v, want a checksum error for records 4-7 of %s", l.Err(), path)
		}
		l.Close()
	}
	if _, err := d.Record(5); !errors.Is(err, ErrChecksum) {
		t.Errorf("Record(5) = %v", err)
	}
}

// TestLoaderDirectInPlace reads records of a multiple of 512 bytes with O_DIRECT, with buffers
// that span shard boundaries: each shard's part is read straight into place, nothing moved.
func TestLoaderDirectInPlace(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{16, 16, 2}, DType: Uint8, Layout: "hwc"}}
	recs := randomRecords(opts, 240, 13)
	dir := buildDataset(t, opts, recs, []int{100, 37, 3, 100})
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, bs := range []int{1, 7, 64} {
		o := LoaderOptions{BatchSize: bs, ReadSize: 60 * 512, Direct: true, Prefetch: 2}
		got, _ := runLoader(t, d, recs, o)
		if len(got) != len(recs) {
			t.Fatalf("batch %d: read %d records", bs, len(got))
		}
		l, err := d.NewLoader(o)
		if err != nil {
			t.Fatal(err)
		}
		for l.Next() {
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("batch %d: O_DIRECT %v, sector-aligned reads refused %v, %d bytes moved", bs, l.DirectIO(), l.noSector.Load(), l.moved.Load())
		if l.DirectIO() && !l.noSector.Load() && l.moved.Load() != 0 {
			t.Errorf("batch %d: %d bytes moved after O_DIRECT reads", bs, l.moved.Load())
		}
		l.Close()
	}
}

func bufPtrs(l *Loader) map[*byte]bool {
	m := map[*byte]bool{}
	for _, s := range l.slots {
		m[&s.buf[:1][0]] = true
	}
	return m
}

// TestLoaderReusesRing checks that the default allocator's ring goes from one Loader of a
// Dataset to the next, and that the Dataset keeps no more than its Loaders held at once.
func TestLoaderReusesRing(t *testing.T) {
	recs := randomRecords(fixedDatasetOpts, 300, 14)
	dir := buildDataset(t, fixedDatasetOpts, recs, []int{100, 200})
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	o := LoaderOptions{BatchSize: 10, ReadSize: 5000, Prefetch: 3, Lock: true}
	l1, err := d.NewLoader(o)
	if err != nil {
		t.Fatal(err)
	}
	first := bufPtrs(l1)
	locked := l1.Locked()
	l1.Close()
	if l1.Locked() != locked {
		t.Error("Locked changed at Close")
	}
	for epoch := range 3 {
		o.Epoch, o.Shuffle = uint64(epoch), epoch > 0
		l, err := d.NewLoader(o)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(bufPtrs(l), first) {
			t.Fatalf("epoch %d: the ring was not reused", epoch)
		}
		if l.Locked() != locked {
			t.Errorf("epoch %d: Locked %v, the first Loader's %v", epoch, l.Locked(), locked)
		}
		l.Close()
		got, _ := runLoader(t, d, recs, o)
		if len(got) != len(recs) {
			t.Fatalf("read %d records", len(got))
		}
	}
	// Two Loaders at once: the second maps its own ring; both are kept, within the peak.
	a, _ := d.NewLoader(o)
	b, _ := d.NewLoader(o)
	for _, x := range []*Loader{a, b} {
		for x.Next() {
		}
	}
	a.Close()
	b.Close()
	p := &d.pool
	if p.inUse != 0 || p.spareBytes > p.peak || len(p.spare[1]) != 6 {
		t.Errorf("pool: %d in use, %d spare in %d buffers, peak %d", p.inUse, p.spareBytes, len(p.spare[1]), p.peak)
	}
	// A Loader without Lock does not take locked buffers; one with a larger ring frees spare
	// buffers that do not fit so that the total stays within the peak.
	c, _ := d.NewLoader(LoaderOptions{BatchSize: 10, ReadSize: 5000, Prefetch: 3})
	for _, s := range c.slots {
		if s.locked || c.Locked() {
			t.Error("a Loader without Lock took locked buffers")
		}
	}
	if p.inUse+p.spareBytes > p.peak {
		t.Errorf("pool above its peak: %d in use, %d spare, peak %d", p.inUse, p.spareBytes, p.peak)
	}
	big, _ := d.NewLoader(LoaderOptions{BatchSize: 300, Prefetch: 4, Lock: true})
	if p.inUse+p.spareBytes > p.peak {
		t.Errorf("pool above its peak: %d in use, %d spare, peak %d", p.inUse, p.spareBytes, p.peak)
	}
	big.Close()
	c.Close()
	if err := d.ReleaseBuffers(); err != nil || p.spareBytes != 0 || len(p.spare[0])+len(p.spare[1]) != 0 {
		t.Errorf("ReleaseBuffers: %v, %d bytes left", err, p.spareBytes)
	}
	// Buffers of a Loader closed after the Dataset are freed, not kept.
	e, _ := d.NewLoader(o)
	d.Close()
	e.Close()
	if p.spareBytes != 0 || p.inUse != 0 {
		t.Errorf("after Close: %d spare, %d in use", p.spareBytes, p.inUse)
	}
}
