package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// deleteWatch is a fault plan that injects nothing and records the DELETE requests' paths.
type deleteWatch struct {
	mu      sync.Mutex
	deletes []string
}

func (w *deleteWatch) plan(r *http.Request, _, _ int) s3test.Fault {
	if r.Method == http.MethodDelete {
		w.mu.Lock()
		w.deletes = append(w.deletes, r.URL.Path)
		w.mu.Unlock()
	}
	return s3test.None
}

func (w *deleteWatch) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.deletes
	w.deletes = nil
	return d
}

// TestS3MergesRace: two merges by server-side copy started at once into one new prefix (the
// test server, versitygw, ignores If-None-Match on CopyObject, so the copies alone would not
// keep them apart): each time exactly one succeeds and the other fails cleanly, naming the
// first's claim, or the objects or dataset it found there; the published dataset is the local
// build's bytes and verifies, no object of it was ever deleted (the only DELETE below the prefix
// is the winner's claim), and no claim is left. Repeated 4 times.
func TestS3MergesRace(t *testing.T) {
	srv := s3Setup(t, "rparts")
	srv.Bucket(t, "rout")
	watch := &deleteWatch{}
	px := s3test.StartFaultProxy(t, srv, watch.plan)
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	args := []string{"--split", "test", "--cut-inputs", "2500", "--shard-size", "64MB"}
	want, parts := localAndTwoParts(t, args, "s3://rparts/p")
	for round := range 4 {
		out := fmt.Sprintf("s3://rout/m%d", round)
		type result struct {
			stdout, stderr string
			code           int
		}
		var res [2]result
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range res {
			wg.Go(func() {
				<-start
				o, e, c := run(t, append([]string{"merge", "-o", out}, parts...)...)
				res[i] = result{o, e, c}
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for i, r := range res {
			if r.code == 0 {
				won++
				if !strings.Contains(r.stdout, "by server-side copy") {
					t.Errorf("round %d: merge %d did not copy:\n%s", round, i, r.stdout)
				}
				continue
			}
			if !strings.Contains(r.stderr, s3.ClaimName) && !strings.Contains(r.stderr, "already holds a dataset") && !strings.Contains(r.stderr, "that no manifest.json lists") {
				t.Errorf("round %d: the losing merge failed with exit %d but not for the other one's claim, objects or dataset:\n%s", round, r.code, r.stderr)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d merges succeeded; want exactly 1\n%+v", round, won, res)
		}
		prefix := fmt.Sprintf("/rout/m%d/", round)
		for _, d := range watch.take() {
			if strings.HasPrefix(d, prefix) && d != prefix+s3.ClaimName {
				t.Errorf("round %d: %s was deleted", round, d)
			}
		}
		if got := objects(t, srv, s3.URL{Bucket: "rout", Prefix: fmt.Sprintf("m%d", round)}); !mapsEqualBytes(got, want) {
			t.Errorf("round %d: the published objects differ from the local build's files (%d objects, %d files)", round, len(got), len(want))
		}
		mustRun(t, "verify", out)
	}
}

// localAndTwoParts builds fmnist with args into a local folder and as parts 0/2 and 1/2 to
// prefix+"0" and prefix+"1" (object-store URLs): it returns the local build's files (localFiles)
// and the parts' locations.
func localAndTwoParts(t *testing.T, args []string, prefix string) (map[string][]byte, []string) {
	t.Helper()
	local := filepath.Join(t.TempDir(), "local")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, args...)...)
	want := localFiles(t, local)
	parts := []string{prefix + "0", prefix + "1"}
	for i, p := range parts {
		mustRun(t, append([]string{"build", fmnist, "-o", p, "--part", fmt.Sprintf("%d/2", i)}, args...)...)
	}
	return want, parts
}
