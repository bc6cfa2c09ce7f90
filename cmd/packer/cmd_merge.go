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
	"github.com/packer-dev/packer/output/shards"
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

	VerifyParts bool // --verify-parts: read every byte of parts built with --cut-inputs before linking them
	RemoveParts bool // --remove-parts: remove the part folders once OUT is published
	InPlace     bool // --in-place: merge the parts built in place below the s3:// OUT (inplace.go)
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
and nothing is published. The parts are only read.

Parts built with --cut-inputs K (every part then starts at a multiple of K, and a shard also
ends at every K-th input) hold exactly the shards of the whole build: the merge then writes
no record. It checks each part as a reader opening it does (the sealed manifest; every
shard's header, index against its index_sha256, footer, size and chunk), links each shard
into OUT's staging folder under its merged name (a hard link: no second copy; across file
systems, or where the file system makes no hard links, a copy checked against the part's
SHA-256, said on stderr) and writes the manifest from the parts'
manifests. --verify-parts reads every byte of the parts first, as packer verify does.
--remove-parts removes the parts once OUT is published: each one's manifest and the files it
lists (of linked shards, only their second names), then its folder, which is kept, and named,
where it holds anything else. Parts built with --cut-inputs in object storage, merged into an OUT in
the same store, are merged there: the same checks by ranged reads of each shard's header,
index and footer, then each shard copied inside the store (pinned to the version checked, the
copy checked), the manifest last; --remove-parts then deletes the parts' objects. See
docs/cluster.md and docs/storage.md.
` + exitStatusHelp,
		Example: `  # four parts, on four machines or as a Slurm array, then one merge
  packer build ~/imagenet/train -o parts/p0 --part 0/4 --resize 256 --crop 224
  ...
  packer merge -o in224 parts/p0 parts/p1 parts/p2 parts/p3`,
		Args: argsUsage(cobra.ArbitraryArgs),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Parts = args
			if opts.Out == "" {
				return usagef(errors.New("--out (-o) is required"))
			}
			if len(args) == 0 && !opts.InPlace {
				return usagef(errors.New("requires at least 1 arg(s), only received 0 (or --in-place)"))
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			if opts.InPlace {
				return mergeInPlace(c.Context(), opts)
			}
			return runMerge(c.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Out, "out", "o", "", "output directory, or s3://bucket/prefix (merged locally under $TMPDIR, then uploaded) (required)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "replace an existing non-empty OUT (atomically, when the merge completes)")
	cmd.Flags().IntVar(&opts.Workers, "workers", 2, "ignored: a part is verified as it is read, one file at a time, in order")
	_ = cmd.Flags().MarkHidden("workers")
	cmd.Flags().BoolVar(&opts.VerifyParts, "verify-parts", false, "parts built with --cut-inputs: read and check every byte of every part, as packer verify does, before linking or copying its shards (parts without it are always read whole)")
	cmd.Flags().BoolVar(&opts.InPlace, "in-place", false, "merge the parts built with build --in-place below the s3:// OUT, giving no parts: check them where they are and write only the manifest, copying nothing")
	cmd.Flags().BoolVar(&opts.RemoveParts, "remove-parts", false, "remove the parts once OUT is published (parts in object storage: only where they were merged there by server-side copy)")
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
	// Parts built with --cut-inputs in the bucket of OUT's store are merged there, by copies
	// inside the store.
	if handled, err := mergeByCopy(ctx, o); handled || err != nil {
		return err
	}
	if o.RemoveParts && slices.ContainsFunc(dirs, remote) {
		return usagef(errors.New("--remove-parts removes local part folders only; remove the parts in object storage yourself"))
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
	out, publish, done, err := openTarget(ctx, "merge", out, o.Force, nil, o.IO.Err)
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
		ShardName: shards.ShardName, VerifyParts: o.VerifyParts,
		Progress: func(records, _ int64) { bar.Set(records) },
		Warn:     func(msg string) { fmt.Fprintln(o.IO.Err, "packer:", msg) },
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
	if o.RemoveParts {
		// OUT is published: the parts are no longer needed (their linked shards live on in OUT).
		// Their locks are still held, so no build of a part starts while it is removed.
		for k, d := range parts.Dirs {
			left, err := pipeline.RemovePart(d, parts.Manifests[k])
			if err != nil {
				return fmt.Errorf("merged into %s, but --remove-parts: %w", o.Out, err)
			}
			fmt.Fprintf(o.IO.Out, "removed part %s\n", d)
			if len(left) > 0 {
				fmt.Fprintf(o.IO.Err, "packer: kept the folder %s: it holds what no part's build wrote: %s\n", d, strings.Join(left, ", "))
			}
		}
	}
	return nil
}

// parsePart parses --part: "I/N" (0 <= I < N), or "auto", which takes the index from the job
// array the process runs in, as it is: a Slurm array task's SLURM_ARRAY_TASK_ID, or a
// Kubernetes Indexed Job's JOB_COMPLETION_INDEX. The count never comes from the array (a
// resubmission of one task, sbatch --array=2, is an array of one): it is parts (--parts N; 0
// when not given), else PACKER_PARTS, else the part is refused. An index not below the count is
// refused.
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
	var from string
	for _, name := range []string{"SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"} {
		i, ok, err := num(name)
		if err != nil {
			return 0, 0, err
		}
		if ok {
			index, from = i, fmt.Sprintf("%s=%d", name, i)
			break
		}
	}
	if from == "" {
		return 0, 0, errors.New("--part auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set; give --part I/N")
	}
	count = parts
	if count == 0 {
		n, ok, err := num("PACKER_PARTS")
		if err != nil {
			return 0, 0, err
		}
		if !ok || n < 1 {
			return 0, 0, fmt.Errorf("--part auto (%s): the part count is missing: give --parts N or set PACKER_PARTS=N (the array task id is the part's index, and the array's own size is not the part count: a resubmitted task runs in an array of one)", from)
		}
		count = n
	}
	if index >= count {
		return 0, 0, fmt.Errorf("--part auto: %s is not below the part count %d (parts are numbered 0 to %d: submit the array as --array=0-%d)", from, count, count-1, count-1)
	}
	return index, count, nil
}
