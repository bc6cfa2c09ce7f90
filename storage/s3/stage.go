package s3

import (
	"context"
	"path/filepath"

	"github.com/packer-dev/packer/storage"
)

// Stage is a dataset staged for the object store: built in a local folder, then published
// by Publish (Backend.Publish: data objects first, each read back and checked, the manifest
// last with a conditional write). It is the object store's storage.Stage, as LocalStage is
// the local file system's.
type Stage struct {
	b       *Backend
	staging *storage.Staging
	dir     string
	opts    storage.StageOptions
}

var _ storage.UploadStage = (*Stage)(nil)

// Stage checks that the prefix may receive a new dataset (CheckPrefix: with opts.Force, a
// dataset there is replaced and an interrupted build's leftovers are removed), then makes the
// local staging folder (opts.Staging) the dataset is built in, under it as "dataset".
func (b *Backend) Stage(ctx context.Context, opts storage.StageOptions) (storage.UploadStage, error) {
	if _, err := b.prepare(ctx, opts.Force, opts.Force, opts.Formats, leftovers{}, opts.Command); err != nil {
		return nil, err
	}
	staging, err := opts.Staging()
	if err != nil {
		return nil, err
	}
	return &Stage{b: b, staging: staging, dir: filepath.Join(staging.Dir, "dataset"), opts: opts}, nil
}

// Dir is the local folder the dataset is built in.
func (s *Stage) Dir() string { return s.dir }

// Backend is the local folder's backend.
func (s *Stage) Backend() storage.Backend { return storage.NewLocal(s.dir) }

// Publish uploads the complete dataset in Dir below the prefix (Backend.Publish), replacing a
// dataset there where the stage was made with Force.
func (s *Stage) Publish(ctx context.Context) error {
	return s.b.Publish(ctx, s.dir, PublishOptions{
		Clear:    s.opts.Force,
		Replace:  s.opts.Force,
		Formats:  s.opts.Formats,
		Warn:     s.opts.Warn,
		Progress: s.opts.Progress,
		PartSent: s.opts.PartSent,
		Command:  s.opts.Command,
	})
}

// Discard removes the local staging folder, and releases its lock.
func (s *Stage) Discard() error { return s.staging.Remove() }
