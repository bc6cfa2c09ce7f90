package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/spf13/cobra"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/internal/progress"
	"github.com/packer-dev/packer/output/hdf5"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/verify"
)

type verifyOptions struct {
	IO      *iostreams
	Dir     string
	JSON    bool
	Workers int
	Strict  bool
}

func newVerifyCommand(io *iostreams, runF func(context.Context, *verifyOptions) error) *cobra.Command {
	opts := &verifyOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "verify OUT",
		Short: "Check every file of a packed dataset against its manifest",
		Long: `Verify checks the dataset in OUT against OUT/manifest.json: that every listed file exists
with the listed size and SHA-256, which files are present that the manifest does not list
(a warning, since no reader opens them; with --strict a fault), and the internal
structure of every file: for shards the header, index and footer checksums and the CRC-32C
of every block of records (naming the damaged record range); for npy and hdf5 the array
headers, shapes, dtypes and counts. It first checks manifest.json's own SHA-256
(manifest_sha256), then every manifest field the data can confirm: count, class_counts and
the label range from the labels, class names, label and sample specs, the source, transform
and packer version stored in the data files, format_version. It reports every fault, not
only the first.

Damaged records are numbered across the dataset (record 0 is the first record of the first
shard), as the readers number them; for a shard the text report adds the range inside the
shard ("records 1200-1299 (shard-00003.pks records 200-299)"), and --json gives it as
shard_first_record beside first_record and records. python3 -m packer_reader verify prints
the same numbers.
` + exitStatusHelp,
		Example: `  packer verify fmnist
  packer verify --json fmnist > report.json
  packer verify --strict fmnist          # a file the manifest does not list fails too
  packer verify s3://bucket/fmnist       # AWS settings from the environment / profile`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runVerify(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report as JSON on stdout")
	cmd.Flags().IntVar(&opts.Workers, "workers", 2, "files checked at once")
	cmd.Flags().BoolVar(&opts.Strict, "strict", false, "fail on files the manifest does not list (by default a warning)")
	return cmd
}

func runVerify(ctx context.Context, o *verifyOptions) error {
	// Nothing to read is a failure (exit 1), not corrupt data (exit 3): a mistyped path must not
	// read as a damaged dataset. A directory that holds data files but no manifest is a damaged
	// dataset, and verify.Dir reports it as such.
	store, err := openStore(ctx, o.Dir)
	if err != nil {
		return err
	}
	if remote(o.Dir) {
		if err := checkRemoteDataset(ctx, store, o.Dir); err != nil {
			return err
		}
	} else if why := buildLeftover(o.Dir); why != "" {
		return fmt.Errorf("%s", why)
	} else if _, err := os.Stat(filepath.Join(o.Dir, shard.ManifestName)); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if _, derr := os.Stat(o.Dir); derr != nil {
			return fmt.Errorf("%s: no such dataset: %w", o.Dir, derr)
		}
		if !holdsDataFiles(o.Dir) {
			return fmt.Errorf("%s: not a packed dataset: it has no %s and no data files", o.Dir, shard.ManifestName)
		}
	}
	var bar *progress.Bar
	total := int64(-1)
	if m, err := readManifestQuiet(o.Dir); err == nil {
		// A library the format needs at run time (libhdf5) that is missing is this machine's
		// fault, not the dataset's: exit 1, not "corrupt".
		if f, ok := outputNamed(m.Format); ok && f.needs != nil {
			if err := f.needs(); err != nil {
				return fmt.Errorf("%s: cannot check a %s dataset: %w", o.Dir, m.Format, err)
			}
		}
		total = 0
		for _, f := range m.Files {
			total += f.Size
		}
	}
	bar = progress.New(o.IO.Err, "verifying", "bytes", total)
	workers := o.Workers
	if workers <= 0 {
		workers = 2 // verify.Dir's default
	}
	defer raiseProcs(workers)()
	rep, err := verify.Backend(ctx, store, o.Dir, verify.Options{Workers: o.Workers, Progress: bar.Set, Strict: o.Strict}, formatCheckers())
	bar.Finish()
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		for _, f := range rep.Faults {
			fmt.Fprintln(o.IO.Out, f.String())
		}
		for _, f := range rep.Warnings {
			fmt.Fprintln(o.IO.Out, "warning: "+f.String())
		}
		if len(rep.Warnings) > 0 {
			fmt.Fprintf(o.IO.Out, "%s: %s the manifest does not list (no reader opens them; --strict makes them faults)\n", o.Dir, humanize.Count(len(rep.Warnings), "file"))
		}
		if rep.OK {
			order := ""
			if rep.ShuffleSeed != nil {
				order = fmt.Sprintf(", written in the order of --shuffle --seed %d", *rep.ShuffleSeed)
			}
			match := "match"
			if rep.Count == 1 {
				match = "matches"
			}
			fmt.Fprintf(o.IO.Out, "ok: %s: %s in %s (%s) %s the manifest%s\n",
				o.Dir, humanize.Count(rep.Count, "record"), fileCount(rep.Files, rep.Format), humanize.Bytes(rep.Bytes), match, order)
		} else {
			fmt.Fprintf(o.IO.Out, "CORRUPT: %s: %s\n", o.Dir, humanize.Count(len(rep.Faults), "fault"))
		}
	}
	if !rep.OK {
		return fmt.Errorf("%w: %s: %s%s", errCorrupt, o.Dir, humanize.Count(len(rep.Faults), "fault"), map[bool]string{true: "", false: " (see above)"}[o.JSON])
	}
	return nil
}

