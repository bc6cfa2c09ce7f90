package main

// Parts built in place (build --in-place) and their merge (merge --in-place): each part of a
// --cut-inputs build whose chunks make one shard each writes its shards under the dataset's
// prefix with the names the one-machine build gives them, and its part manifest below
// s3.PartsPrefix; the merge checks the parts where they are and writes only manifest.json.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/internal/progress"
	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage/s3"
)

// validateInPlace checks what --in-place goes with.
func (o *buildOptions) validateInPlace() error {
	switch {
	case !o.InPlace:
		return nil
	case o.part == nil || o.CutArg == "0" || o.CutArg == "":
		return errors.New("--in-place is for a part (--part I/N) built with --cut-inputs K or auto")
	case !remote(o.Out):
		return errors.New("--in-place is for an s3:// OUT (the dataset's prefix); with a local OUT build the parts into folders and merge them, which links their shards into place")
	case o.Resume:
		return errors.New("--in-place: --resume is not supported for parts built in place; run the part again with --force (it removes only this part's objects)")
	case o.Format != shard.FormatShards:
		return fmt.Errorf("--in-place: the merged dataset is the parts' shards, so --format must be %s", shard.FormatShards)
	}
	return nil
}

// openS3 opens the object-store location loc as an s3 backend.
func openS3(ctx context.Context, loc string) (*s3.Backend, error) {
	r, _, err := openRemote(ctx, loc, "")
	if err != nil {
		return nil, err
	}
	b, ok := r.(*s3.Backend)
	if !ok {
		return nil, usagef(fmt.Errorf("%s: --in-place needs an s3 store, not a %T", loc, r))
	}
	return b, nil
}

// runInPlaceBuild builds the part o.part into a local staging folder, then writes it in place
// below OUT (putInPlace).
func runInPlaceBuild(ctx context.Context, o *buildOptions) error {
	b, err := openS3(ctx, o.Out)
	if err != nil {
		return err
	}
	s, err := newStaging("packer-s3-build-*", o.IO.Err)
	if err != nil {
		return err
	}
	defer s.Remove()
	return runBuildTo(ctx, o, filepath.Join(s.Dir, "part"), func(dir string) error { return putInPlace(ctx, o, b, dir) })
}

// putInPlace writes the part built in dir below OUT (s3.Backend.PutInPlacePart): shard i of
// the part is the one of its chunk c0+i, named as the one-machine build names it; a chunk cut
// again by --shard-size, or one without records, is refused before anything is written.
func putInPlace(ctx context.Context, o *buildOptions, b *s3.Backend, dir string) error {
	m, err := shard.ReadManifest(dir)
	if err != nil {
		return err
	}
	names, err := inPlaceNames(dir, m)
	if err != nil {
		return err
	}
	rec := *m
	rec.Files = append([]shard.FileEntry(nil), m.Files...)
	for i := range rec.Files {
		rec.Files[i].Path = names[i]
	}
	record, err := rec.Marshal()
	if err != nil {
		return err
	}
	// Compared as the merge compares them: both as read from their bytes.
	var self shard.Manifest
	if err := json.Unmarshal(record, &self); err != nil {
		return err
	}
	recDir := s3.PartRecordDir(m.Part.Index, m.Part.Count)
	err = b.PutInPlacePart(ctx, s3.InPlacePart{
		Dir: dir, Files: m.Files, Names: names, Record: record, RecordDir: recDir, Force: o.Force,
		Same: func(name string, data []byte) error {
			var other shard.Manifest
			if err := json.Unmarshal(data, &other); err != nil || other.Part == nil {
				return usagef(fmt.Errorf("%s: %w: %s is not a part record", o.Out, s3.ErrInPlace, name))
			}
			if err := pipeline.SameBuild(&other, o.Out+"/"+name, &self, "this part"); err != nil {
				return usagef(fmt.Errorf("%w: build every part of %s with the same N, --cut-inputs, source and options", err, o.Out))
			}
			return nil
		},
	})
	if errors.Is(err, s3.ErrDatasetExists) || errors.Is(err, s3.ErrInPlace) {
		return usagef(err)
	}
	return err
}

// inPlaceNames are the names below OUT of the shards of the part built in dir (manifest m):
// the part's shard i must be of chunk c0+i, piece 0, c0 the part's first chunk, and the part
// must make a shard of every one of its chunks.
func inPlaceNames(dir string, m *shard.Manifest) ([]string, error) {
	k := m.CutInputs
	c0 := m.Part.FirstInput / k
	chunks := (m.Part.FirstInput+m.Inputs+k-1)/k - c0
	ds, err := shard.OpenDataset(dir)
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	names := make([]string, ds.NumShards())
	for i := range names {
		r, err := ds.Shard(i)
		if err != nil {
			return nil, err
		}
		c := r.Cut()
		switch {
		case c == nil:
			return nil, fmt.Errorf("%s: shard %d records no chunk", dir, i)
		case c.Piece != 0:
			return nil, usagef(fmt.Errorf("--in-place: chunk %d (inputs [%d, %d)) makes more than one shard (--shard-size %s cut it again): a part built in place needs one shard per chunk; use --cut-inputs auto, a smaller --cut-inputs or a larger --shard-size, or build without --in-place and merge by copy",
				c.Chunk, c.Chunk*k, (c.Chunk+1)*k, humanize.Bytes(m.Part.ShardSize)))
		case c.Chunk != c0+int64(i):
			return nil, inPlaceEmpty(c0+int64(i), k)
		}
		names[i] = shards.ShardName(int(c.Chunk))
	}
	if int64(len(names)) != chunks {
		return nil, inPlaceEmpty(c0+int64(len(names)), k)
	}
	return names, nil
}

