package main

import (
	"context"
	"fmt"
	"io"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/internal/progress"
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
// published the same way, for a merge to read. The upload's progress goes to errw.
func openTarget(ctx context.Context, out string, force bool, errw io.Writer) (dir string, publish func(dir string) error, done func(), err error) {
	if !remote(out) {
		return out, nil, func() {}, nil
	}
	b, loc, err := openRemote(ctx, out, "")
	if err != nil {
		return "", nil, nil, err
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
	return stage.Dir(), func(string) error {
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
