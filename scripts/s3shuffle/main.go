// Command s3shuffle compares, side by side in one run, the Go Loader's order-2 shuffled pass
// over a dataset in a bucket with a plain loop of parallel ranged GETs of the same records in
// the same order, one GET per record, as many in flight as the Loader keeps (Fetch × Depth).
// scripts/bench_s3.sh runs it against the test server:
//
//	go run ./scripts/s3shuffle [-repeat 3] [-batch 256] s3://bucket/prefix
//
// The Loader's first epoch of an opened dataset also reads each checksum block whole once,
// to check its CRC; it is reported on its own line. The repeats alternate the two (later
// epochs, other seeds' permutations) and the best of each is compared.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
)

func main() {
	repeat := flag.Int("repeat", 3, "passes of each")
	batch := flag.Int("batch", 256, "batch size")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: s3shuffle [-repeat N] [-batch B] s3://bucket/prefix")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *repeat, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "s3shuffle:", err)
		os.Exit(1)
	}
}

type rec struct {
	r   shard.RangeReaderAt
	off int64
	n   int
}

func run(url string, repeat, batch int) error {
	ctx := context.Background()
	u, err := s3.ParseURL(url)
	if err != nil {
		return err
	}
	b, err := s3.New(ctx, u, s3.Options{})
	if err != nil {
		return err
	}
	d, err := shard.OpenDatasetFS(storage.ShardFS(ctx, b), shard.ReaderOptions{})
	if err != nil {
		return err
	}
	defer d.Close()
	inFlight := shard.DefaultRemoteFetch * shard.DefaultDepth
	// The raw loop's records: each of the Loader's records, opened on their own.
	files := map[int]shard.RangeReaderAt{}
	for s := range d.NumShards() {
		f, err := b.Open(ctx, d.Manifest().Files[s].Path)
		if err != nil {
			return err
		}
		defer f.Close()
		ra, ok := f.(shard.RangeReaderAt)
		if !ok {
			return fmt.Errorf("%s: the backend's reader has no exact ranged reads", url)
		}
		files[s] = ra
	}
	loader := func(epoch uint64) (float64, int64, []int64, error) {
		start := time.Now()
		l, err := d.NewLoader(shard.LoaderOptions{BatchSize: batch, Shuffle: true, Seed: 1, Epoch: epoch})
		if err != nil {
			return 0, 0, nil, err
		}
		defer l.Close()
		var n int64
		var idx []int64
		for l.Next() {
			bt := l.Batch()
			n += int64(len(bt.Data))
			idx = append(idx, bt.Indices...)
		}
		if err := l.Err(); err != nil {
			return 0, 0, nil, err
		}
		return time.Since(start).Seconds(), n, idx, nil
	}
	records := func(idx []int64) ([]rec, error) {
		out := make([]rec, len(idx))
		for k, i := range idx {
			s, local := d.Locate(i)
			r, err := d.Shard(s)
			if err != nil {
				return nil, err
			}
			off, n := r.DataRange(local, local+1)
			out[k] = rec{files[s], off, int(n)}
		}
		return out, nil
	}
	raw := func(recs []rec) (float64, int64, error) {
		start := time.Now()
		var next atomic.Int64
		var total atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, inFlight)
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var buf []byte
				for {
					k := int(next.Add(1) - 1)
					if k >= len(recs) {
						return
					}
					rc := recs[k]
					if cap(buf) < rc.n {
						buf = make([]byte, rc.n)
					}
					n, err := rc.r.ReadRangeAt(buf[:rc.n], rc.off)
					if err != nil {
						errs <- err
						return
					}
					total.Add(int64(n))
				}
			}()
		}
		wg.Wait()
		select {
		case err := <-errs:
			return 0, 0, err
		default:
		}
		return time.Since(start).Seconds(), total.Load(), nil
	}
	m := d.Manifest()
	fmt.Printf("%s: %d records, %d files; %d batches of %d; %d GETs in flight\n", url, m.Count, len(m.Files), (m.Count+int64(batch)-1)/int64(batch), batch, inFlight)
	sec, n, _, err := loader(0)
	if err != nil {
		return err
	}
	fmt.Printf("  first epoch (blocks read whole once for their CRCs): loader %7.1f MB/s (%.2fs)\n", float64(n)/sec/1e6, sec)
	bestL, bestR := 0.0, 0.0
	for e := 1; e <= repeat; e++ {
		ls, ln, idx, err := loader(uint64(e))
		if err != nil {
			return err
		}
		recs, err := records(idx)
		if err != nil {
			return err
		}
		rs, rn, err := raw(recs)
		if err != nil {
			return err
		}
		lt, rt := float64(ln)/ls/1e6, float64(rn)/rs/1e6
		bestL, bestR = max(bestL, lt), max(bestR, rt)
		fmt.Printf("  epoch %d: loader %7.1f MB/s (%.2fs)   ranged GETs %7.1f MB/s (%.2fs)   ratio %.3f\n", e, lt, ls, rt, rs, lt/rt)
	}
	fmt.Printf("  best: loader %.1f MB/s, ranged GETs %.1f MB/s, ratio loader/GETs %.3f\n", bestL, bestR, bestL/bestR)
	return nil
}
