package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/internal/progress"
	"github.com/packer-dev/packer/storage"
)

// runBuildRemote builds into an object store (-o s3://bucket/prefix): the dataset is built as
// usual into the local folder of the store's stage (under a new folder in $TMPDIR, removed at
// the end, or by the next object-store command if this one is killed: newStaging; the machine
// needs room for the whole dataset there), then published by the stage (for s3,
// s3.Backend.Publish: data objects first, each read back and checked against its SHA-256,
// manifest.json last with a conditional write). --force removes an interrupted build's
// leftovers under the prefix and replaces a dataset there: the new files go under a new
// generation sub-prefix, the manifest is swapped on the condition that it is still the old
// one, and the old files are deleted only then. A part (--part) is published the same way,
// for a merge to read.
func runBuildRemote(ctx context.Context, o *buildOptions) error {
	if o.Resume {
		return usagef(errors.New("--resume keeps its checkpoint in a local OUT's staging folder; build to a local folder to resume, or rebuild to the bucket"))
	}
	stage, publish, err := remoteTarget(ctx, o.Out, o.Force, o.IO.Err)
	if err != nil {
		return err
	}
	defer stage.Discard()
	return runBuildTo(ctx, o, stage.Dir(), func(string) error { return publish() })
}

// remoteTarget opens the object-store OUT of a build or merge and its stage (Remote.Stage):
// it checks, before any work, that OUT may be written (a prefix with a dataset is refused, an
// interrupted build's leftovers too unless force), and makes the local staging folder the
// dataset is made in first (newStaging: the caller Discards the stage). publish uploads the
// staged dataset, with progress on errw.
func remoteTarget(ctx context.Context, out string, force bool, errw io.Writer) (stage storage.UploadStage, publish func() error, err error) {
	b, loc, err := openRemote(ctx, out, "")
	if err != nil {
		return nil, nil, err
	}
	var bar *progress.Bar
	stage, err = b.Stage(ctx, storage.StageOptions{
		Force: force,
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
		return nil, nil, err
	}
	return stage, func() error {
		err := stage.Publish(ctx)
		bar.Finish()
		return err
	}, nil
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
