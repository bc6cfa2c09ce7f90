package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// checkpointBytes is a fault plan that injects nothing and counts the PUTs of a build's
// checkpoint (the checkpoint object and its segments) and the bytes they send.
type checkpointBytes struct {
	mu          sync.Mutex
	puts, bytes int64
}

func (c *checkpointBytes) plan(r *http.Request, _, _ int) s3test.Fault {
	if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/.packer-checkpoint") {
		c.mu.Lock()
		c.puts++
		c.bytes += r.ContentLength
		c.mu.Unlock()
	}
	return s3test.None
}

// TestS3CheckpointBytes: the bytes a build to s3:// writes for its checkpoints in the bucket
// grow about as the shard count, not as its square: the same build of fashion-mnist's test
// split, a checkpoint at every shard, into about 4 times as many shards, writes well under 16
// times the checkpoint bytes (a checkpoint that rewrote the whole record each time wrote about
// 16 times as many). Both datasets are the local builds' bytes.
func TestS3CheckpointBytes(t *testing.T) {
	srv := s3Setup(t, "ckbytes")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var shards [2]int
	var counted [2]*checkpointBytes
	for i, size := range []string{"128KB", "32KB"} {
		args := []string{"--split", "test", "--shard-size", size, "--checkpoint-every", "0"}
		local := filepath.Join(tmp, "local-"+size)
		mustRun(t, append([]string{"build", fmnist, "-o", local}, args...)...)
		want := localFiles(t, local)
		c := &checkpointBytes{}
		px := s3test.StartFaultProxy(t, srv, c.plan)
		t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
		mustRun(t, append([]string{"build", fmnist, "-o", "s3://ckbytes/" + size}, args...)...)
		if got := objects(t, srv, s3.URL{Bucket: "ckbytes", Prefix: size}); !mapsEqualBytes(got, want) {
			t.Errorf("--shard-size %s: the objects differ from the local build's files (%d objects, %d files)", size, len(got), len(want))
		}
		shards[i], counted[i] = len(want)-1, c
		t.Logf("--shard-size %s: %d shards, %d checkpoint PUTs, %d bytes", size, shards[i], c.puts, c.bytes)
	}
	if shards[1] < 3*shards[0] || shards[0] < 25 {
		t.Fatalf("%d and %d shards; want about 4 times as many, and many", shards[0], shards[1])
	}
	if counted[0].puts == 0 {
		t.Fatalf("no checkpoint was written")
	}
	ratio := float64(counted[1].bytes) / float64(counted[0].bytes)
	if ratio > 8 {
		t.Errorf("checkpoint bytes grew %.1f times for %.1f times the shards (%d → %d bytes); want well under the square (16)",
			ratio, float64(shards[1])/float64(shards[0]), counted[0].bytes, counted[1].bytes)
	}
}
