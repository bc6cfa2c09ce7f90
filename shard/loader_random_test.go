package shard

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLoaderRandomized runs Loaders with random options (batch size, read size, shuffle,
// O_DIRECT, rank/world, Start, DropLast, prefetch) over datasets whose record sizes make buffers
// cut checksum blocks (k = 4, 10 and 1, records larger than a block) and whose last shard is
// shorter than a block, and checks every batch against the records written and the epoch
// sequence ORDER.md defines.
func TestLoaderRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	shapes := [][]int{{256, 1024}, {100003, 1}, {3, 1 << 20}}
	for si, shape := range shapes {
		opts := WriterOptions{Sample: SampleSpec{Shape: shape, DType: Uint8, Layout: "hwc"}, Label: LabelSpec{DType: "int64", Aux: []string{"a"}}}
		n := 37
		if si == 2 {
			n = 9
		}
		recs := randomRecords(opts, n, uint64(si)+1)
		var counts []int
		for left := n; left > 0; {
			c := min(left, 1+rng.IntN(n/2))
			counts = append(counts, c)
			left -= c
		}
		dir := buildDataset(t, opts, recs, counts)
		for it := range 40 {
			o := LoaderOptions{
				Order:     1 + rng.IntN(2),
				BatchSize: 1 + rng.IntN(6),
				Shuffle:   rng.IntN(2) == 0,
				Seed:      rng.Uint64(),
				Epoch:     uint64(rng.IntN(3)),
				World:     1 + rng.IntN(3),
				Buffer:    1 + rng.IntN(20),
				DropLast:  rng.IntN(2) == 0,
				Prefetch:  1 + rng.IntN(4),
				ReadSize:  1 + rng.IntN(int(opts.Sample.Size())*8),
				Direct:    rng.IntN(2) == 0,
				Depth:     rng.IntN(5), // 0 (the default), 1 (one read at a time) .. 4
			}
			o.Fetch = rng.IntN(o.Prefetch) // 0 (one fill at a time) .. Prefetch-1
			o.Rank = rng.IntN(o.World)
			lo, hi := RankRange(int64(n), o.Rank, o.World)
			o.Start = rng.Int64N(hi - lo + 1)
			if o.Order == OrderV2 {
				o.Start = rng.Int64N(int64(n) + 1) // the global position
			}
			t.Run(fmt.Sprintf("shape%d/%d", si, it), func(t *testing.T) {
				d, err := OpenDataset(dir) // fresh: no block checked before
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				var want []int64
				if o.Order == OrderV2 {
					want, _, err = EpochOrderV2(d.Len(), OrderV2Options{Shuffle: o.Shuffle, Seed: o.Seed, Epoch: o.Epoch,
						BatchSize: o.BatchSize, Rank: o.Rank, World: o.World, DropLast: o.DropLast, Start: o.Start})
					if err != nil {
						t.Fatal(err)
					}
				} else {
					want, err = EpochOrder(d.ShardCounts(), OrderOptions{Shuffle: o.Shuffle, Seed: o.Seed, Epoch: o.Epoch, Rank: o.Rank, World: o.World, Buffer: o.Buffer})
					if err != nil {
						t.Fatal(err)
					}
					want = want[o.Start:]
					if o.DropLast {
						want = want[:len(want)/o.BatchSize*o.BatchSize]
					}
				}
				got, _ := runLoader(t, d, recs, o)
				if !slices.Equal(got, want) {
					t.Fatalf("%+v: indices %v, want %v", o, got, want)
				}
			})
		}
	}
}

// TestLoaderRandomizedCorruption damages one byte of one record and runs Loaders with random
// options over fresh Datasets: no record of the damaged checksum block is ever handed out, and
// a Loader whose sequence holds one ends with a checksum error.
func TestLoaderRandomizedCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{100003, 1}, DType: Uint8, Layout: "hwc"}} // k = 10
	const n, k = 45, 10
	recs := randomRecords(opts, n, 5)
	dir := buildDataset(t, opts, recs, []int{23, 22})
	for it := range 60 {
		bad := rng.IntN(n)
		shard, local := 0, bad
		if bad >= 23 {
			shard, local = 1, bad-23
		}
		blo := 0
		if shard == 1 {
			blo = 23
		}
		blo += local / k * k
		bhi := min(blo+k, n)
		if shard == 0 {
			bhi = min(bhi, 23)
		}
		o := LoaderOptions{
			Order:     OrderV1,
			BatchSize: 1 + rng.IntN(5),
			Shuffle:   rng.IntN(2) == 0,
			Seed:      rng.Uint64(),
			World:     1 + rng.IntN(2),
			Buffer:    1 + rng.IntN(20),
			Prefetch:  1 + rng.IntN(4),
			ReadSize:  1 + rng.IntN(100003*12),
			Direct:    rng.IntN(2) == 0,
			Depth:     rng.IntN(5),
		}
		o.Fetch = rng.IntN(o.Prefetch)
		o.Rank = rng.IntN(o.World)
		t.Run(fmt.Sprintf("%d", it), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("shard-%05d.pks", shard))
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b := slices.Clone(orig)
			b[Align+local*100003+rng.IntN(100003)] ^= 0x40
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(path, orig, 0o644)
			d, err := OpenDataset(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			seq, err := EpochOrder(d.ShardCounts(), OrderOptions{Shuffle: o.Shuffle, Seed: o.Seed, Rank: o.Rank, World: o.World, Buffer: o.Buffer})
			if err != nil {
				t.Fatal(err)
			}
			l, err := d.NewLoader(o)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for l.Next() {
				bt := l.Batch()
				for k, idx := range bt.Indices {
					if idx >= int64(blo) && idx < int64(bhi) {
						t.Fatalf("%+v: record %d of the damaged block [%d, %d) handed out", o, idx, blo, bhi)
					}
					if !slices.Equal(bt.Data[k*100003:(k+1)*100003], recs[idx].data) {
						t.Fatalf("%+v: record %d differs", o, idx)
					}
				}
			}
			touches := slices.ContainsFunc(seq, func(i int64) bool { return i >= int64(blo) && i < int64(bhi) })
			if touches && !errors.Is(l.Err(), ErrChecksum) {
				t.Fatalf("%+v: damaged record %d in the sequence, Err = %v", o, bad, l.Err())
			}
		})
	}
}

