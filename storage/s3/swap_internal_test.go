package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"strings"
	"testing"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

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

// TestCheckObject: the read-back after an upload (ranged GETs in parallel, hashed in order)
// accepts the object's own size and SHA-256, over several chunks and a short last one, and
// refuses any other size or digest, naming the object.
func TestCheckObject(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "check")
	b := NewWithClient(srv.Client(""), URL{Bucket: "check", Prefix: "ds"}, Options{})
	ctx := context.Background()
	for _, size := range []int{0, 1, 8 << 20, 8<<20 + 1, 5*(8<<20) + 12345} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + i>>13)
		}
		storagetest.Put(t, b, "shard-00000.pks", data)
		sum := sha256.Sum256(data)
		sha := hex.EncodeToString(sum[:])
		if err := b.checkObject(ctx, "shard-00000.pks", int64(size), sha); err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		bad := sha256.Sum256(append(data, 0))
		if err := b.checkObject(ctx, "shard-00000.pks", int64(size), hex.EncodeToString(bad[:])); err == nil || !strings.Contains(err.Error(), "s3://check/ds/shard-00000.pks: the uploaded object reads back as") {
			t.Fatalf("%d bytes, another digest: %v", size, err)
		}
		if err := b.checkObject(ctx, "shard-00000.pks", int64(size)+1, sha); err == nil {
			t.Fatalf("%d bytes, another size: no error", size)
		}
	}
}

// TestUnsignedPayload: a dataset's files go unsigned only over HTTPS (as the AWS SDKs do), and
// PACKER_S3_UNSIGNED_PAYLOAD overrides the choice either way.
func TestUnsignedPayload(t *testing.T) {
	at := func(ep *string) *Backend {
		return NewWithClient(awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: ep}), URL{Bucket: "any"}, Options{})
	}
	https, http := "https://s3.example.com", "http://127.0.0.1:9000"
	for _, c := range []struct {
		ep   *string
		env  string
		want bool
	}{{nil, "", true}, {&https, "", true}, {&http, "", false}, {&http, "1", true}, {&https, "0", false}} {
		t.Setenv("PACKER_S3_UNSIGNED_PAYLOAD", c.env)
		if got := at(c.ep).unsignedPayload(); got != c.want {
			ep := "<default>"
			if c.ep != nil {
				ep = *c.ep
			}
			t.Errorf("endpoint %s, PACKER_S3_UNSIGNED_PAYLOAD=%q: unsigned %v, want %v", ep, c.env, got, c.want)
		}
	}
}
