package s3_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// TestRemoveDatasetReplaced: merge --remove-parts deletes a part's objects once the merged
// dataset is published, by the part's manifest as the merge read it. A part rebuilt in the
// meantime (a retried part job, with --force: a new manifest, its files under a new generation)
// is not the part merged: its manifest and files are left, and the removal says why. The part
// as merged is removed.
func TestRemoveDatasetReplaced(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "rmparts")
	ctx := context.Background()
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "rmparts", Prefix: "p0"}, s3.Options{})
	first := fakeDataset(t, 1, 1000, 2000)
	if err := b.Publish(ctx, first, s3.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	pinned := b.PinnedFS(ctx)
	merged, err := shard.ReadManifestFS(pinned)
	if err != nil {
		t.Fatal(err)
	}
	second := fakeDataset(t, 2, 3000, 500)
	if err := b.Publish(ctx, second, s3.PublishOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	before := listAll(t, b)
	err = b.RemoveDataset(ctx, merged, pinned.ETag(shard.ManifestName))
	t.Logf("RemoveDataset of the part merged, after it was rebuilt: %v", err)
	if after := listAll(t, b); len(after) != len(before) {
		t.Errorf("the rebuilt part's objects: %v before the removal, %v after", before, after)
	}
	if err == nil {
		t.Errorf("RemoveDataset of a part rebuilt since it was merged succeeded")
	}
	if _, err := b.Stat(ctx, shard.ManifestName); err != nil {
		t.Fatalf("the rebuilt part's manifest: %v", err)
	}
	m, err := shard.ReadManifestFS(storage.ShardFS(ctx, b))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 2 || m.Files[0].Size != 3000 {
		t.Errorf("the rebuilt part's manifest changed")
	}
	for _, fe := range m.Files {
		if got, err := os.ReadFile(filepath.Join(second, filepath.Base(fe.Path))); err != nil || !bytes.Equal(storagetest.Get(t, b, fe.Path), got) {
			t.Errorf("the rebuilt part's %s changed: %v", fe.Path, err)
		}
	}
	// The part as merged is removed whole.
	pinned = b.PinnedFS(ctx)
	if merged, err = shard.ReadManifestFS(pinned); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveDataset(ctx, merged, pinned.ETag(shard.ManifestName)); err != nil {
		t.Fatal(err)
	}
	if left := listAll(t, b); len(left) != 0 {
		t.Errorf("RemoveDataset left %v", left)
	}
}
