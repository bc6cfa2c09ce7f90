package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/packer-dev/packer/internal/progress"
	"github.com/packer-dev/packer/storage/s3"
)

// runBuildS3 builds into an object store (-o s3://bucket/prefix): the dataset is built as
// usual into a local staging folder (a new temporary folder under $TMPDIR, removed at the
// end, so the machine needs room for the whole dataset there), then published by
// s3.Backend.Publish: data objects first, each read back and checked against its SHA-256,
// manifest.json last with a conditional write. --force removes an interrupted build's
// leftovers under the prefix and replaces a dataset there: the new files go under a new
// generation sub-prefix, the manifest is swapped on the condition that it is still the old
// one, and the old files are deleted only then. A part (--part) is published the same way,
// for a merge to read.
func runBuildS3(ctx context.Context, o *buildOptions) error {
	if o.Resume {
		return usagef(errors.New("--resume keeps its checkpoint in a local OUT's staging folder; build to a local folder to resume, or rebuild to the bucket"))
	}
	b, tmp, err := s3Target(ctx, o.Out, o.Force)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	return runBuildTo(ctx, o, filepath.Join(tmp, "dataset"), func(dir string) error {
		return publishS3(ctx, b, dir, o.Force, o.IO.Err)
	})
}

// s3Target opens the object-store OUT of a build or merge and checks, before any work, that
// it may be written (a prefix with a dataset is refused, an interrupted build's leftovers too
// unless force), and makes the local staging folder the dataset is made in first (a new
// temporary folder under $TMPDIR: the caller removes it).
func s3Target(ctx context.Context, out string, force bool) (*s3.Backend, string, error) {
	u, err := s3.ParseURL(out)
	if err != nil {
		return nil, "", usagef(err)
	}
	opts, err := s3Options()
	if err != nil {
		return nil, "", err
	}
	b, err := s3.New(ctx, u, opts)
	if err != nil {
		return nil, "", err
	}
	if err := b.CheckPrefix(ctx, force, force); err != nil {
		return nil, "", err
	}
	tmp, err := os.MkdirTemp("", "packer-s3-build-*")
	if err != nil {
		return nil, "", fmt.Errorf("the local staging folder: %w", err)
	}
	return b, tmp, nil
}

// publishS3 uploads the complete dataset in dir to b (s3.Backend.Publish), with progress.
func publishS3(ctx context.Context, b *s3.Backend, dir string, force bool, errw io.Writer) error {
	var bar *progress.Bar
	err := b.Publish(ctx, dir, s3.PublishOptions{
		Clear:   force,
		Replace: force,
		Warn:    func(msg string) { fmt.Fprintln(errw, "packer: warning:", msg) },
		Progress: func(sent, total int64) {
			if bar == nil {
				bar = progress.New(errw, "uploading to "+b.URL().String(), "bytes", total)
			}
			bar.Set(sent)
		},
		PartSent: s3PartSentHook,
	})
	bar.Finish()
	return err
}

// s3PartSentHook is called after each part of a multipart upload is sent; the crash-test
// binary sets it (s3_crashtest.go).
var s3PartSentHook func(ctx context.Context, key string, part int32)
