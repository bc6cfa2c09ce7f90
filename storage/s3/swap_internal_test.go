package s3

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// TestSwapManifestConditional: the manifest swap of a replacing publish is a conditional
// write: with an ETag that is no longer the manifest's (another build replaced it first) it
// is refused and the manifest is left as it is; with the current one it goes through.
func TestSwapManifestConditional(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "swap")
	b := NewWithClient(srv.Client(""), URL{Bucket: "swap", Prefix: "ds"}, Options{})
	ctx := context.Background()
	storagetest.Put(t, b, shard.ManifestName, []byte("first"))
	etag, err := b.etag(ctx, shard.ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.Put(t, b, shard.ManifestName, []byte("second, by another build"))
	if err := b.swapManifest(ctx, []byte("third"), etag); err == nil || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a swap on a stale ETag = %v, want a refused conditional write", err)
	}
	if got := storagetest.Get(t, b, shard.ManifestName); string(got) != "second, by another build" {
		t.Fatalf("a refused swap changed the manifest to %q", got)
	}
	etag, err = b.etag(ctx, shard.ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.swapManifest(ctx, []byte("third"), etag); err != nil {
		t.Fatal(err)
	}
	if got := storagetest.Get(t, b, shard.ManifestName); string(got) != "third" {
		t.Fatalf("the swap left %q", got)
	}
}
