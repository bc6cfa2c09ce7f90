package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/video"
)

// planFlags are build's source flags: what `packer plan` takes and records, and what a build
// from a plan takes from it. Every other build flag (transform, format, part) is the build's.
var planFlags = []string{"from", "split", "classes", "exif-orient", "max-pixels", "clip-len", "clip-stride", "short", "fps", "decode-timeout", "image-key", "label-key", "fields", "images", "masks"}

// planLateFlags are the source flags added to planFlags after plans were first written: a plan
// that lacks one was made before the flag existed, with its empty value, which a part built
// from it then takes (and a part given the flag is refused: make a new plan).
var planLateFlags = []string{"fields", "images", "masks"}

// planOrderFlags are build's record-order flags, which a plan records too, so that every part
// built from it writes the records in one order: the one-machine build's with the same flags.
// A plan written before they were recorded lacks them, and then each part takes its own.
var planOrderFlags = []string{"shuffle", "seed"}

// planCutFlags are the build flags a plan takes with --cut-inputs auto only, to resolve K from
// the size of the records the build will write (pipeline.AutoCutInputs); the plan records K,
// not them: each part takes its own transform and --shard-size.
var planCutFlags = []string{"shard-size", "resize", "size", "max-size", "crop", "filter", "layout", "dtype", "mean", "std", "fast"}

// planAliases are source flags that set another's value (parquet's names for the tfrecord keys).
var planAliases = map[string]string{"image-column": "image-key", "label-column": "label-key"}

func newPlanCommand(io *iostreams, runF func(context.Context, *buildOptions) error) *cobra.Command {
	opts := &buildOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "plan SOURCE -o PLAN [source flags]",
		Short: "List a source once, for the parts of a build in parts",
		Long: `Plan lists the source at SOURCE once and writes the list to the file PLAN (atomically),
for the parts of a build in parts to read instead of each listing the source:

  packer plan SRC -o PLAN [--from, --classes, list and video options] [--shuffle --seed S]
  packer build PLAN -o PART --part I/N [transform and format options]   (each part)
  packer merge -o OUT PART...

--shuffle --seed S is recorded in the plan: every part built from it writes its records in the
order of a one-machine build with --shuffle --seed S, so the merge gives that build's bytes. A
part given --shuffle or --seed that the plan does not record (or another seed) is refused.

PLAN is JSON Lines: a header (the packer version, source kind and path, the source options,
class names, the input count and the listing and content digests a part records), then one
line per input in source order (name, path, labels, the file's size and modification time). A
part built from PLAN reopens the source recorded in
it, with its options (source flags given to build must agree with the plan), and records what
a part built from SOURCE records, so the merge is byte-identical to one build of SOURCE.

A folder, list, frames or video source is not listed again: a part builds the planned inputs
even when files were added or removed since (a removed one is a skipped input), and refuses to
build when one of its own inputs is there with another size or modification time. CIFAR and
IDX sources read their inputs' bytes while listing them: their plan holds only the count and
the listing and content digests, and each part lists the source and is refused when its
listing or content digest differs from the plan's. A WebDataset, TFRecord or Parquet plan lists
the files with their size and time and how many samples each holds (for Parquet, each row
group): a part opens only the files that hold its samples (Parquet: their footers and the row
groups it needs), and is refused when a file is not there as planned. Without a plan, each part
of these kinds reads every file of the source.

SOURCE may be an s3://bucket/prefix of an image folder or list, WebDataset, TFRecord or Parquet files:
the plan names each object by URL with its size and ETag, and a part reads only its own
objects, each pinned to its planned ETag (an object replaced since fails the part, naming it).
See docs/cluster.md.
` + exitStatusHelp,
		Example: `  packer plan ~/imagenet/train -o train.plan
  packer build train.plan -o parts/p3 --part 3/8 --resize 256 --crop 224`,
		Args: argsUsage(cobra.ExactArgs(1)),
		PreRunE: func(c *cobra.Command, args []string) error {
			opts.flags = c.Flags()
			if err := opts.validate(); err != nil {
				return usagef(err)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Source = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runPlan(c.Context(), opts)
		},
	}
	all := pflag.NewFlagSet("build", pflag.ContinueOnError)
	opts.addFlags(all)
	for _, name := range append(append([]string{"out"}, planFlags...), planOrderFlags...) {
		cmd.Flags().AddFlag(all.Lookup(name))
	}
	for alias := range planAliases {
		cmd.Flags().AddFlag(all.Lookup(alias))
	}
	for _, name := range append([]string{"cut-inputs"}, planCutFlags...) {
		cmd.Flags().AddFlag(all.Lookup(name))
	}
	cmd.Flags().Lookup("cut-inputs").Usage = "record K (or auto: resolve it from --shard-size and the transform flags given with it) in the plan, for every part built from it (docs/cluster.md)"
	cmd.Flags().AddFlag(all.Lookup("force"))
	cmd.Flags().Lookup("out").Usage = "the plan file to write (required)"
	cmd.Flags().Lookup("force").Usage = "replace an existing plan file (never a file that is not a plan)"
	cmd.Flags().Lookup("shuffle").Usage = "the parts built from the plan write the records in a seeded permutation of the inputs, as build --shuffle does (recorded in the plan; not for webdataset, tfrecord or parquet sources)"
	cmd.Flags().Lookup("seed").Usage = "with --shuffle: the permutation's seed (0 to 2^64-1), recorded in the plan"
	return cmd
}

