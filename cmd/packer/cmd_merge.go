package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/internal/progress"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/verify"
)

type mergeOptions struct {
	IO      *iostreams
	Out     string
	Parts   []string
	Force   bool
	Workers int
}

func newMergeCommand(io *iostreams, runF func(context.Context, *mergeOptions) error) *cobra.Command {
	opts := &mergeOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "merge -o OUT PART...",
		Short: "Join the parts of a build split with --part into one dataset",
		Long: `Merge joins the parts of a build run as N parts (packer build SRC -o PART --part I/N) into OUT,
byte-identical to what packer build SRC -o OUT with the same options writes: every shard,
array and the manifest.

It first checks that the parts make one dataset: one of each part 0..N-1 (a missing or
duplicated part is named), all built by this packer version from one source listing (the
digest each part records) with the same options. --max-errors is checked over all parts. Then
it writes the records of the parts in order through the format the parts were built for
(--format of the build), with the build's guarantees: OUT.packer-partial staging, the manifest
last, an atomic commit, and --force to replace an existing OUT. Each part is verified like
packer verify does (every file's size and SHA-256, every shard's structure and checksums) in the
same sequential read that copies it: a damaged part is refused (exit status 3, naming the part)
and nothing is published. The parts are only read. See docs/cluster.md.
` + exitStatusHelp,
		Example: `  # four parts, on four machines or as a Slurm array, then one merge
  packer build ~/imagenet/train -o parts/p0 --part 0/4 --resize 256 --crop 224
  ...
  packer merge -o in224 parts/p0 parts/p1 parts/p2 parts/p3`,
		Args: argsUsage(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Parts = args
			if opts.Out == "" {
				return usagef(errors.New("--out (-o) is required"))
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runMerge(c.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Out, "out", "o", "", "output directory, or s3://bucket/prefix (merged locally under $TMPDIR, then uploaded) (required)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "replace an existing non-empty OUT (atomically, when the merge completes)")
	cmd.Flags().IntVar(&opts.Workers, "workers", 2, "ignored: a part is verified as it is read, one file at a time, in order")
	_ = cmd.Flags().MarkHidden("workers")
	return cmd
}

func runMerge(ctx context.Context, o *mergeOptions) (err error) {
	// Parts in object storage are copied to a local folder first (the merge checks each copy
	// against its manifest as it reads it, so the bytes are checked end to end); an
	// object-store OUT is merged locally and then published like a build.
	dirs, out := slices.Clone(o.Parts), o.Out
	for _, p := range dirs {
		if locations.Overlap(out, p) {
			return usagef(fmt.Errorf("merge into %s: %w: it is the part %s, or lies in or around it", out, pipeline.ErrOutputOverlap, p))
		}
	}
	var tmp string
	if slices.ContainsFunc(dirs, remote) || remote(out) {
		mstage, terr := newStaging("packer-s3-merge-*", o.IO.Err)
		if terr != nil {
			return fmt.Errorf("the local staging folder: %w", terr)
		}
		defer mstage.Remove()
		tmp = mstage.Dir
	}
	out, publish, done, err := openTarget(ctx, out, o.Force, o.IO.Err)
	if err != nil {
		return err
	}
	defer done()
	for i, p := range dirs {
		if !remote(p) {
			continue
		}
		local := filepath.Join(tmp, fmt.Sprintf("part-%d", i))
		if err := fetchDataset(ctx, p, local, o.IO.Err); err != nil {
			return err
		}
		dirs[i] = local
		defer func() { err = withURLNames(err, local, p) }()
	}
	// No part may be rebuilt while it is checked and read.
	release, err := pipeline.LockParts(dirs)
	if err != nil {
		return err
	}
	defer release()
	parts, err := pipeline.ReadParts(dirs, outputNames(false))
	if err != nil {
		return err
	}
	for k, m := range parts.Manifests {
		if locations.Overlap(o.Out, m.Part.Source) {
			return usagef(fmt.Errorf("merge into %s: %w: it is %s, the source part %s was built from, or lies in or around it", o.Out, pipeline.ErrOutputOverlap, m.Part.Source, o.Parts[k]))
		}
	}
	info := parts.Info()
	entry, err := outputFor(info.Format)
	if err != nil {
		return fmt.Errorf("the parts name --format %s: %w", info.Format, err)
	}
	// A field the format cannot hold is refused before anything is merged, as a build refuses
	// it: exit 2.
	for _, m := range parts.Manifests {
		if err := entry.CheckFields(m.Fields); err != nil {
			return usagef(fmt.Errorf("merge into %s: the parts name %w", o.Out, err))
		}
	}
	var total int64
	for _, m := range parts.Manifests {
		total += m.Count
	}
	bar := progress.New(o.IO.Err, "merging", "records", total)
	sum, err := pipeline.Merge(ctx, parts, pipeline.MergeOptions{
		Parts: parts.Dirs, Output: entry, Out: out, Force: o.Force, Formats: outputNames(false),
		Progress: func(records, _ int64) { bar.Set(records) },
		CheckPart: func(ctx context.Context, dir string, tee func(shard.FileEntry) io.Writer) ([]string, error) {
			// Parts are shards: no format checker is needed. A merge is a copy: it reads the
			// parts through the page cache, as cp does. Strict: a part is packer's own output,
			// so a file its manifest does not list there is a fault, as it was before verify
			// made such files warnings.
			rep, err := verify.Dir(ctx, dir, verify.Options{Tee: tee, Cached: true, Strict: true}, nil)
			if err != nil {
				return nil, err
			}
			var faults []string
			for _, f := range rep.Faults {
				faults = append(faults, f.String())
			}
			return faults, nil
		},
	})
	bar.Finish()
	if pe := (*pipeline.PartError)(nil); errors.As(err, &pe) {
		for _, f := range pe.Faults {
			fmt.Fprintln(o.IO.Err, f)
		}
		return fmt.Errorf("%w: part %s: %s (see above); rebuild that part", errCorrupt, pe.Dir, humanize.Count(len(pe.Faults), "fault"))
	}
	if err != nil {
		err = fmt.Errorf("merge into %s: %w", o.Out, err)
		if errors.Is(err, pipeline.ErrOutputOverlap) || errors.Is(err, pipeline.ErrOutputMount) {
			return usagef(err)
		}
		return err
	}
	if publish != nil {
		if err := publish(sum.Out); err != nil {
			return fmt.Errorf("merge into %s: %w", o.Out, err)
		}
		sum.Out = o.Out
	}
	secs := sum.Elapsed.Seconds()
	fmt.Fprintf(o.IO.Out, "merged %s: %s from %s into %s [%s, %s, %s]; %.2fs, %s\n",
		humanize.Count(len(parts.Dirs), "part"), humanize.Count(sum.Records, "record"), humanize.Count(sum.Items, "input"),
		sum.Out, info.Format, humanize.Count(len(sum.Manifest.Files), "file"),
		humanize.Bytes(sum.FileBytes), secs, humanize.Rate(float64(sum.Bytes)/secs))
	if sum.Skipped > 0 {
		fmt.Fprintf(o.IO.Out, "skipped %s (listed in %s/manifest.json)\n", humanize.Count(sum.Skipped, "input"), o.Out)
	}
	return nil
}

// parsePart parses --part: "I/N" (0 <= I < N), or "auto", which takes the part from the job
// array the process runs in: a Slurm array task (SLURM_ARRAY_TASK_ID minus
// SLURM_ARRAY_TASK_MIN, of SLURM_ARRAY_TASK_COUNT tasks, or MAX-MIN+1) or a Kubernetes
// Indexed Job (JOB_COMPLETION_INDEX, of --parts N or PACKER_PARTS parts). parts is --parts
// (0 when not given); when given it must agree with the array's size.
func parsePart(s string, parts int, getenv func(string) string) (index, count int, err error) {
	if s != "auto" {
		a, b, ok := strings.Cut(s, "/")
		i, err1 := strconv.Atoi(a)
		n, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
			return 0, 0, fmt.Errorf("--part %q: want I/N with 0 <= I < N (parts are numbered from 0), or auto", s)
		}
		if parts != 0 && parts != n {
			return 0, 0, fmt.Errorf("--part %s and --parts %d disagree", s, parts)
		}
		return i, n, nil
	}
	num := func(name string) (int, bool, error) {
		v := getenv(name)
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, true, fmt.Errorf("--part auto: %s=%q is not a number", name, v)
		}
		return n, true, nil
	}
	if id, ok, err := num("SLURM_ARRAY_TASK_ID"); err != nil {
		return 0, 0, err
	} else if ok {
		lo, _, err := num("SLURM_ARRAY_TASK_MIN")
		if err != nil {
			return 0, 0, err
		}
		n, hasN, err := num("SLURM_ARRAY_TASK_COUNT")
		if err != nil {
			return 0, 0, err
		}
		if !hasN {
			hi, hasHi, err := num("SLURM_ARRAY_TASK_MAX")
			if err != nil || !hasHi {
				return 0, 0, fmt.Errorf("--part auto: SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX")
			}
			n = hi - lo + 1
		}
		// An array with a step (--array=0-30:10) or a list has COUNT tasks whose ids are not
		// MIN..MIN+COUNT-1: refuse rather than build a wrong slice, in every task (a task whose
		// id happens to fall in MIN..MIN+COUNT-1 would build a part of the wrong index).
		step, hasStep, err := num("SLURM_ARRAY_TASK_STEP")
		if err != nil {
			return 0, 0, err
		}
		if hasStep && step != 1 {
			return 0, 0, fmt.Errorf("--part auto: the Slurm array has a step (SLURM_ARRAY_TASK_STEP=%d): give the array as a plain range (--array=0-%d)", step, n-1)
		}
		if hi, hasHi, err := num("SLURM_ARRAY_TASK_MAX"); err != nil {
			return 0, 0, err
		} else if hasHi && hi-lo+1 != n {
			return 0, 0, fmt.Errorf("--part auto: the Slurm array's task ids are not a plain range: SLURM_ARRAY_TASK_MAX-MIN+1 = %d, SLURM_ARRAY_TASK_COUNT = %d (a step or a list of indices): give the array as a plain range (--array=0-%d)", hi-lo+1, n, n-1)
		}
		if id < lo || id-lo >= n {
			return 0, 0, fmt.Errorf("--part auto: Slurm array task %d is not in %d..%d: give the array as a plain range (--array=0-%d)", id, lo, lo+n-1, n-1)
		}
		if parts != 0 && parts != n {
			return 0, 0, fmt.Errorf("--part auto: the Slurm array has %d tasks, --parts says %d", n, parts)
		}
		return id - lo, n, nil
	}
	if idx, ok, err := num("JOB_COMPLETION_INDEX"); err != nil {
		return 0, 0, err
	} else if ok {
		n := parts
		if n == 0 {
			pn, has, err := num("PACKER_PARTS")
			if err != nil || !has || pn < 1 {
				return 0, 0, fmt.Errorf("--part auto in a Kubernetes Indexed Job (JOB_COMPLETION_INDEX=%d): give the part count with --parts N or PACKER_PARTS (the Job's completions)", idx)
			}
			n = pn
		}
		if idx >= n {
			return 0, 0, fmt.Errorf("--part auto: JOB_COMPLETION_INDEX %d is not below the part count %d", idx, n)
		}
		return idx, n, nil
	}
	return 0, 0, errors.New("--part auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set; give --part I/N")
}
