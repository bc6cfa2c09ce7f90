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

// TestClaimSeesCheckpoint: a build uploading as it goes (its checkpoint object) and a merge by
// copy (its claim) that pass their check of OUT at the same moment write two different control
// objects, which no conditional write keeps apart; their shards have the same names. The
// merge's claim is refused once it finds the build's checkpoint beside it (and removed: it
// copies nothing), and a build's checkpoint once it finds a claim, so that the two never both
// write the files of one dataset.
func TestClaimSeesCheckpoint(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "race")
	b := NewWithClient(srv.Client(""), URL{Bucket: "race", Prefix: "out"}, Options{})
	ctx := context.Background()
	if _, err := b.putControl(ctx, CheckpointName, []byte(`{"owner":"build","host":"h","pid":7}`), ""); err != nil {
		t.Fatal(err)
	}
	if c, err := b.claimPrefix(ctx); !errors.Is(err, ErrTakenOver) || !strings.Contains(err.Error(), "pid 7") {
		t.Fatalf("a claim beside a build's checkpoint = %v, %v; want ErrTakenOver naming the build", c, err)
	}
	if data, _, err := b.readControl(ctx, ClaimName); err != nil || data != nil {
		t.Errorf("the refused claim is left: %q, %v", data, err)
	}
	if err := b.otherControl(ctx, ClaimName); err != nil {
		t.Errorf("the build's check with no claim there: %v", err)
	}
	if _, err := b.putControl(ctx, ClaimName, []byte(`{"owner":"merge","host":"h","pid":8}`), ""); err != nil {
		t.Fatal(err)
	}
	if err := b.otherControl(ctx, ClaimName); !errors.Is(err, ErrTakenOver) || !strings.Contains(err.Error(), "pid 8") {
		t.Errorf("the build's check with a merge's claim there = %v; want ErrTakenOver naming the merge", err)
	}
}
