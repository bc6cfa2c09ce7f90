package main

import (
	"context"
	"errors"
	"fmt"
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
// leftovers under the prefix, never a dataset: replacing a dataset in object storage is
// refused for now.
func runBuildS3(ctx context.Context, o *buildOptions) error {
	if o.part != nil || o.Resume {
		return usagef(errors.New("--part and --resume write a local OUT; build to a local folder (object storage takes whole builds only, for now)"))
	}
	u, err := s3.ParseURL(o.Out)
	if err != nil {
		return usagef(err)
	}
	opts, err := s3Options()
	if err != nil {
		return err
	}
	b, err := s3.New(ctx, u, opts)
	if err != nil {
		return err
	}
	// Before the work: a prefix with a dataset is refused, leftovers too without --force.
	if err := b.CheckPrefix(ctx, o.Force); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "packer-s3-build-*")
	if err != nil {
		return fmt.Errorf("the local staging folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	return runBuildTo(ctx, o, filepath.Join(tmp, "dataset"), func(dir string) error {
		var bar *progress.Bar
		err := b.Publish(ctx, dir, s3.PublishOptions{
			Clear: o.Force,
			Progress: func(sent, total int64) {
				if bar == nil {
					bar = progress.New(o.IO.Err, "uploading to "+u.String(), "bytes", total)
				}
				bar.Set(sent)
			},
			PartSent: s3PartSentHook,
		})
		bar.Finish()
		return err
	})
}

// s3PartSentHook is called after each part of a multipart upload is sent; the crash-test
// binary sets it (s3_crashtest.go).
var s3PartSentHook func(ctx context.Context, key string, part int32)
