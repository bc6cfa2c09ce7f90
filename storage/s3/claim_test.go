package s3_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// streamStage opens a StreamStage of b whose local folder is dir (one machine's).
func streamStage(t *testing.T, b *s3.Backend, dir string, resume bool) (*s3.StreamStage, error) {
	t.Helper()
	opts := storage.StageOptions{Staging: func() (*storage.Staging, error) { return storage.OpenStaging(dir, "stage") }}
	return b.StreamStage(context.Background(), opts, resume)
}

// TestStreamStageOwner: a build that uploads as it goes owns its prefix through its checkpoint
// object, written with conditional writes: a build on another machine (another local folder)
// is refused there, naming the owner, unless it resumes; a resume on another machine takes the
// checkpoint's journal from the bucket and owns the prefix from then on, so that the first
// build's next checkpoint fails (ErrTakenOver) instead of both thinking they own it.
func TestStreamStageOwner(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "owner")
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "owner", Prefix: "ds"}, s3.Options{})
	tmp := t.TempDir()
	a, err := streamStage(t, b, filepath.Join(tmp, "a"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if a.TakenJournal() != nil {
		t.Errorf("a new build took a journal from the bucket")
	}
	if err := a.SaveCheckpoint([]byte("journal 1")); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveCheckpoint([]byte("journal 2")); err != nil {
		t.Fatalf("a second checkpoint of the owner: %v", err)
	}

	// Another machine's new build is refused, naming the owner.
	_, err = streamStage(t, b, filepath.Join(tmp, "c"), false)
	if err == nil || !strings.Contains(err.Error(), s3.CheckpointName) || !strings.Contains(err.Error(), "pid") {
		t.Errorf("a second build of the prefix: %v; want a refusal naming the checkpoint's owner", err)
	}

	// Another machine's resume takes the checkpoint over.
	r, err := streamStage(t, b, filepath.Join(tmp, "b"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if got := string(r.TakenJournal()); got != "journal 2" {
		t.Errorf("the resume on another machine took the journal %q; want %q", got, "journal 2")
	}
	if err := a.SaveCheckpoint([]byte("journal 3")); !errors.Is(err, s3.ErrTakenOver) {
		t.Errorf("the first build's checkpoint after the takeover: %v; want ErrTakenOver", err)
	}
	if err := r.SaveCheckpoint([]byte("journal 3")); err != nil {
		t.Errorf("the new owner's checkpoint: %v", err)
	}
	// A resume in the first build's folder (its record names an older checkpoint) takes the
	// bucket's, the newer.
	a.Release()
	a2, err := streamStage(t, b, filepath.Join(tmp, "a"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Release()
	if got := string(a2.TakenJournal()); got != "journal 3" {
		t.Errorf("the resume in the first folder took the journal %q; want the bucket's newer %q", got, "journal 3")
	}
	// The failed build that lost its prefix is the one now: it removes its checkpoint, and the
	// other one's later write fails rather than recreate it.
	a2.RemoveUploads()
	if _, err := b.Stat(context.Background(), s3.CheckpointName); err == nil {
		t.Errorf("the checkpoint is left after RemoveUploads")
	}
	if err := r.SaveCheckpoint([]byte("journal 4")); !errors.Is(err, s3.ErrTakenOver) {
		t.Errorf("a checkpoint after the owner removed it: %v; want ErrTakenOver", err)
	}
}
