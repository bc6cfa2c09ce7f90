package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestS3TwoBuilders: a build to s3:// still running (paused by the crash-test binary after 5
// shards, its checkpoint in the bucket) when a --resume of the same OUT on another machine
// (another $TMPDIR) takes the prefix over: the resume publishes the uninterrupted build's
// bytes; the first build, going on afterwards, fails its check of the shards before its
// manifest (every HEAD of one shard answered 500): it says that another command owns the prefix
// now and deletes nothing (before, its clean-up deleted the shards it had uploaded, which the
// published dataset had taken over), so that exactly one build publishes and the dataset
// verifies.
func TestS3TwoBuilders(t *testing.T) {
	srv := s3Setup(t, "two")
	tmp := t.TempDir()
	local := filepath.Join(tmp, "local")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, streamArgs...)...)
	want := localFiles(t, local)
	bin := buildBinary(t, "packer_crashtest")
	px := s3test.StartFaultProxy(t, srv, func(*http.Request, int, int) s3test.Fault { return s3test.None })

	// The first builder checkpoints when it opens the prefix, and not again before it fails.
	args := []string{"build", fmnist, "-o", "s3://two/ds", "--split", "test", "--shard-size", "400KB", "--checkpoint-every", "1h"}
	goOn := filepath.Join(tmp, "go-on")
	tmpA := filepath.Join(tmp, "a")
	if err := os.Mkdir(tmpA, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmpA, "AWS_ENDPOINT_URL="+px.Endpoint, "PACKER_TEST_S3_PAUSE_AFTER=5", "PACKER_TEST_S3_GO_ON="+goOn)
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
		if strings.HasPrefix(sc.Text(), "packer-test: paused after") {
			break
		}
	}
	if len(log) == 0 || !strings.HasPrefix(log[len(log)-1], "packer-test: paused after") {
		t.Fatalf("the first build ended before it paused:\n%s", strings.Join(log, "\n"))
	}
	rest := make(chan string)
	go func() {
		b, _ := io.ReadAll(stderr)
		rest <- string(b)
	}()

	// The second builder: another machine's --resume, while the first is paused.
	tmpB := filepath.Join(tmp, "b")
	if err := os.Mkdir(tmpB, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmpB)
	mustRun(t, append(args, "--resume")...)
	if got := objects(t, srv, s3.URL{Bucket: "two", Prefix: "ds"}); !mapsEqualBytes(got, want) {
		t.Fatalf("the resume's objects differ from the uninterrupted build's files (%d objects, %d files)", len(got), len(want))
	}

	// The first builder goes on, its checks of the shards failing, and fails without touching
	// the published dataset.
	px.SetPlan(func(r *http.Request, _, _ int) s3test.Fault {
		if r.Method == http.MethodHead && strings.HasSuffix(r.URL.Path, "/shard-00007.pks") {
			return s3test.Status500
		}
		return s3test.None
	})
	if err := os.WriteFile(goOn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	errs := <-rest
	t.Logf("the first build: %v\n%s", werr, errs)
	if werr == nil || !strings.Contains(errs, "another packer command owns this prefix") {
		t.Errorf("the first build after the takeover: %v, stderr:\n%s\nwant a failure saying another command owns the prefix", werr, errs)
	}
	if got := objects(t, srv, s3.URL{Bucket: "two", Prefix: "ds"}); !mapsEqualBytes(got, want) {
		t.Errorf("after the first build failed, the objects differ from the uninterrupted build's files (%d objects, %d files)", len(got), len(want))
	}
	mustRun(t, "verify", "s3://two/ds")
}
