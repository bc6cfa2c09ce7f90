//go:build unix

package storage

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestStagingHelperProcess is the child of TestRemoveStale: it makes a staging folder, says
// its path and waits to be killed.
func TestStagingHelperProcess(t *testing.T) {
	parent := os.Getenv("PACKER_TEST_STAGING_PARENT")
	if parent == "" {
		t.Skip("the child process of TestRemoveStale")
	}
	s, err := NewStaging(parent, "packer-test-*")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.Dir, "data"), make([]byte, 1000), 0o644)
	os.Stdout.WriteString(s.Dir + "\n")
	select {}
}

// TestRemoveStale: of the staging folders in a parent, RemoveStale removes the one whose
// owner was killed (SIGKILL), with its size, and leaves the one a live process holds (this
// one), a folder without a lock file, a symbolic link to a stale folder and a plain file of
// a matching name; a live folder's Remove removes it.
func TestRemoveStale(t *testing.T) {
	parent := t.TempDir()
	live, err := NewStaging(parent, "packer-test-*")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStagingHelperProcess$")
	cmd.Env = append(os.Environ(), "PACKER_TEST_STAGING_PARENT="+parent)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the child made no staging folder")
	}
	stale := sc.Text()
	// while the child lives, its folder is not stale
	if removed, err := RemoveStale(parent, "packer-test-*"); err != nil || len(removed) != 0 {
		t.Fatalf("RemoveStale with both owners alive = %v, %v", removed, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	bare := filepath.Join(parent, "packer-test-bare")
	if err := os.Mkdir(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	staleCopy := filepath.Join(t.TempDir(), "stale-copy")
	if err := os.CopyFS(staleCopy, os.DirFS(stale)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(staleCopy, filepath.Join(parent, "packer-test-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "packer-test-file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveStale(parent, "packer-test-*")
	if err != nil || len(removed) != 1 || removed[0].Dir != stale || removed[0].Bytes < 1000 {
		t.Fatalf("RemoveStale = %v, %v; want the killed child's folder %s", removed, err, stale)
	}
	for _, p := range []string{live.Dir, filepath.Join(live.Dir, StagingLockName), bare, staleCopy, filepath.Join(parent, "packer-test-file")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("RemoveStale removed %s: %v", p, err)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale folder is still there: %v", err)
	}
	if err := live.Remove(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(parent)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"packer-test-bare", "packer-test-file", "packer-test-link"}) {
		t.Errorf("left in the parent: %v", names)
	}
}