// inPlaceEmpty refuses a chunk that made no record: the one-machine build's shard names skip
// it, so the part's shards cannot take their final names.
func inPlaceEmpty(c, k int64) error {
	return fmt.Errorf("--in-place: chunk %d (inputs [%d, %d)) made no record (every input skipped): the one-machine build's shard names skip it, so no part can be built in place; build the parts without --in-place and merge them by copy", c, c*k, (c+1)*k)
}

// mergeInPlace merges the parts built in place below OUT: the part records found below
// s3.PartsPrefix are read and checked as the copy merge checks parts (pipeline.CheckCutParts
// through pinned reads), every shard must carry the name its chunk gives it, and only the
// manifest is written (s3.Backend.PublishInPlace); nothing is copied.
func mergeInPlace(ctx context.Context, o *mergeOptions) error {
	if len(o.Parts) > 0 {
		return usagef(errors.New("merge --in-place takes no parts: it merges the parts built in place below OUT"))
	}
	if !remote(o.Out) || o.Force || o.RemoveParts {
		return usagef(errors.New("merge --in-place is for an s3:// OUT, without --force or --remove-parts"))
	}
	start := time.Now()
	b, err := openS3(ctx, o.Out)
	if err != nil {
		return err
	}
	recs, err := b.PartRecords(ctx)
	if errors.Is(err, s3.ErrDatasetExists) {
		return usagef(fmt.Errorf("merge into %s: %w", o.Out, err))
	}
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return usagef(fmt.Errorf("merge into %s: %w: no part records below %s%s (build the parts with --in-place first)", o.Out, pipeline.ErrParts, o.Out, "/"+s3.PartsPrefix))
	}
	pinned := b.PinnedFS(ctx)
	dirs := make([]string, len(recs))
	fss := make([]shard.FS, len(recs))
	for i, r := range recs {
		dirs[i], fss[i] = o.Out+"/"+r, s3.InPlaceFS{P: pinned, RecordDir: r}
	}
	parts, err := pipeline.ReadPartsFS(dirs, fss, outputNames(false))
	if err != nil {
		return fmt.Errorf("merge into %s: %w", o.Out, err)
	}
	byIndex := make([]shard.FS, len(parts.Dirs))
	for k, d := range parts.Dirs {
		byIndex[k] = fss[slices.Index(dirs, d)]
		if o.VerifyParts {
			if err := verifyBucketPart(ctx, o, pinnedBackend{b, byIndex[k]}, d, false); err != nil {
				return err
			}
		}
	}
	var total int64
	for _, pm := range parts.Manifests {
		total += pm.Count
	}
	bar := progress.New(o.IO.Err, "checking parts", "records", total)
	m, copies, sum, err := pipeline.CheckCutParts(parts, byIndex, shards.ShardName, func(records, _ int64) { bar.Set(records) })
	bar.Finish()
	var pe *pipeline.PartError
	if errors.As(err, &pe) {
		for _, f := range pe.Faults {
			fmt.Fprintln(o.IO.Err, f)
		}
		return fmt.Errorf("%w: part %s: %s (see above); rebuild that part", errCorrupt, pe.Dir, humanize.Count(len(pe.Faults), "fault"))
	}
	if err != nil {
		return fmt.Errorf("merge into %s: %w", o.Out, err)
	}
	etags := make([]string, len(copies))
	for i, c := range copies {
		if c.Source.Path != m.Files[i].Path || c.Cut.Chunk != int64(i) || c.Cut.Piece != 0 {
			return fmt.Errorf("%w: part %s: %s holds chunk %d piece %d, not the merged dataset's shard %s (a part built without --in-place, or damaged); rebuild that part", errCorrupt, parts.Dirs[c.Part], c.Source.Path, c.Cut.Chunk, c.Cut.Piece, m.Files[i].Path)
		}
		etags[i] = pinned.ETag(c.Source.Path)
	}
	manifest, err := m.Marshal()
	if err != nil {
		return err
	}
	err = b.PublishInPlace(ctx, m, manifest, etags, s3.PublishOptions{
		Formats: outputNames(false), Command: "merge",
		Warn: func(msg string) { fmt.Fprintln(o.IO.Err, "packer: warning:", msg) },
	})
	if errors.Is(err, s3.ErrDatasetExists) || errors.Is(err, s3.ErrInPlace) {
		return usagef(fmt.Errorf("merge into %s: %w", o.Out, err))
	}
	if err != nil {
		return fmt.Errorf("merge into %s: %w", o.Out, err)
	}
	fmt.Fprintf(o.IO.Out, "merged %s: %s from %s into %s [%s, %s, %s] in place (only the manifest written); %.2fs\n",
		humanize.Count(len(parts.Dirs), "part"), humanize.Count(sum.Records, "record"), humanize.Count(sum.Items, "input"),
		o.Out, m.Format, humanize.Count(len(m.Files), "file"), humanize.Bytes(sum.FileBytes), time.Since(start).Seconds())
	if sum.Skipped > 0 {
		fmt.Fprintf(o.IO.Out, "skipped %s (listed in %s/manifest.json)\n", humanize.Count(sum.Skipped, "input"), o.Out)
	}
	return nil
}
