package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestKeepAfterTakenOver: a resumed build that lost OUT to another resume before it checked
// its checkpoint's files (Keep: every kept shard read back, which takes a while for many)
// deletes nothing: the objects past its checkpoint are the new owner's uploads now. It fails
// matching ErrTakenOver; the new owner's upload is still there.
func TestKeepAfterTakenOver(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "keep")
	b := NewWithClient(srv.Client(""), URL{Bucket: "keep", Prefix: "ds"}, Options{})
	ctx := context.Background()
	tmp := t.TempDir()
	open := func(dir string, resume bool) *StreamStage {
		t.Helper()
		opts := storage.StageOptions{Staging: func() (*storage.Staging, error) { return storage.OpenStaging(filepath.Join(tmp, dir), "stage") }}
		s, err := b.StreamStage(ctx, opts, resume)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Release)
		return s
	}
	put := func(s *StreamStage, i int, data string) shard.FileEntry {
		t.Helper()
		dir := t.TempDir()
		fe := fileEntry(t, dir, i, data)
		if err := s.Put(dir, fe); err != nil {
			t.Fatal(err)
		}
		return fe
	}
	a := open("a", false)
	kept := put(a, 0, "the first shard")
	if err := a.SaveCheckpoint([]byte(`{"files":1}`)); err != nil {
		t.Fatal(err)
	}
	// Two resumes on other machines: the first opens, the second takes OUT over from it,
	// checks its checkpoint and uploads the next shard; then the first checks its own.
	first := open("first", true)
	second := open("second", true)
	if err := second.Keep([]shard.FileEntry{kept}); err != nil {
		t.Fatal(err)
	}
	next := put(second, 1, "the second shard, the new owner's")
	err := first.Keep([]shard.FileEntry{kept})
	if !errors.Is(err, ErrTakenOver) {
		t.Errorf("Keep of a build that lost OUT: %v; want ErrTakenOver", err)
	}
	if _, err := b.etag(ctx, next.Path); err != nil {
		t.Errorf("the new owner's upload %s after the old owner's Keep: %v", next.Path, err)
	}
}

// fileEntry writes the shard i holding data in dir and returns its entry.
func fileEntry(t *testing.T, dir string, i int, data string) shard.FileEntry {
	t.Helper()
	name := fmt.Sprintf("shard-%05d.pks", i)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(data))
	return shard.FileEntry{Path: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Records: 1}
}

// TestPutAfterTakenOver: a resumed build that lost OUT to another resume neither deletes nor
// overwrites an object the new owner uploaded under a name it writes too (with other bytes:
// a source changed between the two): it fails matching ErrTakenOver, and the new owner's
// object stays.
func TestPutAfterTakenOver(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "put")
	b := NewWithClient(srv.Client(""), URL{Bucket: "put", Prefix: "ds"}, Options{})
	ctx := context.Background()
	tmp := t.TempDir()
	open := func(dir string, resume bool) *StreamStage {
		t.Helper()
		opts := storage.StageOptions{Staging: func() (*storage.Staging, error) { return storage.OpenStaging(filepath.Join(tmp, dir), "stage") }}
		s, err := b.StreamStage(ctx, opts, resume)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Release)
		return s
	}
	a := open("a", false)
	if err := a.SaveCheckpoint([]byte(`{"files":0}`)); err != nil {
		t.Fatal(err)
	}
	first := open("first", true)
	second := open("second", true)
	dir := t.TempDir()
	fe := fileEntry(t, dir, 0, "the new owner's shard")
	if err := second.Put(dir, fe); err != nil {
		t.Fatal(err)
	}
	etag, err := b.etag(ctx, fe.Path)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	other := fileEntry(t, dir, 0, "the old owner's other shard")
	if err := first.Put(dir, other); !errors.Is(err, ErrTakenOver) {
		t.Errorf("Put of a build that lost OUT over the new owner's object: %v; want ErrTakenOver", err)
	}
	if now, err := b.etag(ctx, fe.Path); err != nil || now != etag {
		t.Errorf("the new owner's %s after the old owner's Put: ETag %s, %v; want %s", fe.Path, now, err, etag)
	}
}
