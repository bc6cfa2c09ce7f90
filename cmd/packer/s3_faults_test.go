package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestS3Faults: with a fault proxy between packer and the store (bursts of 500 and 503
// SlowDown, GET bodies cut short), a build to s3:// publishes the bytes of the local build and
// verify passes, and so do two parts built into the bucket and merged there; with every upload refused (500), the build fails naming the attempts made
// and publishes nothing at its prefix.
func TestS3Faults(t *testing.T) {
	srv := s3Setup(t, "faults")
	px := s3test.StartFaultProxy(t, srv, s3test.Bursts)
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	args := []string{"--split", "test", "--crop", "12", "--shard-size", "400KB"}
	local := filepath.Join(t.TempDir(), "local")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, args...)...)
	mustRun(t, append([]string{"build", fmnist, "-o", "s3://faults/ds"}, args...)...)
	mustRun(t, "verify", "s3://faults/ds")
	got := objects(t, srv, s3.URL{Bucket: "faults", Prefix: "ds"})
	want := localFiles(t, local)
	if len(got) != len(want) {
		t.Fatalf("%d objects published, the local build has %d files", len(got), len(want))
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("%s: the published object differs from the local build's file", name)
		}
	}
	// Parts built into the bucket and merged there, through the proxy: the local build's bytes.
	for _, p := range []string{"0/2", "1/2"} {
		mustRun(t, append([]string{"build", fmnist, "-o", "s3://faults/parts/p" + p[:1], "--part", p}, args...)...)
	}
	mustRun(t, "merge", "-o", "s3://faults/merged", "s3://faults/parts/p0", "s3://faults/parts/p1")
	mustRun(t, "verify", "s3://faults/merged")
	merged := objects(t, srv, s3.URL{Bucket: "faults", Prefix: "merged"})
	for name, data := range want {
		if !bytes.Equal(merged[name], data) {
			t.Errorf("merged %s: differs from the local build's file", name)
		}
	}
	t.Logf("faults injected: %s", px.Summary())
	if inj := px.Injected(); inj[s3test.Status500] == 0 || inj[s3test.SlowDown] == 0 || inj[s3test.DropBody]+inj[s3test.LongLength]+inj[s3test.ShortLength] == 0 {
		t.Errorf("faults injected: %s; want 500s, 503s and cut bodies", px.Summary())
	}

	px.SetPlan(s3test.Always(http.MethodPut, s3test.Status500))
	_, errs, code := run(t, append([]string{"build", fmnist, "-o", "s3://faults/refused"}, args...)...)
	t.Logf("refused: %s", errs)
	if code != exitFailure || !strings.Contains(errs, "gave up after 5 attempts") || !strings.Contains(errs, "InternalError") {
		t.Errorf("build with every upload refused: exit %d, want %d naming the attempts and the store's error:\n%s", code, exitFailure, errs)
	}
	if left := objects(t, srv, s3.URL{Bucket: "faults", Prefix: "refused"}); len(left) != 0 {
		t.Errorf("the failed build left objects: %d", len(left))
	}
}

// TestS3Stalls: with a proxy that stalls about a third of all requests once (no answer, or a
// GET body stopped halfway) for longer than PACKER_S3_STALL_TIMEOUT, a build to s3:// (its
// shards uploaded as they are finished), two parts merged there and verify give the local
// build's bytes; with every upload stalled, the build fails naming the stall and the attempts,
// and leaves nothing at its prefix.
func TestS3Stalls(t *testing.T) {
	srv := s3Setup(t, "stalls")
	px := s3test.StartFaultProxy(t, srv, s3test.Stalls)
	px.StallFor = 1500 * time.Millisecond
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	t.Setenv("PACKER_S3_STALL_TIMEOUT", "300ms")
	args := []string{"--split", "test", "--crop", "12", "--shard-size", "400KB"}
	local := filepath.Join(t.TempDir(), "local")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, args...)...)
	want := localFiles(t, local)
	mustRun(t, append([]string{"build", fmnist, "-o", "s3://stalls/ds"}, args...)...)
	mustRun(t, "verify", "s3://stalls/ds")
	if got := objects(t, srv, s3.URL{Bucket: "stalls", Prefix: "ds"}); !mapsEqualBytes(got, want) {
		t.Errorf("the build's objects differ from the local build's files")
	}
	for _, p := range []string{"0/2", "1/2"} {
		mustRun(t, append([]string{"build", fmnist, "-o", "s3://stalls/parts/p" + p[:1], "--part", p}, args...)...)
	}
	mustRun(t, "merge", "-o", "s3://stalls/merged", "s3://stalls/parts/p0", "s3://stalls/parts/p1")
	mustRun(t, "verify", "s3://stalls/merged")
	if got := objects(t, srv, s3.URL{Bucket: "stalls", Prefix: "merged"}); !mapsEqualBytes(got, want) {
		t.Errorf("the merged objects differ from the local build's files")
	}
	t.Logf("faults injected: %s", px.Summary())
	if inj := px.Injected(); inj[s3test.Stall] == 0 || inj[s3test.StallBody] == 0 {
		t.Errorf("faults injected: %s; want stalls before the answer and mid-body", px.Summary())
	}

	px.SetPlan(s3test.Always(http.MethodPut, s3test.Stall))
	_, errs, code := run(t, append([]string{"build", fmnist, "-o", "s3://stalls/refused"}, args...)...)
	if code != exitFailure || !strings.Contains(errs, "stalled") || !strings.Contains(errs, "attempts") {
		t.Errorf("build with every upload stalled: exit %d, want %d naming the stall and the attempts:\n%s", code, exitFailure, errs)
	}
	if left := objects(t, srv, s3.URL{Bucket: "stalls", Prefix: "refused"}); len(left) != 0 {
		t.Errorf("the failed build left objects: %d", len(left))
	}
}