func runPlan(ctx context.Context, o *buildOptions) (err error) {
	abs := o.Source
	if !remote(o.Source) {
		if abs, err = filepath.Abs(o.Source); err != nil {
			return err
		}
	}
	o.Source = abs
	if err := checkPlanOut(o.Out, abs, o.Force); err != nil {
		return err
	}
	var view *viewFiles
	if remote(o.Source) {
		// An s3:// source is listed once, into a view (streamSource); the plan names it by
		// URL, and its item lines name each object by URL with its size, time and ETag.
		var rename func(error) error
		var cleanup func()
		if !o.sideLocal() {
			o.srcPath, view, rename, cleanup, err = streamSource(ctx, o.Source, o.From, o.IO.Err)
		}
		if err == nil && view != nil {
			rename, cleanup, err = o.viewSides(ctx, view, rename, cleanup)
		}
		if err != nil {
			return err
		}
		if view == nil {
			return usagef(fmt.Errorf("plan reads an s3:// source through a view of its listing, which %s cannot be read from (a coco or pairs source with a local --images or --masks folder: give it as an s3:// folder; or a source whose kind its names do not tell: give --from); or copy it once with `packer build %s --source-cache DIR ...` (or any S3 tool) and plan DIR", o.Source, o.Source))
		}
		defer cleanup()
		defer func() { err = rename(err) }()
		o.files = view
	}
	src, kind, err := openSource(o)
	if err != nil {
		return err
	}
	if view != nil && kind == video.KindFrames {
		// Its inputs are folders, which the plan's item lines cannot name by an object's URL.
		return usagef(fmt.Errorf("plan reads no s3:// frames source: build the parts from %s itself (each lists the prefix and fetches only its own frames), or copy it once with `packer build %s --source-cache DIR ...` and plan DIR", o.Source, o.Source))
	}
	if _, records := src.(source.RecordSource); view != nil && !records {
		// (A record source's items have no path; its file lines are stamped through the view.)
		src = planView{Source: src, v: view.v}
	}
	e, _ := sourceEntry(kind)
	if o.Shuffle {
		if err := shuffleRefused(e); err != nil {
			return usagef(err)
		}
	}
	if err := o.planCut(src); err != nil {
		return usagef(fmt.Errorf("plan %s: %w", o.Out, err))
	}
	opts := map[string]string{}
	for _, name := range append(slices.Clone(planFlags), planOrderFlags...) {
		opts[name] = o.flagValue(name)
	}
	if o.CutInputs > 0 {
		opts["cut-inputs"] = strconv.FormatInt(o.CutInputs, 10)
	}
	opts["from"] = kind
	h, err := pipeline.WritePlan(ctx, o.Out, src, o.files, pipeline.PlanHeader{Kind: kind, Source: abs, Options: opts, Items: e.Replay != nil})
	if err != nil {
		return fmt.Errorf("plan %s: %w", o.Out, err)
	}
	what := "its inputs listed"
	if h.Files > 0 {
		what = fmt.Sprintf("%s listed with their samples: each part reads only its own", humanize.Count(h.Files, "file"))
	} else if !h.Items {
		what = "count and listing digest only: each part lists the source and checks it"
	}
	fmt.Fprintf(o.IO.Out, "planned %s of %s (%s) into %s [%s]\nlisting_sha256 %s\ncontent_sha256 %s\n", humanize.Count(h.Count, "input"), abs, kind, o.Out, what, h.Listing, h.Content)
	if o.Shuffle {
		fmt.Fprintf(o.IO.Out, "record order: --shuffle --seed %d (every part built from the plan takes it)\n", o.Seed)
	}
	if o.CutInputs > 0 {
		fmt.Fprintf(o.IO.Out, "cut: --cut-inputs %d (every part built from the plan takes it)\n", o.CutInputs)
	}
	return nil
}

// planCut checks a plan's --cut-inputs and the flags that go with auto (planCutFlags, refused
// without it) and resolves auto against the source.
func (o *buildOptions) planCut(src source.Source) error {
	for _, name := range planCutFlags {
		if o.flags.Lookup(name).Changed && !o.cutAuto {
			return fmt.Errorf("--%s is for --cut-inputs auto in a plan (it resolves K; each part takes its own --%s)", name, name)
		}
	}
	return o.resolveCut(src)
}

