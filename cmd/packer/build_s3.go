package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/internal/progress"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// openTarget opens OUT of a build or merge through its entry in the locations table and
// returns the local folder the dataset is made in, publish, which makes the made dataset the
// one at OUT, and done, which the caller calls when it ends.
//
// A local OUT is its own folder: the engine stages the dataset beside it and publishes it
// itself (a storage.LocalStage that pipeline makes and publishes under OUT's lock, after its
// recovery of an interrupted build and with its resume: docs/architecture.md), so publish is
// nil. An object-store OUT is built as usual into the local folder of the store's stage (under
// a new folder in $TMPDIR, removed at the end, or by the next object-store command if this one
// is killed: newStaging; the machine needs room for the whole dataset there), then published
// by the stage (for s3, s3.Backend.Publish: data objects first, each read back and checked
// against its SHA-256, manifest.json last with a conditional write). Before any work the store
// checks that OUT may be written: a prefix with a dataset is refused, an interrupted build's
// leftovers too unless force; with force they are removed and a dataset there is replaced (the
// new files go under a new generation sub-prefix, the manifest is swapped on the condition that
// it is still the old one, and the old files are deleted only then). A part (--part) is
// published the same way, for a merge to read. part is the part a build writes (nil: a whole
// dataset): with force, a part at OUT is replaced only by the same part, as locally
// (pipeline.CheckPartReplace before any work, pipeline.CheckSamePart before the publish). The
// upload's progress goes to errw.
func openTarget(ctx context.Context, out string, force bool, part *pipeline.Part, errw io.Writer) (dir string, publish func(dir string) error, done func(), err error) {
	if !remote(out) {
		return out, nil, func() {}, nil
	}
	b, loc, err := openRemote(ctx, out, "")
	if err != nil {
		return "", nil, nil, err
	}
	var old *shard.PartInfo
	if force {
		if old, err = remotePart(ctx, b, out); err != nil {
			return "", nil, nil, err
		}
		if err := pipeline.CheckPartReplace(out, old, part); err != nil {
			return "", nil, nil, err
		}
	}
	var bar *progress.Bar
	stage, err := b.Stage(ctx, storage.StageOptions{
		Force:   force,
		Formats: outputNames(false),
		Staging: func() (*storage.Staging, error) {
			s, err := newStaging("packer-s3-build-*", errw)
			if err != nil {
				return nil, fmt.Errorf("the local staging folder: %w", err)
			}
			return s, nil
		},
		Warn: func(msg string) { fmt.Fprintln(errw, "packer: warning:", msg) },
		Progress: func(sent, total int64) {
			if bar == nil {
				bar = progress.New(errw, "uploading to "+loc, "bytes", total)
			}
			bar.Set(sent)
		},
		PartSent: s3PartSentHook,
	})
	if err != nil {
		return "", nil, nil, err
	}
	return stage.Dir(), func(dir string) error {
		if old != nil {
			data, err := os.ReadFile(filepath.Join(dir, shard.ManifestName))
			if err != nil {
				return err
			}
			if built := pipeline.ManifestPart(data); built != nil {
				if err := pipeline.CheckSamePart(out, old, built); err != nil {
					return err
				}
			}
		}
		err := stage.Publish(ctx)
		bar.Finish()
		return err
	}, func() { stage.Discard() }, nil
}

// stagingPatterns name the local staging folders of the object-store commands in $TMPDIR: a
// dataset built or merged before its upload, a copy of an object-store source or of the
// parts of a merge.
var stagingPatterns = []string{"packer-s3-build-*", "packer-s3-merge-*", "packer-s3-source-*"}

// newStaging makes a new staging folder in $TMPDIR named by pattern (one of stagingPatterns),
// locked for as long as this command uses it (storage.NewStaging), after removing the ones
// that killed commands left there (storage.RemoveStale: only folders whose lock no running
// command holds), saying so on errw. The caller removes it when it ends.
func newStaging(pattern string, errw io.Writer) (*storage.Staging, error) {
	for _, p := range stagingPatterns {
		removed, err := storage.RemoveStale("", p)
		for _, r := range removed {
			fmt.Fprintf(errw, "packer: removed %s (%s), the local staging folder of a packer command that was killed\n", r.Dir, humanize.Bytes(r.Bytes))
		}
		if err != nil {
			fmt.Fprintln(errw, "packer: warning:", err)
		}
	}
	return storage.NewStaging("", pattern)
}

// s3PartSentHook is called after each part of a multipart upload is sent; the crash-test
// binary sets it (s3_crashtest.go).
var s3PartSentHook func(ctx context.Context, key string, part int32)

// remotePart is the part recorded by the manifest at the object-store location b (out), or nil
// when there is no manifest there or it records no part.
func remotePart(ctx context.Context, b storage.Backend, out string) (*shard.PartInfo, error) {
	r, err := b.Open(ctx, shard.ManifestName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: read its %s: %w", out, shard.ManifestName, err)
	}
	defer r.Close()
	if r.Size() > shard.MaxManifestSize {
		return nil, nil // not a manifest packer wrote: the stage refuses it
	}
	data := make([]byte, r.Size())
	if _, err := r.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: read its %s: %w", out, shard.ManifestName, err)
	}
	return pipeline.ManifestPart(data), nil
}
