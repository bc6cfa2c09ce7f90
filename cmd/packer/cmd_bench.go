package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/shard"
)

type benchOptions struct {
	IO      *iostreams
	Dir     string
	Batch   int
	Cold    bool
	Direct  bool
	Shuffle bool
	Order   int // reading order version (shard.OrderV1, shard.OrderV2; 0: the loader's default)
	Repeat  int
	JSON    bool
	NoCRC   bool // skip the record data CRC-32C check (on by default, as in training)

	CacheDir string // object storage: the reader's local cache (storage.OpenOptions.CacheDir)

	ReadSizeFlag string // --read-size as given
	ReadSize     int    // bytes; 0: the loader's default
	Prefetch     int    // 0: the loader's default
	Depth        int    // reads in flight within a shuffled buffer; 0: the loader's default
}

func newBenchCommand(io *iostreams, runF func(context.Context, *benchOptions) error) *cobra.Command {
	opts := &benchOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "bench OUT",
		Short: "Read a packed dataset as a trainer would and compare with the raw disk",
		Long: `Bench reads the dataset in OUT the way a trainer does (the streaming batch reader, one
full pass) and, in the same run, reads the same files with plain large sequential reads,
the physical limit of this machine's data path. It prints samples/s, GB/s and the ratio
of the two, so you can tell at once whether the data path can feed your GPUs.

For a dataset in object storage (s3://bucket/prefix), the baseline is a plain loop of
parallel ranged GETs over the same objects (8 in flight, 8 MiB each), and the reader reads
through the store as a trainer does (--cache-dir gives it a local cache).

With --cold, both passes start with the files evicted from the page cache
(posix_fadvise DONTNEED) and read with O_DIRECT where the file system allows it;
otherwise the files are read once first so both passes run from the page cache.
The two passes alternate --repeat times and the best of each is reported.

The dataset is opened once, as a trainer does, and each reader pass is one epoch: its time
runs from creating the loader to closing it, so it includes setting up the ring buffers
(which the dataset keeps from one epoch to the next, as in training). The raw pass's time
includes opening and closing each file. The raw pass counts every byte of the files, the
reader pass the record bytes it hands out; each rate is bytes over its own time.

The reader pass checks the CRC-32C of every data block it reads, as the loader does by
default in training, so damaged records fail the bench with an error naming the shard and
records; --no-crc measures the reader without that check. Checked blocks are remembered by
the open dataset, so only the first pass pays for the check (as only a trainer's first epoch
does): use --repeat 1 to measure its cost.
` + exitStatusHelp,
		Example: `  packer bench fmnist
  packer bench --cold --batch 512 imagenet224`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if opts.Batch < 1 || opts.Repeat < 1 {
				return usagef(errors.New("--batch and --repeat must be at least 1"))
			}
			if opts.Prefetch < 0 || opts.Depth < 0 {
				return usagef(errors.New("--prefetch and --depth must not be negative"))
			}
			if s := opts.ReadSizeFlag; s != "" && s != "0" {
				n, err := humanize.ParseSize(s, humanize.MiB) // a bare number is MiB, as before
				if err != nil || n > math.MaxInt32 {
					return usagef(fmt.Errorf("--read-size: %q is not a size such as 8MiB of at most 2 GiB", s))
				}
				opts.ReadSize = int(n)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runBench(c.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Batch, "batch", 256, "records per batch")
	cmd.Flags().StringVar(&opts.CacheDir, "cache-dir", "", "for a dataset in object storage: a local folder the reader caches the objects in (the first pass fills it)")
	cmd.Flags().BoolVar(&opts.Cold, "cold", false, "evict the files from the page cache before each pass and read with O_DIRECT")
	cmd.Flags().BoolVar(&opts.Shuffle, "shuffle", false, "read in shuffled order (shard/ORDER.md)")
	cmd.Flags().IntVar(&opts.Order, "order", 0, "reading order version of shard/ORDER.md: 2 (keyed permutation of all records, the default) or 1 (shard shuffle plus shuffle buffer)")
	cmd.Flags().IntVar(&opts.Repeat, "repeat", 3, "alternating passes of each kind")
	cmd.Flags().StringVar(&opts.ReadSizeFlag, "read-size", "0", "records per reader buffer, a size such as 8MiB (a bare number is MiB; 0: the loader's default)")
	cmd.Flags().IntVar(&opts.Prefetch, "prefetch", 0, "buffers in the reader's ring (0: the loader's default)")
	cmd.Flags().IntVar(&opts.Depth, "depth", 0, "reads in flight at once within a shuffled reader buffer (0: the loader's default, 8 on a local file system)")
	cmd.Flags().BoolVar(&opts.NoCRC, "no-crc", false, "do not check the CRC-32C of the record data (checked by default)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the result as JSON on stdout")
	return cmd
}

type benchResult struct {
	seconds float64
	bytes   int64
	records int64
}

// gbs is the result's rate in GB/s (powers of 1000), as --json's field names say.
func (r benchResult) gbs() float64 { return float64(r.bytes) / r.seconds / 1e9 }

// gibs is the result's rate in GiB/s, for the text report.
func (r benchResult) gibs() float64 { return float64(r.bytes) / r.seconds / (1 << 30) }

func runBench(ctx context.Context, o *benchOptions) error {
	if remote(o.Dir) {
		return runBenchRemote(ctx, o)
	}
	if o.CacheDir != "" {
		return usagef(errors.New("--cache-dir is for a dataset in object storage (s3://bucket/prefix)"))
	}
	m, err := readManifestAt(ctx, o.Dir)
	if err != nil {
		return err
	}
	var paths []string
	for _, f := range m.Files {
		paths = append(paths, filepath.Join(o.Dir, filepath.FromSlash(f.Path)))
	}
	if !o.Cold {
		if _, err := rawRead(ctx, paths, false); err != nil { // warm the page cache
			return err
		}
	}
	fsys, err := datasetFS(ctx, o.Dir)
	if err != nil {
		return err
	}
	d, err := shard.OpenDatasetFS(fsys, shard.ReaderOptions{})
	if err != nil {
		return err
	}
	defer d.Close()
	var raws, reads []benchResult
	for i := 0; i < o.Repeat; i++ {
		if o.Cold {
			evict(paths)
		}
		r, err := rawRead(ctx, paths, o.Cold)
		if err != nil {
			return err
		}
		raws = append(raws, r)
		if o.Cold {
			evict(paths)
		}
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
	mode := "warm (page cache)"
	if o.Cold {
		mode = "cold (evicted, O_DIRECT)"
	}
	switch {
	case m.Format == shard.FormatNPY:
		mode += ", npy (no checksums; read through the page cache)"
	case o.NoCRC:
		mode += ", CRC not checked"
	default:
		mode += ", CRC checked"
	}
	ratio := (float64(rd.bytes) / rd.seconds) / (float64(raw.bytes) / raw.seconds)
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(benchSummary{
			Dataset: o.Dir, Records: m.Count, Files: len(paths), Bytes: raw.bytes, Cold: o.Cold, CRC: !o.NoCRC,
			Batch: o.Batch, Repeat: o.Repeat, RawSeconds: raw.seconds, RawGBps: raw.gbs(),
			ReaderSeconds: rd.seconds, ReaderGBps: rd.gbs(), SamplesPerSecond: float64(rd.records) / rd.seconds, Ratio: ratio,
		})
	}
	fmt.Fprintf(o.IO.Out, "bench %s: %s, %s, %s, %s, batch %d, best of %d\n",
		o.Dir, humanize.Count(m.Count, "record"), humanize.Count(len(paths), "file"), humanize.Bytes(raw.bytes), mode, o.Batch, o.Repeat)
	fmt.Fprintf(o.IO.Out, "  raw sequential read : %8.3f GiB/s  (%.3fs)\n", raw.gibs(), raw.seconds)
	fmt.Fprintf(o.IO.Out, "  packer reader       : %8.3f GiB/s  (%.3fs)  %.0f samples/s\n", rd.gibs(), rd.seconds, float64(rd.records)/rd.seconds)
	fmt.Fprintf(o.IO.Out, "  ratio reader/raw    : %8.3f\n", ratio)
	return nil
}

// benchSummary is bench's --json output: the best pass of each kind.
type benchSummary struct {
	Dataset          string  `json:"dataset"`
	Records          int64   `json:"records"`
	Files            int     `json:"files"`
	Bytes            int64   `json:"bytes"`
	Cold             bool    `json:"cold"`
	CRC              bool    `json:"crc_checked"`
	Batch            int     `json:"batch"`
	Repeat           int     `json:"repeat"`
	RawSeconds       float64 `json:"raw_seconds"`
	RawGBps          float64 `json:"raw_gb_per_second"`
	ReaderSeconds    float64 `json:"reader_seconds"`
	ReaderGBps       float64 `json:"reader_gb_per_second"`
	SamplesPerSecond float64 `json:"samples_per_second"`
	Ratio            float64 `json:"ratio_reader_raw"`
}

// rawRead reads every file sequentially in 4 MiB reads, the baseline a reader is compared with
// (what dd bs=4M does).
func rawRead(ctx context.Context, paths []string, direct bool) (benchResult, error) {
	const chunk = 4 << 20
	buf, err := unix.Mmap(-1, 0, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return benchResult{}, err
	}
	defer unix.Munmap(buf)
	start := time.Now()
	var total int64
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return benchResult{}, err
		}
		f, err := openMaybeDirect(p, direct)
		if err != nil {
			return benchResult{}, err
		}
		for {
			n, err := f.Read(buf)
			total += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return benchResult{}, fmt.Errorf("read %s: %w", p, err)
			}
		}
		f.Close()
	}
	return benchResult{seconds: time.Since(start).Seconds(), bytes: total}, nil
}

// openMaybeDirect opens p for reading, with O_DIRECT when direct is set and the file system
// allows it (fileutil.OpenDirect).
func openMaybeDirect(p string, direct bool) (*os.File, error) {
	if direct {
		f, _, err := fileutil.OpenDirect(p, os.O_RDONLY, 0)
		return f, err
	}
	return os.Open(p)
}

// evict drops the files' pages from the page cache.
func evict(paths []string) {
	for _, p := range paths {
		if f, err := os.Open(p); err == nil {
			_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
			f.Close()
		}
	}
}
