package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage/s3"
)

// stagingFolders lists the local staging folders of object-store commands in dir.
func stagingFolders(t *testing.T, dir string) []string {
	t.Helper()
	var got []string
	for _, p := range []string{"packer-s3-build-*", "packer-s3-merge-*", "packer-s3-source-*"} {
		m, err := filepath.Glob(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m...)
	}
	slices.Sort(got)
	return got
}

// TestS3StagingOfAKilledBuild: a build to s3:// that is uploaded once complete (--format npy)
// SIGKILLed mid-upload leaves its local staging folder (the whole dataset) in $TMPDIR; the next object-store command removes it, saying
// so, and never the staging folder of a build that is still running (one started before the
// killed one), which is left byte for byte as it was and removed when that build ends.
func TestS3StagingOfAKilledBuild(t *testing.T) {
	srv := s3Setup(t, "stale")
	srv.Bucket(t, "live")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	live, liveArgs := stalledS3Build(t, "live", "--format", "npy")
	running := stagingFolders(t, tmp)
	if len(running) != 1 {
		t.Fatalf("staging folders with a build running: %v, want its one", running)
	}
	liveDir := running[0]
	liveFiles := localFiles(t, liveDir)
	// a build started while the live one runs, then killed: its start leaves the live
	// build's folder alone, its kill leaves its own folder behind
	killed, _ := stalledS3Build(t, "stale", "--format", "npy")
	killed.Process.Kill()
	killed.Wait()
	both := stagingFolders(t, tmp)
	if len(both) != 2 || !slices.Contains(both, liveDir) {
		t.Fatalf("staging folders after the kill: %v, want the live build's and the killed one's", both)
	}
	left := slices.DeleteFunc(both, func(d string) bool { return d == liveDir })
	_, errs, code := run(t, "build", fmnist, "--split", "test", "-o", "s3://stale/other")
	if code != 0 {
		t.Fatalf("the next build: exit %d, %s", code, errs)
	}
	if got := stagingFolders(t, tmp); !slices.Equal(got, []string{liveDir}) {
		t.Errorf("staging folders after the next build: %v, want only the live build's %s", got, liveDir)
	}
	if !strings.Contains(errs, filepath.Base(left[0])) {
		t.Errorf("the next build did not say it removed %s: %q", left[0], errs)
	}
	if !mapsEqualBytes(localFiles(t, liveDir), liveFiles) {
		t.Errorf("the live build's staging folder changed under it")
	}
	if err := live.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	live.Wait()
	if got := stagingFolders(t, tmp); len(got) != 0 {
		t.Errorf("staging folders after the interrupted live build: %v", got)
	}
	mustRun(t, liveArgs...)
	if _, ok := objects(t, srv, s3.URL{Bucket: "live", Prefix: "ds"})[shard.ManifestName]; !ok {
		t.Errorf("the live build, run again, published no manifest")
	}
}
