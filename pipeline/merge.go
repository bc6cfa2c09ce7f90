package pipeline

// Merge joins the parts of a build split in parts (Options.Part) into the dataset one build of
// the whole source writes: the records of the parts in part order are written anew through the
// final output format, so shard boundaries, every file and the manifest come out as one build
// would have made them.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// MergeOptions configures Merge.
type MergeOptions struct {
	Parts  []string     // the part directories, in any order
	Output output.Entry // the merged dataset's format: the entry the parts name (ReadParts)
	Out    string       // output directory
	Force  bool         // replace an existing OUT atomically
	// Progress is called after each part with the records written so far and the total.
	Progress func(records, total int64)
}

// ErrParts is wrapped by every error about a set of parts that does not make one dataset.
var ErrParts = errors.New("the parts do not make one dataset")

// Parts is a checked, complete set of parts, in part order.
type Parts struct {
	Dirs      []string
	Manifests []*shard.Manifest
}

// Info returns the part record all the parts share (with the first part's index).
func (p *Parts) Info() *shard.PartInfo { return p.Manifests[0].Part }

// ReadParts reads the manifests of a build's parts and checks that they make one dataset: each
// is a part, written by this packer version, one of each index 0..N-1 (a missing or duplicated
// part is named), all of one source listing (its digest and size), one source and transform
// spec, one sample and label spec, one set of merge options, and each covering the inputs that
// follow the previous part's. It does not check the parts' data: verify them first.
func ReadParts(dirs []string) (*Parts, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no part given", ErrParts)
	}
	type part struct {
		dir string
		m   *shard.Manifest
	}
	parts := make([]part, 0, len(dirs))
	for _, d := range dirs {
		m, err := shard.ReadManifest(d)
		if err != nil {
			return nil, fmt.Errorf("part %s: %w", d, err)
		}
		if m.Part == nil {
			return nil, fmt.Errorf("%w: %s is a whole dataset, not a part (built without --part)", ErrParts, d)
		}
		if m.Packer != Version {
			return nil, fmt.Errorf("%w: %s was built by packer %s; this is packer %s (build every part with one version)", ErrParts, d, m.Packer, Version)
		}
		parts = append(parts, part{d, m})
	}
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].m.Part.Index < parts[j].m.Part.Index })
	first := parts[0].m
	n := first.Part.Count
	seen := map[int]string{}
	for _, p := range parts {
		pi := p.m.Part
		if prev, dup := seen[pi.Index]; dup {
			return nil, fmt.Errorf("%w: part %d/%d given twice: %s and %s", ErrParts, pi.Index, n, prev, p.dir)
		}
		seen[pi.Index] = p.dir
		if err := sameBuild(first, parts[0].dir, p.m, p.dir); err != nil {
			return nil, err
		}
	}
	var missing []int
	for i := 0; i < n; i++ {
		if _, ok := seen[i]; !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing part(s) %v of %d", ErrParts, missing, n)
	}
	out := &Parts{}
	next := int64(0)
	for _, p := range parts {
		if p.m.Part.FirstInput != next {
			return nil, fmt.Errorf("%w: part %s starts at input %d, the previous part ends at %d", ErrParts, p.dir, p.m.Part.FirstInput, next)
		}
		next += p.m.Inputs
		out.Dirs = append(out.Dirs, p.dir)
		out.Manifests = append(out.Manifests, p.m)
	}
	if next != first.Part.TotalInputs {
		return nil, fmt.Errorf("%w: the parts hold %d inputs, the source %d", ErrParts, next, first.Part.TotalInputs)
	}
	return out, nil
}

// sameBuild checks that part b (in dir db) belongs to the build of part a (in da).
func sameBuild(a *shard.Manifest, da string, b *shard.Manifest, db string) error {
	pa, pb := *a.Part, *b.Part
	pa.Index, pb.Index, pa.FirstInput, pb.FirstInput = 0, 0, 0, 0
	diff := func(what string) error {
		return fmt.Errorf("%w: %s and %s differ in %s", ErrParts, da, db, what)
	}
	switch {
	case pa.Listing != pb.Listing || pa.TotalInputs != pb.TotalInputs:
		return diff("their source listing (another source, or the source changed between parts)")
	case pa.Count != pb.Count:
		return diff("their part count")
	case pa != pb:
		return diff("their merge options (--format, --shard-size, --max-errors)")
	case !reflect.DeepEqual(a.Source, b.Source):
		return diff("their source options")
	case !reflect.DeepEqual(a.Transform, b.Transform):
		return diff("their transform options")
	case !reflect.DeepEqual(a.Sample, b.Sample) || !reflect.DeepEqual(a.Label, b.Label):
		return diff("their record spec")
	case !reflect.DeepEqual(a.Classes, b.Classes):
		return diff("their class names")
	case a.Format != shard.FormatShards || b.Format != shard.FormatShards:
		return diff("format (a part is written as shards)")
	}
	return nil
}

// LockParts takes the lock of every part directory (the one a build of that part takes), so
// that no part is rebuilt while a merge checks and reads it; release gives them back. A part
// being built is refused (ErrOutputLocked names the build's pid).
func LockParts(dirs []string) (release func(), err error) {
	var locks []*outLock
	release = func() {
		for _, l := range locks {
			l.release()
		}
	}
	held := map[string]bool{}
	for _, d := range dirs {
		p, err := newOutPaths(d)
		if err != nil {
			release()
			return nil, fmt.Errorf("part %s: %w", d, err)
		}
		if held[p.lock] {
			continue // a part given twice: ReadParts names it
		}
		held[p.lock] = true
		l, err := lockOut(p)
		if err != nil {
			release()
			return nil, fmt.Errorf("part %s: %w", d, err)
		}
		locks = append(locks, l)
	}
	return release, nil
}