// usePlanCut makes a build from the plan h take the plan's --cut-inputs K, if it records one:
// the same K given, auto or nothing is that K; another K, or 0 given explicitly (no cut), is
// refused, naming both, as a source flag that disagrees with the plan is. A build of another
// format than shards does not take it.
func (o *buildOptions) usePlanCut(h *pipeline.PlanHeader, src string) error {
	v, ok := h.Options["cut-inputs"]
	if !ok || o.Format != shard.FormatShards {
		// npy and HDF5 are not cut (validate refused --cut-inputs for them): their merge
		// writes one file anyway.
		return nil
	}
	k, err := strconv.ParseInt(v, 10, 64)
	if err != nil || k <= 0 {
		return fmt.Errorf("%w: %s: --cut-inputs %q", pipeline.ErrPlan, src, v)
	}
	if !o.cutAuto && o.flags.Lookup("cut-inputs").Changed && o.CutInputs != k {
		return usagef(fmt.Errorf("--cut-inputs %d disagrees with the plan %s, made with --cut-inputs %d (every part of a plan is cut at the same K: leave the flag out, give auto or %d, or make a new plan)", o.CutInputs, src, k, k))
	}
	if o.cutAuto {
		fmt.Fprintf(o.IO.Err, "packer: --cut-inputs auto: K = %d, from the plan %s\n", k, src)
	}
	o.CutInputs, o.cutAuto = k, false
	return nil
}

// flagValue is a source flag's value as a plan records it: the flag's own string, for
// --classes the parsed class names joined by commas, and for --images and --masks the folder's
// absolute path (a plan names its source by absolute path too), or its s3:// location as given.
func (o *buildOptions) flagValue(name string) string {
	v := o.flags.Lookup(name).Value.String()
	switch {
	case name == "classes":
		return strings.Join(o.classes, ",")
	case (name == "images" || name == "masks") && v != "" && !remote(v):
		if abs, err := filepath.Abs(v); err == nil {
			return abs
		}
	}
	return v
}

// usePlan makes a build whose SOURCE is a plan file (after validate) take its source flags from
// the plan: a source flag given on the command line must agree with the plan's. The build then
// opens the planned source (openSource).
func (o *buildOptions) usePlan(flags *pflag.FlagSet, src string) error {
	o.flags = flags
	if !pipeline.IsPlan(src) {
		return nil
	}
	h, err := pipeline.ReadPlanHeader(src)
	if err != nil {
		return err
	}
	for _, name := range append(slices.Clone(planFlags), planOrderFlags...) {
		v, ok := h.Options[name]
		if !ok && slices.Contains(planOrderFlags, name) {
			continue // a plan of an earlier version: the part's own record order
		}
		if !ok && slices.Contains(planLateFlags, name) {
			v, ok = "", true
		}
		if !ok {
			return fmt.Errorf("%w: %s records no --%s", pipeline.ErrPlan, src, name)
		}
		f := flags.Lookup(name)
		given := f.Changed
		for alias, to := range planAliases {
			given = given || (to == name && flags.Lookup(alias).Changed)
		}
		if given {
			if now := o.flagValue(name); now != v {
				return usagef(fmt.Errorf("--%s %q disagrees with the plan %s, made with %q (a build from a plan takes the plan's source options: leave the flag out or make a new plan)", name, now, src, v))
			}
			continue
		}
		if err := f.Value.Set(v); err != nil {
			return fmt.Errorf("%w: %s: --%s %q: %v", pipeline.ErrPlan, src, name, v, err)
		}
	}
	o.classes = nil
	if err := o.validate(); err != nil {
		return usagef(fmt.Errorf("the source options of the plan %s: %w", src, err))
	}
	if err := o.usePlanCut(h, src); err != nil {
		return err
	}
	o.plan = h
	return nil
}

// inputs are the paths a build reads, which OUT must not overlap: SOURCE, and for a plan the
// planned source too.
func (o *buildOptions) inputs() []string {
	in := []string{o.Source}
	if o.plan != nil {
		in = append(in, o.plan.Source)
	}
	if o.srcPath != "" {
		// The local copy of an s3:// SRC (a --source-cache folder, or a temporary one) is
		// what the build reads.
		in = append(in, o.srcPath)
	}
	return in
}

// partSource is the source a part records (shard.PartInfo's source), for the merge's check
// that OUT is not it: the source a plan records, an object-store URL, or SRC's absolute path.
func (o *buildOptions) partSource() string {
	switch {
	case o.plan != nil:
		return o.plan.Source
	case remote(o.Source):
		return o.Source
	}
	if abs, err := filepath.Abs(o.Source); err == nil {
		return abs
	}
	return o.Source
}

// checkPlanOut refuses to write a plan over an existing file (a plan only with --force, never
// anything else) or inside the source.
func checkPlanOut(out, src string, force bool) error {
	absOut, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(src, absOut); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return usagef(fmt.Errorf("plan %s: %w: the plan file would be written inside the source %s", out, pipeline.ErrOutputOverlap, src))
	}
	st, err := os.Lstat(out)
	if err != nil {
		return nil
	}
	if !st.Mode().IsRegular() || !pipeline.IsPlan(out) {
		return usagef(fmt.Errorf("plan %s exists and is not a packer plan: refusing to replace it", out))
	}
	if !force {
		return usagef(fmt.Errorf("plan %s exists (use --force to replace it)", out))
	}
	return nil
}
