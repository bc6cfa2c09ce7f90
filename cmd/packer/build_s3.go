package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/internal/progress"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
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
// upload's progress goes to errw. command is the packer command writing OUT ("build", "merge"),
// which a refusal that asks for it to be run again names.
func openTarget(ctx context.Context, command, out string, force bool, part *pipeline.Part, errw io.Writer) (dir string, publish func(dir string) error, done func(), err error) {
	if !remote(out) {
		return out, nil, func() {}, nil
	}
	b, loc, err := openRemote(ctx, out, "")
	if err != nil {
		return "", nil, nil, err
	}
	old, err := checkRemotePart(ctx, b, out, force, part)
	if err != nil {
		return "", nil, nil, err
	}
	var bar *progress.Bar
	opts := stageOptions(force, "packer-s3-build-*", loc, &bar, errw)
	opts.Command = command
	stage, err := b.Stage(ctx, opts)
	if err != nil {
		return "", nil, nil, err
	}
	return stage.Dir(), publishStage(ctx, out, old, stage, &bar), func() { stage.Discard() }, nil
}

// checkRemotePart is the part recorded at the object-store OUT b (out) that a build with force
// replaces (nil: none), after checking that part (nil: a whole dataset) may replace it
// (pipeline.CheckPartReplace).
func checkRemotePart(ctx context.Context, b storage.Backend, out string, force bool, part *pipeline.Part) (*shard.PartInfo, error) {
	if !force {
		return nil, nil
	}
	old, err := remotePart(ctx, b, out)
	if err != nil {
		return nil, err
	}
	return old, pipeline.CheckPartReplace(out, old, part)
}

// stageOptions are the options of an object-store OUT's stage: its local folder a new one named
// by pattern (newStaging), or where pattern has no '*' the folder of that name in $TMPDIR
// (storage.OpenStaging); the upload's progress bar, made at its first report, in *bar.
func stageOptions(force bool, pattern, loc string, bar **progress.Bar, errw io.Writer) storage.StageOptions {
	return storage.StageOptions{
		Force:   force,
		Formats: outputNames(false),
		Staging: func() (*storage.Staging, error) {
			var s *storage.Staging
			var err error
			if strings.Contains(pattern, "*") {
				s, err = newStaging(pattern, errw)
			} else {
				removeStaleStaging(errw)
				s, err = storage.OpenStaging("", pattern)
			}
			if err != nil {
				return nil, fmt.Errorf("the local staging folder: %w", err)
			}
			return s, nil
		},
		Warn: func(msg string) { fmt.Fprintln(errw, "packer: warning:", msg) },
		Progress: func(sent, total int64) {
			if *bar == nil {
				*bar = progress.New(errw, "uploading to "+loc, "bytes", total)
			}
			(*bar).Set(sent)
		},
		PartSent: s3PartSentHook,
	}
}

// publishStage is the publish of a stage of OUT: with old (the part a build with force
// replaces), the part built must be the same (pipeline.CheckSamePart).
func publishStage(ctx context.Context, out string, old *shard.PartInfo, stage storage.Stage, bar **progress.Bar) func(dir string) error {
	return func(dir string) error {
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
		(*bar).Finish()
		return err
	}
}

// streamTarget is an object-store OUT a build uploads its shards to as they are finished.
type streamTarget struct {
	dir     string             // the local folder the build commits (manifest, and the shards not uploaded yet)
	store   output.FileStore   // takes each finished shard (s3.StreamStage.Put)
	publish func(string) error // uploads the manifest, last
	stage   *s3.StreamStage
}

// streamStagingName is the name in $TMPDIR of the local folder of the builds to the
// object-store location out (canonical): the same for every build of out, so that a resumed
// build finds the checkpoint and the record of the uploads of the interrupted one there.
func streamStagingName(out string) string {
	sum := sha256.Sum256([]byte(out))
	return "packer-s3-out-" + hex.EncodeToString(sum[:8])
}

