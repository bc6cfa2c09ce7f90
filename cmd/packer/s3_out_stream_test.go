package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// streamArgs build fashion-mnist's test split into about 20 shards of 400 kB.
var streamArgs = []string{"--split", "test", "--shard-size", "400KB", "--checkpoint-every", "0"}

// folderBytes is the size of the regular files below dir (0 if it does not exist).
func folderBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// TestS3StreamedBuild: a build to s3:// uploads each shard as it is finished and removes its
// local copy: local disk (the build's folder in $TMPDIR, sampled as it runs) never holds more
// than the shards in flight (at most 2 finished and 1 being written), a small part of the
// dataset; the objects are the local build's bytes, and the folder is gone at the end.
func TestS3StreamedBuild(t *testing.T) {
	srv := s3Setup(t, "stream")
	tmp := t.TempDir()
	local := filepath.Join(tmp, "local")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, streamArgs...)...)
	want := localFiles(t, local)
	var largest, total int64
	for _, d := range want {
		largest = max(largest, int64(len(d)))
		total += int64(len(d))
	}
	t.Setenv("TMPDIR", tmp)
	folder := filepath.Join(tmp, streamStagingName("s3://stream/ds"))
	var high atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			high.Store(max(high.Load(), folderBytes(folder)))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	mustRun(t, append([]string{"build", fmnist, "-o", "s3://stream/ds"}, streamArgs...)...)
	close(stop)
	wg.Wait()
	t.Logf("local disk high-water mark: %d bytes (largest shard %d bytes, dataset %d bytes in %d files)", high.Load(), largest, total, len(want))
	if high.Load() == 0 || high.Load() > 4*largest {
		t.Errorf("local disk high-water mark %d bytes; want at most 4 shards (%d bytes)", high.Load(), 4*largest)
	}
	if len(want) < 15 {
		t.Fatalf("the build wrote %d files; want about 20 shards", len(want))
	}
	if got := objects(t, srv, s3.URL{Bucket: "stream", Prefix: "ds"}); !mapsEqualBytes(got, want) {
		t.Errorf("the published objects differ from the local build's files (%d objects, %d files)", len(got), len(want))
	}
	if _, err := os.Stat(folder); !os.IsNotExist(err) {
		t.Errorf("the build's local folder is left: %v", err)
	}
	mustRun(t, "verify", "s3://stream/ds")
}

// checkResumedAt checks that a resumed build (its summary sum) went on from after the shard
// first, a local file (the inputs before it were not decoded again): the fashion-mnist build of
// streamArgs packs one record per input.
func checkResumedAt(t *testing.T, sum buildSummary, first string) {
	t.Helper()
	r, err := shard.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := int64(r.Len()); sum.Resumed == nil || sum.Resumed.Inputs != n || sum.Resumed.Records != n {
		t.Errorf("the resume took over %+v; want the %d inputs and records of the shard before the damaged one", sum.Resumed, n)
	}
}

// killedStreamBuild runs a build of streamArgs into s3://bucket/ds in the crash-test binary bin,
// stops it once 5 shards are uploaded, and kills it (SIGKILL). It returns the build's arguments.
func killedStreamBuild(t *testing.T, bin, bucket string) []string {
	t.Helper()
	args := append([]string{"build", fmnist, "-o", "s3://" + bucket + "/ds"}, streamArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PACKER_TEST_S3_STOP_AFTER=5")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	var log []string
	for sc.Scan() {
		log = append(log, sc.Text())
		if strings.HasPrefix(sc.Text(), "packer-test: stopped after") {
			go io.Copy(io.Discard, stderr)
			return args
		}
	}
	t.Fatalf("the build ended before it stopped:\n%s", strings.Join(log, "\n"))
	return nil
}

// putCounter is a fault plan that injects nothing and counts the PUTs of each object path.
type putCounter struct {
	mu   sync.Mutex
	puts map[string]int
}

func (c *putCounter) plan(r *http.Request, _, _ int) s3test.Fault {
	if r.Method == http.MethodPut {
		c.mu.Lock()
		c.puts[r.URL.Path]++
		c.mu.Unlock()
	}
	return s3test.None
}

func (c *putCounter) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.puts[path]
}

// TestS3StreamedResume: a build to s3:// killed (SIGKILL) with shards uploaded and a checkpoint
// kept is resumed by the same build with --resume: the shards of the checkpoint are checked in
// the bucket (size and ETag against the record of the uploads) and kept, not uploaded again,
// and the dataset is the bytes of an uninterrupted build. When a kept shard's object is gone
// from the bucket (shard-00001.pks), the resume says so and goes on from the checkpoint
// before it: the inputs of shard-00000.pks are not decoded again nor is it uploaded again, and
// the dataset is the same bytes again.
func TestS3StreamedResume(t *testing.T) {
	srv := s3Setup(t, "resume")
	srv.Bucket(t, "damaged")
	tmp := t.TempDir()
	local := filepath.Join(tmp, "local")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, streamArgs...)...)
	want := localFiles(t, local)
	t.Setenv("TMPDIR", tmp)
	counter := &putCounter{puts: map[string]int{}}
	px := s3test.StartFaultProxy(t, srv, counter.plan)

	bin := buildBinary(t, "packer_crashtest")
	args := killedStreamBuild(t, bin, "resume")
	before := objects(t, srv, s3.URL{Bucket: "resume", Prefix: "ds"})
	if _, ok := before["manifest.json"]; ok || len(before) < 5 {
		t.Fatalf("the killed build left %d objects (manifest: %v); want 5 shards or more and no manifest", len(before), ok)
	}
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	out := mustRun(t, append(args, "--resume")...)
	if !strings.Contains(out, "resumed: kept") {
		t.Errorf("the resumed build kept nothing:\n%s", out)
	}
	if n := counter.count("/resume/ds/shard-00000.pks"); n != 0 {
		t.Errorf("the resumed build uploaded shard-00000.pks again (%d PUTs)", n)
	}
	if got := objects(t, srv, s3.URL{Bucket: "resume", Prefix: "ds"}); !mapsEqualBytes(got, want) {
		t.Errorf("the resumed build's objects differ from the uninterrupted build's files (%d objects, %d files)", len(got), len(want))
	}

	// A kept shard removed from the bucket: the build goes on from before it.
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	args = killedStreamBuild(t, bin, "damaged")
	if _, err := srv.Client("").DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: aws.String("damaged"), Key: aws.String("ds/shard-00001.pks")}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	stdout, errs, code := run(t, append(args, "--resume", "--json")...)
	if code != 0 || !strings.Contains(errs, "shard-00001.pks") || !strings.Contains(errs, "goes on from its checkpoint before that shard") {
		t.Errorf("the resume over a missing shard: exit %d, stderr %q; want it to go on from before the shard, naming it", code, errs)
	}
	var sum buildSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("the resume's summary: %v\n%s", err, stdout)
	}
	checkResumedAt(t, sum, filepath.Join(local, "shard-00000.pks"))
	if n, m := counter.count("/damaged/ds/shard-00000.pks"), counter.count("/damaged/ds/shard-00001.pks"); n != 0 || m == 0 {
		t.Errorf("PUTs of shard-00000.pks (intact) %d, of shard-00001.pks (removed) %d; want none and some", n, m)
	}
	if got := objects(t, srv, s3.URL{Bucket: "damaged", Prefix: "ds"}); !mapsEqualBytes(got, want) {
		t.Errorf("the rebuilt dataset's objects differ from the uninterrupted build's files")
	}
	mustRun(t, "verify", "s3://damaged/ds")
}
