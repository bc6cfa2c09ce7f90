package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// benchGetSize and benchGetParallel shape the object-store baseline: a plain loop of ranged
// GETs, this many bytes each, this many in flight, over every object of the dataset.
const (
	benchGetSize     = 8 << 20
	benchGetParallel = 8
)

// runBenchRemote is bench for a dataset in object storage: the baseline is a plain parallel
// ranged-GET loop over the dataset's objects (benchGetParallel GETs of benchGetSize bytes in
// flight), what any client can pull from the store; the reader pass is the Loader reading
// through the object-store backend, as a trainer does. The two alternate --repeat times; the
// best of each is reported. --cache-dir gives the reader a local cache (storage.OpenOptions.CacheDir):
// the first pass fills it, the later ones read the copies.
func runBenchRemote(ctx context.Context, o *benchOptions) error {
	if o.Cold {
		return usagef(fmt.Errorf("%s: --cold evicts local files from the page cache; it does not apply to object storage", o.Dir))
	}
	b, _, err := openRemote(ctx, o.Dir, "")
	if err != nil {
		return err
	}
	m, err := readManifest(storage.ShardFS(ctx, b))
	if err != nil {
		return err
	}
	var rb storage.Backend = b
	if o.CacheDir != "" {
		if rb, _, err = openRemote(ctx, o.Dir, o.CacheDir); err != nil {
			return err
		}
	}
	d, err := shard.OpenDatasetFS(storage.ShardFS(ctx, rb), shard.ReaderOptions{})
	if err != nil {
		return err
	}
	defer d.Close()
	var raws, reads []benchResult
	bufs := make([][]byte, benchGetParallel)
	for i := range bufs {
		bufs[i] = make([]byte, benchGetSize)
	}
	for range o.Repeat {
		r, err := rawGets(ctx, b, m.Files, bufs)
		if err != nil {
			return err
		}
		raws = append(raws, r)
		l, err := readerPass(ctx, o, d)
		if err != nil {
			return err
		}
		reads = append(reads, l)
	}
	best := func(rs []benchResult) benchResult {
		sort.Slice(rs, func(i, j int) bool { return rs[i].seconds < rs[j].seconds })
		return rs[0]
	}
	raw, rd := best(raws), best(reads)
	ratio := (float64(rd.bytes) / rd.seconds) / (float64(raw.bytes) / raw.seconds)
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(benchSummary{
			Dataset: o.Dir, Records: m.Count, Files: len(m.Files), Bytes: raw.bytes, CRC: !o.NoCRC,
			Batch: o.Batch, Repeat: o.Repeat, RawSeconds: raw.seconds, RawGBps: raw.gbs(),
			ReaderSeconds: rd.seconds, ReaderGBps: rd.gbs(), SamplesPerSecond: float64(rd.records) / rd.seconds, Ratio: ratio,
		})
	}
	mode := "object store"
	if o.CacheDir != "" {
		mode += ", reader cache " + o.CacheDir
	}
	if o.NoCRC {
		mode += ", CRC not checked"
	} else {
		mode += ", CRC checked"
	}
	fmt.Fprintf(o.IO.Out, "bench %s: %s, %s, %s, %s, batch %d, best of %d\n",
		o.Dir, humanize.Count(m.Count, "record"), humanize.Count(len(m.Files), "file"), humanize.Bytes(raw.bytes), mode, o.Batch, o.Repeat)
	fmt.Fprintf(o.IO.Out, "  parallel ranged GETs: %8.3f GiB/s  (%.3fs; %d in flight, %d MiB each)\n", raw.gibs(), raw.seconds, benchGetParallel, benchGetSize>>20)
	fmt.Fprintf(o.IO.Out, "  packer reader       : %8.3f GiB/s  (%.3fs)  %.0f samples/s\n", rd.gibs(), rd.seconds, float64(rd.records)/rd.seconds)
	fmt.Fprintf(o.IO.Out, "  ratio reader/GETs   : %8.3f\n", ratio)
	return nil
}

// rawGets reads every byte of the files with ranged GETs of benchGetSize bytes,
// benchGetParallel at once, into the buffers bufs (one per GET in flight, reused from pass to
// pass, as the reader's ring is).
func rawGets(ctx context.Context, b storage.Backend, files []shard.FileEntry, bufs [][]byte) (benchResult, error) {
	type job struct {
		r   storage.Reader
		off int64
		n   int
	}
	start := time.Now()
	var readers []storage.Reader
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	jobs := make(chan job)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		total int64
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, buf := range bufs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				n, err := j.r.ReadAt(buf[:j.n], j.off)
				mu.Lock()
				total += int64(n)
				if err != nil && first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	func() {
		defer close(jobs)
		for i, fe := range files {
			if testHookRawOpen != nil {
				testHookRawOpen(ctx, i, false)
			}
			r, err := b.Open(ctx, fe.Path)
			if err != nil {
				mu.Lock()
				if first == nil { // else a GET failed first, and cancelled this open
					first = err
				}
				mu.Unlock()
				return
			}
			readers = append(readers, r)
			if testHookRawOpen != nil {
				testHookRawOpen(ctx, i, true)
			}
			for off := int64(0); off < r.Size(); off += benchGetSize {
				select {
				case jobs <- job{r, off, int(min(benchGetSize, r.Size()-off))}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	wg.Wait()
	if first != nil {
		return benchResult{}, first
	}
	return benchResult{seconds: time.Since(start).Seconds(), bytes: total}, nil
}

// testHookRawOpen, if set (by tests), is called by rawGets before (opened false) and after
// (opened true) it opens file i, before it sends that file's GETs.
var testHookRawOpen func(ctx context.Context, i int, opened bool)