// TestVerifyRangeChecksGivenBytes checks that verifyRange checks the bytes it is given, not a
// second read of the file, also when they lie inside a block on both sides (a shuffled
// Loader's run of records): what the caller hands out must be what was checked.
func TestVerifyRangeChecksGivenBytes(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{256, 1024}, DType: Uint8, Layout: "hwc"}} // k = 4
	recs := randomRecords(opts, 12, 3)
	dir := buildDataset(t, opts, recs, []int{12})
	for _, c := range []struct{ i, j int }{{5, 6}, {5, 7}, {4, 6}, {6, 8}, {4, 8}, {3, 9}} {
		d, err := OpenDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.Shard(0)
		if err != nil {
			t.Fatal(err)
		}
		var data []byte
		for _, rec := range recs[c.i:c.j] {
			data = append(data, rec.data...)
		}
		if err := r.verifyRange(int64(c.i), int64(c.j), data); err != nil {
			t.Fatalf("records [%d, %d): %v", c.i, c.j, err)
		}
		d.Close()
		d, err = OpenDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		if r, err = d.Shard(0); err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 1 // as if the read that filled the buffer went wrong
		if err := r.verifyRange(int64(c.i), int64(c.j), data); !errors.Is(err, ErrChecksum) {
			t.Errorf("records [%d, %d) with a flipped byte: verifyRange = %v, want a checksum error", c.i, c.j, err)
		}
		d.Close()
	}
}

// TestLoaderDepthSameBatches reads shuffled epochs (orders 1 and 2, with and without O_DIRECT,
// records of a multiple of 512 bytes and of an odd size, several per checksum block) with one
// read at a time and with several in flight: the batches are the same records, their bytes the
// records written (runLoader), and a shuffled buffer of scattered records is read with several
// reads at once (moved counts the bytes laid back to back afterwards).
func TestLoaderDepthSameBatches(t *testing.T) {
	t.Run("aio", func(t *testing.T) { testLoaderDepthSameBatches(t, true) })
	// As where the kernel refuses an aio context: O_DIRECT reads from goroutines.
	noAIOForTests = true
	defer func() { noAIOForTests = false }()
	t.Run("goroutines", func(t *testing.T) { testLoaderDepthSameBatches(t, false) })
}

func testLoaderDepthSameBatches(t *testing.T, wantAIO bool) {
	for _, shape := range [][]int{{32, 32, 3}, {7, 13, 3}} {
		opts := WriterOptions{Sample: SampleSpec{Shape: shape, DType: Uint8, Layout: "hwc"}, Label: LabelSpec{DType: "int64", Aux: []string{"a"}}}
		recs := randomRecords(opts, 300, 5)
		dir := buildDataset(t, opts, recs, []int{120, 100, 80})
		for _, order := range []int{OrderV1, OrderV2} {
			for _, direct := range []bool{false, true} {
				var first []int64
				for _, depth := range []int{1, 2, 16} {
					d, err := OpenDataset(dir)
					if err != nil {
						t.Fatal(err)
					}
					o := LoaderOptions{Order: order, BatchSize: 16, Shuffle: true, Seed: 3, Direct: direct, Depth: depth, ReadSize: 64 * int(opts.Sample.Size())}
					l, err := d.NewLoader(o)
					if err != nil {
						t.Fatal(err)
					}
					var got []int64
					for l.Next() {
						b := l.Batch()
						n := len(b.Data) / b.Len()
						for k, idx := range b.Indices {
							if !bytes.Equal(b.Data[k*n:(k+1)*n], recs[idx].data) || b.Labels[k] != recs[idx].label {
								t.Fatalf("%v order %d direct %v depth %d: record %d differs", shape, order, direct, depth, idx)
							}
						}
						got = append(got, b.Indices...)
					}
					if err := l.Err(); err != nil {
						t.Fatal(err)
					}
					if ov := l.overlap.Load(); (ov > 0) != (depth > 1) {
						t.Fatalf("depth %d: %d buffers read with reads in flight together", depth, ov)
					}
					if direct && depth > 1 && l.DirectIO() {
						// O_DIRECT reads in flight go through native asynchronous I/O
						// where the kernel grants a context.
						if a := newAIO(1); a == nil {
							t.Log("no aio context here: the goroutine path was tested")
						} else {
							a.close()
							used := false
							for _, sl := range l.slots {
								used = used || sl.aio != nil
							}
							if used != wantAIO {
								t.Fatalf("depth %d, O_DIRECT: native asynchronous I/O used %v, want %v", depth, used, wantAIO)
							}
						}
					}
					l.Close()
					if first == nil {
						first = got
					} else if !slices.Equal(got, first) {
						t.Fatalf("%v order %d direct %v: depth %d gives indices %v, depth 1 %v", shape, order, direct, depth, got, first)
					}
					d.Close()
				}
				if len(first) != len(recs) {
					t.Fatalf("%v order %d: %d records, want %d", shape, order, len(first), len(recs))
				}
			}
		}
	}
}