// openStreamTarget opens the object-store OUT of a build whose output hands its files over as
// they are finished (shards, and every part): each shard is uploaded (multipart for a large one,
// read back and checked) while the next one is written and then removed from local disk, so that
// local disk holds at most a few shards; the manifest is uploaded last, as openTarget's publish
// does (s3.StreamStage). The local folder is streamStagingName's, locked while the build runs
// (a second build of OUT on this machine is refused); it keeps the build's checkpoint and the
// record of its uploads when the build is interrupted, for --resume, which checks the objects
// there and takes them over. part and force as openTarget's.
func openStreamTarget(ctx context.Context, out string, force, resume bool, part *pipeline.Part, errw io.Writer) (*streamTarget, error) {
	r, loc, err := openRemote(ctx, out, "")
	if err != nil {
		return nil, err
	}
	b, ok := r.(*s3.Backend)
	if !ok {
		return nil, fmt.Errorf("%s: the %T of its store cannot upload as it builds", out, r)
	}
	old, err := checkRemotePart(ctx, b, out, force, part)
	if err != nil {
		return nil, err
	}
	var bar *progress.Bar
	stage, err := b.StreamStage(ctx, stageOptions(force, streamStagingName(loc), loc, &bar, errw), resume)
	if err != nil {
		return nil, err
	}
	var store output.FileStore = stage
	if s3ShardStoredHook != nil {
		store = hookedStore{stage}
	}
	return &streamTarget{dir: stage.Dir(), store: store, publish: publishStage(ctx, out, old, stage, &bar), stage: stage}, nil
}

// done ends the build of the target with its error: on success, or on a failure that keeps no
// checkpoint, the local folder is removed (and after a failure the objects uploaded too, and
// the checkpoint in the bucket); an interrupted build's checkpoint
// (pipeline.CheckpointKeptError), or a refused resume's, is kept with its uploads for --resume,
// the local folder's lock released. A build that another one took over (s3.ErrTakenOver)
// deletes nothing in the bucket: the objects there are the other build's now. A build that
// failed otherwise checks first that it still owns the prefix (a resume elsewhere may have
// taken it over while it ran, and published): if not, it deletes nothing either, and its
// error says who owns the prefix. done returns the build's error.
func (t *streamTarget) done(err error) error {
	var kept *pipeline.CheckpointKeptError
	switch {
	case err == nil || errors.Is(err, s3.ErrTakenOver):
		t.stage.Discard()
	case errors.As(err, &kept) || errors.Is(err, pipeline.ErrResume):
		t.stage.Release()
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if oerr := t.stage.Owned(ctx); errors.Is(oerr, s3.ErrTakenOver) {
			err = fmt.Errorf("%w (nothing of this build's was deleted: %w)", err, oerr)
		} else if !errors.Is(err, s3.ErrFilesKept) && !errors.Is(err, s3.ErrDatasetExists) {
			// Not where this build's manifest may be in place, nor where another build's
			// (published while this one ran, maybe with the objects this one uploaded).
			t.stage.RemoveUploads()
		}
		t.stage.Discard()
	}
	return err
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
	removeStaleStaging(errw)
	return storage.NewStaging("", pattern)
}

// removeStaleStaging removes the staging folders (stagingPatterns) that killed commands left in
// $TMPDIR, saying so on errw.
func removeStaleStaging(errw io.Writer) {
	for _, p := range stagingPatterns {
		removed, err := storage.RemoveStale("", p)
		for _, r := range removed {
			fmt.Fprintf(errw, "packer: removed %s (%s), the local staging folder of a packer command that was killed\n", r.Dir, humanize.Bytes(r.Bytes))
		}
		if err != nil {
			fmt.Fprintln(errw, "packer: warning:", err)
		}
	}
}

// s3PartSentHook is called after each part of a multipart upload is sent; the crash-test
// binary sets it (s3_crashtest.go).
var s3PartSentHook func(ctx context.Context, key string, part int32)

// s3ShardStoredHook is called after each shard a build to object storage has uploaded (its
// name); the crash-test binary sets it (s3_crashtest.go).
var s3ShardStoredHook func(name string)

// hookedStore calls s3ShardStoredHook after each Put.
type hookedStore struct{ output.FileStore }

func (h hookedStore) Put(dir string, fe shard.FileEntry) error {
	err := h.FileStore.Put(dir, fe)
	if err == nil {
		s3ShardStoredHook(fe.Path)
	}
	return err
}

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
