package s3

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestClaimConditional: the test server honours the conditions control objects rely on
// (If-None-Match: * and If-Match on PutObject): a second claim of a prefix is refused naming
// the first's owner, the claim is left as the first wrote it, and only its owner removes it; a
// write on a stale ETag is refused; a write whose answer was lost but that was made (repeated
// with the same bytes) succeeds.
func TestClaimConditional(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "claim")
	b := NewWithClient(srv.Client(""), URL{Bucket: "claim", Prefix: "out"}, Options{})
	ctx := context.Background()
	first, err := b.claimPrefix(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.claimPrefix(ctx); !errors.Is(err, ErrTakenOver) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("a second claim = %v; want ErrTakenOver naming the first's owner", err)
	}
	if _, etag, err := b.readControl(ctx, ClaimName); err != nil || etag != first.etag {
		t.Fatalf("the claim after a refused second one: ETag %q, %v; want the first's %q", etag, err, first.etag)
	}
	if err := b.dropControl(ctx, ClaimName, `"stale"`); !errors.Is(err, ErrTakenOver) {
		t.Errorf("a drop by another owner = %v; want ErrTakenOver", err)
	}
	if err := first.release(); err != nil {
		t.Fatal(err)
	}
	if data, _, err := b.readControl(ctx, ClaimName); err != nil || data != nil {
		t.Fatalf("the claim after its release: %q, %v", data, err)
	}

	e1, err := b.putControl(ctx, CheckpointName, []byte(`{"owner":"a"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.putControl(ctx, CheckpointName, []byte(`{"owner":"a","n":1}`), `"0123"`); !errors.Is(err, ErrTakenOver) {
		t.Errorf("a write on a stale ETag = %v; want ErrTakenOver", err)
	}
	if e, err := b.putControl(ctx, CheckpointName, []byte(`{"owner":"a"}`), ""); err != nil || e != e1 {
		t.Errorf("a repeated write of the same bytes = %q, %v; want success with ETag %q", e, err, e1)
	}
	if _, err := b.putControl(ctx, CheckpointName, []byte(`{"owner":"a","n":2}`), e1); err != nil {
		t.Errorf("a write on the current ETag: %v", err)
	}
}
