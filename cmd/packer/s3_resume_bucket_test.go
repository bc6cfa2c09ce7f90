package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// resumeElsewhere resumes the build args (killed, its shards and checkpoint in the bucket) as
// a new machine would: the local folder of the builds of out is deleted first. It returns the
// build's JSON summary and stderr, failing the test on a non-zero exit.
func resumeElsewhere(t *testing.T, tmp, out string, args []string) (buildSummary, string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(tmp, streamStagingName(out))); err != nil {
		t.Fatal(err)
	}
	stdout, errs, code := run(t, append(args, "--resume", "--json")...)
	if code != 0 {
		t.Fatalf("the resume on a new machine: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, errs)
	}
	var sum buildSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("the resume's summary: %v\n%s", err, stdout)
	}
	return sum, errs
}

// TestS3ResumeOnAnotherMachine: a build to s3:// keeps its checkpoint in the bucket too
// (s3.CheckpointName, written after the shards it covers are uploaded), so that a build killed
// (SIGKILL) with shards uploaded, its local folder then deleted (a new machine: a rescheduled
// pod, a requeued job on another node), is resumed with --resume from the bucket's checkpoint:
// the kept shards are checked in the bucket and not uploaded again, fewer inputs are decoded
// than a fresh build decodes, and the dataset is the bytes of an uninterrupted build, with no
// checkpoint left beside it. A kept shard overwritten in the bucket makes the resumed build go
// on from the checkpoint before it (the same bytes again, the damaged shard uploaded anew, the
// inputs before it not decoded again). A second build of the
// prefix while the first's checkpoint is there is refused, naming it.
func TestS3ResumeOnAnotherMachine(t *testing.T) {
	srv := s3Setup(t, "elsewhere")
	srv.Bucket(t, "overwritten")
	tmp := t.TempDir()
	local := filepath.Join(tmp, "local")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, streamArgs...)...)
	want := localFiles(t, local)
	t.Setenv("TMPDIR", tmp)
	counter := &putCounter{puts: map[string]int{}}
	px := s3test.StartFaultProxy(t, srv, counter.plan)
	bin := buildBinary(t, "packer_crashtest")

	args := killedStreamBuild(t, bin, "elsewhere")
	before := objects(t, srv, s3.URL{Bucket: "elsewhere", Prefix: "ds"})
	if _, ok := before[s3.CheckpointName]; !ok {
		t.Fatalf("the killed build left no %s in the bucket (%d objects)", s3.CheckpointName, len(before))
	}
	if _, ok := before["manifest.json"]; ok || len(before) < 5 {
		t.Fatalf("the killed build left %d objects (manifest: %v); want 5 shards or more and no manifest", len(before), ok)
	}
	// Another machine's build of the prefix, not a resume, is refused while the checkpoint is
	// there (on this machine, the local folder's record makes the objects this one's own).
	if err := os.RemoveAll(filepath.Join(tmp, streamStagingName("s3://elsewhere/ds"))); err != nil {
		t.Fatal(err)
	}
	_, errs, code := run(t, append(append([]string{}, args...), "--checkpoint-every", "0")...)
	if code == 0 || !strings.Contains(errs, s3.CheckpointName) || !strings.Contains(errs, "pid") {
		t.Errorf("a second build over the killed one's checkpoint: exit %d, stderr %q; want a refusal naming the checkpoint's owner", code, errs)
	}

	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	sum, errs := resumeElsewhere(t, tmp, "s3://elsewhere/ds", args)
	if !strings.Contains(errs, "resuming from the checkpoint kept in s3://elsewhere/ds") {
		t.Errorf("the resume did not take the bucket's checkpoint; stderr:\n%s", errs)
	}
	if sum.Resumed == nil || sum.Resumed.Inputs <= 0 || sum.Resumed.Inputs >= sum.Inputs {
		t.Fatalf("the resumed build took over %+v of %d inputs; want some, not all", sum.Resumed, sum.Inputs)
	}
	t.Logf("resumed on a new machine: %d of %d inputs taken from the bucket's checkpoint, %d decoded (a fresh build decodes %d)",
		sum.Resumed.Inputs, sum.Inputs, sum.Inputs-sum.Resumed.Inputs, sum.Inputs)
	for _, name := range []string{"shard-00000.pks", "shard-00001.pks"} {
		if n := counter.count("/elsewhere/ds/" + name); n != 0 {
			t.Errorf("the resumed build uploaded %s again (%d PUTs)", name, n)
		}
	}
	if got := objects(t, srv, s3.URL{Bucket: "elsewhere", Prefix: "ds"}); !mapsEqualBytes(got, want) {
		t.Errorf("the resumed build's objects differ from the uninterrupted build's files (%d objects, %d files)", len(got), len(want))
	}
	mustRun(t, "verify", "s3://elsewhere/ds")

	// A kept shard overwritten in the bucket: the build goes on from before it, to the same
	// bytes.
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	args = killedStreamBuild(t, bin, "overwritten")
	if _, err := srv.Client("").PutObject(context.Background(), &awss3.PutObjectInput{
		Bucket: aws.String("overwritten"), Key: aws.String("ds/shard-00001.pks"), Body: bytes.NewReader([]byte("not a shard")),
	}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	sum, errs = resumeElsewhere(t, tmp, "s3://overwritten/ds", args)
	if !strings.Contains(errs, "shard-00001.pks") || !strings.Contains(errs, "goes on from its checkpoint before that shard") {
		t.Errorf("the resume over an overwritten shard: resumed %+v, stderr %q; want it to go on from before the shard, naming it", sum.Resumed, errs)
	}
	checkResumedAt(t, sum, filepath.Join(local, "shard-00000.pks"))
	if n, m := counter.count("/overwritten/ds/shard-00000.pks"), counter.count("/overwritten/ds/shard-00001.pks"); n != 0 || m == 0 {
		t.Errorf("PUTs of shard-00000.pks (intact) %d, of shard-00001.pks (overwritten) %d; want none and some", n, m)
	}
	if got := objects(t, srv, s3.URL{Bucket: "overwritten", Prefix: "ds"}); !mapsEqualBytes(got, want) {
		t.Errorf("the rebuilt dataset's objects differ from the uninterrupted build's files")
	}
	mustRun(t, "verify", "s3://overwritten/ds")
}