// Merge writes the dataset of a complete, checked set of parts (ReadParts) into OUT, with the
// output directory handling of Build (lock, staging, manifest last, atomic commit). The parts'
// data should be verified first; every record read is checked against its block CRC anyway.
func Merge(ctx context.Context, parts *Parts, opts MergeOptions) (*Summary, error) {
	start := time.Now()
	if opts.Output.New == nil {
		panic("pipeline: Merge needs an Output entry")
	}
	info := parts.Info()
	if opts.Output.Name != info.Format {
		return nil, fmt.Errorf("%w: the parts were built for --format %s, not %s", ErrParts, info.Format, opts.Output.Name)
	}
	var skipped int
	for _, m := range parts.Manifests {
		skipped += len(m.Skipped)
	}
	if info.MaxErrors > 0 && skipped > info.MaxErrors {
		return nil, fmt.Errorf("%w: %d inputs skipped over all parts, more than --max-errors %d", ErrTooManyErrors, skipped, info.MaxErrors)
	}
	sum, err := intoOut(opts.Out, opts.Force, parts.Dirs, false, func(paths outPaths, _ bool) (*Summary, error) {
		return mergeInto(ctx, parts, paths.staging, opts)
	})
	if err != nil {
		return nil, err
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// mergeInto writes the parts' records and the manifest into dir.
func mergeInto(ctx context.Context, parts *Parts, dir string, opts MergeOptions) (*Summary, error) {
	first := parts.Manifests[0]
	var total int64
	for _, m := range parts.Manifests {
		total += m.Count
	}
	hasMeta := false
	for _, d := range parts.Dirs {
		ds, err := shard.OpenDataset(d)
		if err != nil {
			return nil, fmt.Errorf("part %s: %w", d, err)
		}
		if ds.NumShards() > 0 {
			r, err := ds.Shard(0)
			if err != nil {
				ds.Close()
				return nil, fmt.Errorf("part %s: %w", d, err)
			}
			hasMeta = r.HasRecordMeta()
		}
		ds.Close()
		if ds.NumShards() > 0 {
			break
		}
	}
	out, err := opts.Output.New(output.Config{
		Dir: dir, Sample: first.Sample, Label: first.Label, Classes: first.Classes, HasMeta: hasMeta,
		ShardSize: parts.Info().ShardSize,
		Meta: map[string]any{
			"packer": first.Packer, "source": first.Source, "transform": first.Transform, "classes": nonNil(first.Classes),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create %s output: %w", opts.Output.Name, err)
	}
	finished := false
	defer func() {
		if !finished {
			out.Abort()
		}
	}()
	sum := &Summary{Reasons: map[string]int{}}
	counts := make([]int64, len(first.Classes))
	var skipped []shard.Skipped
	var inputs int64
	for k, d := range parts.Dirs {
		if err := copyPart(ctx, d, first.Sample.Fixed(), out, counts, sum); err != nil {
			return nil, err
		}
		m := parts.Manifests[k]
		skipped = append(skipped, m.Skipped...)
		inputs += m.Inputs
		if opts.Progress != nil {
			opts.Progress(sum.Records, total)
		}
	}
	if sum.Records != total {
		return nil, fmt.Errorf("%w: the parts' manifests count %d records, their shards hold %d", ErrParts, total, sum.Records)
	}
	files, err := out.Close()
	finished = true
	if err != nil {
		return nil, fmt.Errorf("finish %s output: %w", opts.Output.Name, err)
	}
	format, formatVersion := out.Format()
	m := &shard.Manifest{
		Packer: first.Packer, Format: format, FormatVersion: formatVersion,
		Count: sum.Records, Classes: nonNil(first.Classes), ClassCounts: counts,
		Sample: first.Sample, Label: first.Label, Source: first.Source, Transform: first.Transform,
		Files: files, Skipped: nonNil(skipped), Inputs: inputs,
	}
	if err := WriteManifest(dir, m); err != nil {
		return nil, err
	}
	for _, f := range files {
		sum.FileBytes += f.Size
	}
	for _, s := range skipped {
		sum.Reasons[ShortReason(s.Reason)]++
	}
	sum.Items, sum.Skipped, sum.Manifest = inputs, int64(len(skipped)), m
	return sum, nil
}

// copyPart writes every record of the part in dir to out, in order.
func copyPart(ctx context.Context, dir string, fixed bool, out output.Output, counts []int64, sum *Summary) error {
	ds, err := shard.OpenDataset(dir)
	if err != nil {
		return fmt.Errorf("part %s: %w", dir, err)
	}
	defer ds.Close()
	for s := 0; s < ds.NumShards(); s++ {
		r, err := ds.Shard(s)
		if err != nil {
			return fmt.Errorf("part %s: %w", dir, err)
		}
		for i := 0; i < r.Len(); i++ {
			if i%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			data, err := r.Record(i)
			if err != nil {
				return fmt.Errorf("part %s: %s record %d: %w", dir, r.Name(), i, err)
			}
			rec := output.Record{Data: data, Label: r.Label(i), Aux: r.Aux(i), Meta: r.RecordMeta(i)}
			if !fixed {
				if rec.Shape, err = r.RecordShape(i); err != nil {
					return fmt.Errorf("part %s: %s record %d: %w", dir, r.Name(), i, err)
				}
			}
			if err := out.Write(rec); err != nil {
				return fmt.Errorf("write %s: %w", dir, err)
			}
			if rec.Label >= 0 && rec.Label < int64(len(counts)) {
				counts[rec.Label]++
			}
			sum.Records++
			sum.Bytes += int64(len(data))
		}
	}
	return nil
}