// Each file verify checks at once has a reader goroutine that spends most of its time blocked
// in O_DIRECT reads, and a goroutine blocked in a system call keeps its P (the runtime's
// permission to run Go code) until the runtime's monitor takes it back, which can be
// milliseconds later. With GOMAXPROCS at the number of cores, the hashing goroutines then wait
// for a P while a core is idle: measured on 2 cores, verify kept 1.4 of them busy. raiseProcs
// adds one P per file in flight for the duration of a check, unless GOMAXPROCS is set in the
// environment, and returns the function that undoes it. Concurrent checks (tests) share the
// raise.
func raiseProcs(extra int) (restore func()) {
	if os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	procs.Lock()
	defer procs.Unlock()
	if procs.extra == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.extra += extra
	runtime.GOMAXPROCS(procs.base + procs.extra)
	return func() {
		procs.Lock()
		defer procs.Unlock()
		procs.extra -= extra
		runtime.GOMAXPROCS(procs.base + procs.extra)
	}
}

var procs struct {
	sync.Mutex
	base, extra int
}

// checkRemoteDataset is the object store's version of the checks above: a location without a
// manifest and without data objects is no dataset (exit 1), as are a missing bucket and
// refused credentials; objects named like data files without a manifest are a damaged
// dataset (or an interrupted build's leftovers), which verify.Backend reports.
func checkRemoteDataset(ctx context.Context, store storage.Backend, loc string) error {
	_, err := store.Stat(ctx, shard.ManifestName)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	data := false
	lerr := store.List(ctx, func(fi storage.FileInfo) error {
		for _, pat := range dataFilePatterns {
			if ok, _ := path.Match(pat, fi.Name); ok {
				data = true
				return errStop
			}
		}
		return nil
	})
	if lerr != nil && !errors.Is(lerr, errStop) {
		return lerr
	}
	if !data {
		return fmt.Errorf("%s: not a packed dataset: it has no %s and no data files (%v)", loc, shard.ManifestName, err)
	}
	return nil
}

var errStop = errors.New("stop")

// dataFilePatterns are the names of a dataset's data files.
var dataFilePatterns = []string{"shard-*.pks", "*.npy", "*.h5"}

// holdsDataFiles reports whether dir holds a file named like a dataset's data files.
func holdsDataFiles(dir string) bool {
	for _, pat := range dataFilePatterns {
		if m, _ := filepath.Glob(filepath.Join(dir, pat)); len(m) > 0 {
			return true
		}
	}
	return false
}

// fileCount says how many data files of a format verify checked: "1 shard file", "8 shard
// files", "2 npy files", "1 HDF5 file".
func fileCount(n int, format string) string {
	kind := map[string]string{shard.FormatShards: "shard", hdf5.Format: "HDF5"}[format]
	if kind == "" {
		kind = format
	}
	return humanize.Count(n, kind+" file")
}
