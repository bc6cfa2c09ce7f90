package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/internal/progress"
	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/verify"
)

// mergeByCopy merges parts in object storage into an object-store OUT of the same store by
// server-side copies, when every part was built with --cut-inputs: the parts' shards are the
// dataset's (pipeline.CheckCutParts checks them as the linked merge does, reading only their
// manifests and each shard's header, index and footer, by exact ranged GETs pinned to the ETags
// they had), each shard is copied into OUT inside the store, pinned to the ETag it was checked
// with, and checked (s3.Backend.CopyPublish), and the manifest is written last, as a publish
// writes it. handled is false, and nothing done, where the parts or OUT are not all in one
// object store, or the parts were not built with --cut-inputs: the merge then takes its usual
// path (copy the parts here, merge, upload).
func mergeByCopy(ctx context.Context, o *mergeOptions) (handled bool, err error) {
	if !remote(o.Out) || !slices.ContainsFunc(o.Parts, remote) || slices.ContainsFunc(o.Parts, func(p string) bool { return !remote(p) }) {
		return false, nil
	}
	start := time.Now()
	out, backs, pinned, err := openCopyStores(ctx, o)
	if err != nil || out == nil {
		return false, err
	}
	fss := make([]shard.FS, len(pinned))
	for i, p := range pinned {
		fss[i] = p
	}
	parts, err := pipeline.ReadPartsFS(o.Parts, fss, outputNames(false))
	if err != nil {
		return true, err
	}
	if parts.Info().CutInputs <= 0 {
		return false, nil
	}
	// ReadPartsFS orders the parts by index: find each one's backend again.
	index := func(dir string) int { return slices.Index(o.Parts, dir) }
	for k, m := range parts.Manifests {
		if locations.Overlap(o.Out, m.Part.Source) {
			return true, usagef(fmt.Errorf("merge into %s: %w: it is %s, the source part %s was built from, or lies in or around it", o.Out, pipeline.ErrOutputOverlap, m.Part.Source, parts.Dirs[k]))
		}
	}
	if _, err := checkRemotePart(ctx, out, o.Out, o.Force, nil); err != nil {
		return true, err
	}
	if o.VerifyParts {
		for _, d := range parts.Dirs {
			k := index(d)
			if err := verifyBucketPart(ctx, o, pinnedBackend{backs[k], pinned[k]}, d, true); err != nil {
				return true, err
			}
		}
	}
	var total int64
	for _, m := range parts.Manifests {
		total += m.Count
	}
	bar := progress.New(o.IO.Err, "checking parts", "records", total)
	// CheckCutParts reads part k of parts.Dirs through its k-th FS: that part's, in index
	// order, not the one given k-th.
	byIndex := make([]shard.FS, len(parts.Dirs))
	for k, d := range parts.Dirs {
		byIndex[k] = fss[index(d)]
	}
	m, copies, sum, err := pipeline.CheckCutParts(parts, byIndex, shards.ShardName, func(records, _ int64) { bar.Set(records) })
	bar.Finish()
	var pe *pipeline.PartError
	if errors.As(err, &pe) {
		for _, f := range pe.Faults {
			fmt.Fprintln(o.IO.Err, f)
		}
		return true, fmt.Errorf("%w: part %s: %s (see above); rebuild that part", errCorrupt, pe.Dir, humanize.Count(len(pe.Faults), "fault"))
	}
	if err != nil {
		return true, fmt.Errorf("merge into %s: %w", o.Out, err)
	}
	manifest, err := m.Marshal()
	if err != nil {
		return true, err
	}
	srcs := make([]s3.CopySource, len(copies))
	for i, c := range copies {
		k := index(parts.Dirs[c.Part])
		srcs[i] = s3.CopySource{From: backs[k], Name: c.Source.Path, ETag: pinned[k].ETag(c.Source.Path), Size: c.Source.Size, SHA256: c.Source.SHA256}
	}
	threshold, err := copyThreshold()
	if err != nil {
		return true, usagef(err)
	}
	var cbar *progress.Bar
	err = out.CopyPublish(ctx, m, manifest, srcs, s3.CopyOptions{
		PublishOptions: s3.PublishOptions{
			Clear: o.Force, Replace: o.Force, Formats: outputNames(false), Command: "merge",
			Warn: func(msg string) { fmt.Fprintln(o.IO.Err, "packer: warning:", msg) },
		},
		PartThreshold: threshold,
		Copied: func(done, total int64) {
			if cbar == nil {
				cbar = progress.New(o.IO.Err, "copying in "+o.Out, "bytes", total)
			}
			cbar.Set(done)
		},
	})
	cbar.Finish()
	if err != nil {
		return true, fmt.Errorf("merge into %s: %w", o.Out, err)
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(o.IO.Out, "merged %s: %s from %s into %s [%s, %s, %s] by server-side copy; %.2fs\n",
		humanize.Count(len(parts.Dirs), "part"), humanize.Count(sum.Records, "record"), humanize.Count(sum.Items, "input"),
		o.Out, m.Format, humanize.Count(len(m.Files), "file"), humanize.Bytes(sum.FileBytes), secs)
	if sum.Skipped > 0 {
		fmt.Fprintf(o.IO.Out, "skipped %s (listed in %s/manifest.json)\n", humanize.Count(sum.Skipped, "input"), o.Out)
	}
	if o.RemoveParts {
		// OUT is published, its copies checked: the parts' objects are no longer needed.
		for k, d := range parts.Dirs {
			if err := backs[index(d)].RemoveDataset(ctx, parts.Manifests[k], pinned[index(d)].ETag(shard.ManifestName)); err != nil {
				return true, fmt.Errorf("merged into %s, but --remove-parts: %s: %w", o.Out, d, err)
			}
			fmt.Fprintf(o.IO.Out, "removed part %s\n", d)
		}
	}
	return true, nil
}

// openCopyStores opens OUT and the parts of a merge whose locations are all in object storage:
// out is nil (and nothing else set) where one of them is not an s3 store, or not OUT's store.
// pinned[i] reads the part o.Parts[i] (backs[i]) for its check.
func openCopyStores(ctx context.Context, o *mergeOptions) (out *s3.Backend, backs []*s3.Backend, pinned []*s3.PinnedFS, err error) {
	open := func(loc string) (*s3.Backend, error) {
		r, _, err := openRemote(ctx, loc, "")
		if err != nil {
			return nil, err
		}
		b, _ := r.(*s3.Backend)
		return b, nil
	}
	if out, err = open(o.Out); err != nil || out == nil {
		return nil, nil, nil, err
	}
	for _, p := range o.Parts {
		b, err := open(p)
		if err != nil || b == nil || !out.SameStore(b) {
			return nil, nil, nil, err // another store: no server-side copy between them
		}
		backs, pinned = append(backs, b), append(pinned, b.PinnedFS(ctx))
	}
	return out, backs, pinned, nil
}

// pinnedBackend is a part's backend whose files are read through the pinned view the merge
// checks (and copies) them through (an s3.PinnedFS, or for a part built in place the
// s3.InPlaceFS over OUT's): each pinned to the ETag it had when first opened, so that the
// files --verify-parts reads are the versions the merge checks and copies (one changed in
// between fails the merge, s3.ErrChanged).
type pinnedBackend struct {
	*s3.Backend
	pinned shard.FS
}

func (p pinnedBackend) Open(_ context.Context, name string) (storage.Reader, error) {
	return p.pinned.Open(name)
}

// verifyBucketPart reads and checks every byte of the part d in b where it is, as packer verify
// does (merge --verify-parts): a damaged part is errCorrupt, its faults printed. strict: files
// the part's manifest does not list are faults (not for a part built in place, among the
// others' shards).
func verifyBucketPart(ctx context.Context, o *mergeOptions, b storage.Backend, d string, strict bool) error {
	rep, err := verify.Backend(ctx, b, d, verify.Options{Workers: 4, Strict: strict}, nil)
	if err != nil {
		return fmt.Errorf("verify part %s: %w", d, err)
	}
	if len(rep.Faults) == 0 {
		return nil
	}
	for _, f := range rep.Faults {
		fmt.Fprintln(o.IO.Err, f.String())
	}
	return fmt.Errorf("%w: part %s: %s (see above); rebuild that part", errCorrupt, d, humanize.Count(len(rep.Faults), "fault"))
}

// copyThreshold is PACKER_S3_COPY_PART_SIZE: objects larger than this are copied in parts
// (default, and at most, 5 GiB: S3's limit of one copy).
func copyThreshold() (int64, error) {
	v := os.Getenv("PACKER_S3_COPY_PART_SIZE")
	if v == "" {
		return s3.MaxCopySize, nil
	}
	n, err := parseBytes(v)
	if err != nil || n < 5<<20 || n > s3.MaxCopySize {
		return 0, fmt.Errorf("PACKER_S3_COPY_PART_SIZE: want a size from 5MiB to 5GiB, got %q", v)
	}
	return n, nil
}
