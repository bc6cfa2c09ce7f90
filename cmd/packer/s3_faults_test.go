package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// uploadsOnly is a plan that answers every PUT of a dataset file with f: the build's own
// checkpoint object (s3.CheckpointName) goes through, so that the build fails at its uploads,
// and its clean-up removes them and the checkpoint.
func uploadsOnly(f s3test.Fault) s3test.FaultPlan {
	return func(r *http.Request, _, _ int) s3test.Fault {
		if r.Method == http.MethodPut && !strings.HasSuffix(r.URL.Path, "/"+s3.CheckpointName) {
			return f
		}
		return s3test.None
	}
}

// cutMergeThroughFaults builds the args build with --cut-inputs locally and as two parts into
// bucket (parts built with the proxy's plan switched off, so that its faults meet the merge),
// and merges the parts there by server-side copy through the proxy px with its plan base: the
// merged objects are the local build's bytes and verify passes, and some of the faults met the
// copies. Then, with every copy answered by fail, a merge fails naming the attempts and leaves
// nothing at its prefix (neither copies nor its claim).
func cutMergeThroughFaults(t *testing.T, srv *s3test.Server, px *s3test.FaultProxy, bucket string, args []string, base s3test.FaultPlan, fail s3test.Fault) {
	t.Helper()
	args = append(append([]string{}, args...), "--cut-inputs", "2500")
	px.SetPlan(func(*http.Request, int, int) s3test.Fault { return s3test.None })
	want, parts := localAndTwoParts(t, args, "s3://"+bucket+"/cparts/p")
	var copyFaults atomic.Int64
	copying := func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != ""
	}
	px.SetPlan(func(r *http.Request, n, body int) s3test.Fault {
		f := base(r, n, body)
		if f != s3test.None && copying(r) {
			copyFaults.Add(1)
		}
		return f
	})
	out := mustRun(t, append([]string{"merge", "-o", "s3://" + bucket + "/cmerged"}, parts...)...)
	if !strings.Contains(out, "by server-side copy") {
		t.Errorf("the merge of --cut-inputs parts did not copy:\n%s", out)
	}
	mustRun(t, "verify", "s3://"+bucket+"/cmerged")
	if got := objects(t, srv, s3.URL{Bucket: bucket, Prefix: "cmerged"}); !mapsEqualBytes(got, want) {
		t.Errorf("the objects merged by copy differ from the local --cut-inputs build's files (%d objects, %d files)", len(got), len(want))
	}
	if copyFaults.Load() == 0 {
		t.Errorf("no fault met a copy of the merge")
	}
	t.Logf("faults that met copies: %d", copyFaults.Load())

	px.SetPlan(func(r *http.Request, _, _ int) s3test.Fault {
		if copying(r) {
			return fail
		}
		return s3test.None
	})
	_, errs, code := run(t, append([]string{"merge", "-o", "s3://" + bucket + "/crefused"}, parts...)...)
	if code != exitFailure || !strings.Contains(errs, "attempts") {
		t.Errorf("merge with every copy answered %v: exit %d, want %d naming the attempts:\n%s", fail, code, exitFailure, errs)
	}
	if left := objects(t, srv, s3.URL{Bucket: bucket, Prefix: "crefused"}); len(left) != 0 {
		t.Errorf("the failed merge by copy left %d objects", len(left))
	}
}

// TestS3Faults: with a fault proxy between packer and the store (bursts of 500 and 503
// SlowDown, GET bodies cut short), a build to s3:// publishes the bytes of the local build and
// verify passes, and so do two parts built into the bucket and merged there, rewritten or (built
// with --cut-inputs) by server-side copy; with every upload of a dataset file refused (500), the build fails
// naming the attempts made and publishes nothing at its prefix, and so does a merge by copy
// with every copy refused.
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

	px.SetPlan(uploadsOnly(s3test.Status500))
	_, errs, code := run(t, append([]string{"build", fmnist, "-o", "s3://faults/refused"}, args...)...)
	t.Logf("refused: %s", errs)
	if code != exitFailure || !strings.Contains(errs, "gave up after 5 attempts") || !strings.Contains(errs, "InternalError") {
		t.Errorf("build with every upload refused: exit %d, want %d naming the attempts and the store's error:\n%s", code, exitFailure, errs)
	}
	if left := objects(t, srv, s3.URL{Bucket: "faults", Prefix: "refused"}); len(left) != 0 {
		t.Errorf("the failed build left objects: %d", len(left))
	}
	cutMergeThroughFaults(t, srv, px, "faults", args, s3test.Bursts, s3test.Status500)
}

// TestS3Stalls: with a proxy that stalls about a third of all requests once (no answer, or a
// GET body stopped halfway) for longer than PACKER_S3_STALL_TIMEOUT, a build to s3:// (its
// shards uploaded as they are finished), two parts merged there (rewritten, or built with
// --cut-inputs and copied inside the store) and verify give the local build's bytes; with every
// upload stalled, the build fails naming the stall and the attempts, and leaves nothing at its
// prefix, and so does a merge by copy with every copy stalled.
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

	px.SetPlan(uploadsOnly(s3test.Stall))
	_, errs, code := run(t, append([]string{"build", fmnist, "-o", "s3://stalls/refused"}, args...)...)
	if code != exitFailure || !strings.Contains(errs, "stalled") || !strings.Contains(errs, "attempts") {
		t.Errorf("build with every upload stalled: exit %d, want %d naming the stall and the attempts:\n%s", code, exitFailure, errs)
	}
	if left := objects(t, srv, s3.URL{Bucket: "stalls", Prefix: "refused"}); len(left) != 0 {
		t.Errorf("the failed build left objects: %d", len(left))
	}
	cutMergeThroughFaults(t, srv, px, "stalls", args, s3test.Stalls, s3test.Stall)
}
