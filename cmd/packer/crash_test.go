package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packer-dev/packer/shard"
)

// commitSyscalls are the calls of the commit path a crash is injected at: every rename,
// unlink/rmdir and sync.
var commitSyscalls = []string{"rename", "renameat", "renameat2", "unlink", "unlinkat", "rmdir", "fsync", "fdatasync"}

// TestCommitCrashPoints kills a real build (SIGKILL, injected by strace) at each rename,
// unlink, rmdir and fsync of its main goroutine in turn (the K-th call of one syscall, for
// K = 1, 2, ... until the build completes unkilled), into a fresh OUT and over an old
// dataset with --force, with the atomic exchange and with the two-rename fallback (the
// exchange refused with EINVAL). After every kill, OUT holds the old dataset (byte for byte)
// or the new one, and verify passes; the next plain build keeps what is there, and the next
// --force build replaces it and leaves nothing beside OUT. A third series kills, the same
// way, a --force build that starts by recovering from a build killed between the two
// renames of the fallback (OUT missing, the old OUT set aside, a staging folder left).
func TestCommitCrashPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the crash test runs a few hundred builds")
	}
	strace := needStrace(t)
	var calls []string
	for _, sc := range commitSyscalls {
		if straceKnows(strace, sc) {
			calls = append(calls, sc)
		}
	}
	bin := buildBinary(t, "packer_crashtest")
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	writePNGFolder(t, src, 3)
	oldDS := filepath.Join(tmp, "old")
	// Two shards, so that removing a dataset takes several unlinks.
	mustRun(t, "build", src, "--from", "folder", "-o", oldDS, "--shard-size", "100B")
	oldSum := treeSum(t, oldDS)

	start := time.Now()
	kills := 0
	var perCall []string
	for _, mode := range []string{"exchange", "fallback", "recover"} {
		for _, force := range []bool{false, true} {
			if mode == "recover" && !force {
				continue // a plain build refuses the restored OUT; nothing to commit
			}
			for _, sc := range calls {
				if mode == "fallback" && sc == "renameat2" {
					continue // every renameat2 is refused in this mode
				}
				name := fmt.Sprintf("%s/force=%v/%s", mode, force, sc)
				for k := 1; ; k++ {
					if k > 1 {
						perCall = append(perCall, fmt.Sprintf("%s:%d", name, k-1))
					}
					if k > 50 {
						t.Fatalf("%s: still killed at call %d", name, k)
					}
					out := filepath.Join(tmp, "out")
					for _, p := range []string{out, out + ".packer-partial", out + ".packer-old", out + ".packer-lock", out + ".packer-trash"} {
						if err := os.RemoveAll(p); err != nil {
							t.Fatal(err)
						}
					}
					switch {
					case mode == "recover":
						// What a build killed between the two renames of the fallback left:
						// the old OUT set aside and the new build's staging folder.
						if err := os.CopyFS(out+".packer-old", os.DirFS(oldDS)); err != nil {
							t.Fatal(err)
						}
						if err := os.CopyFS(out+".packer-partial", os.DirFS(oldDS)); err != nil {
							t.Fatal(err)
						}
					case force:
						if err := os.CopyFS(out, os.DirFS(oldDS)); err != nil {
							t.Fatal(err)
						}
					}
					args := []string{"-qq", "-o", "/dev/null"}
					if mode == "fallback" {
						args = append(args, "-e", "inject=renameat2:error=EINVAL")
					}
					args = append(args, "-e", fmt.Sprintf("inject=%s:signal=KILL:when=%d", sc, k),
						bin, "build", src, "--from", "folder", "-o", out, "--layout", "chw", "--shard-size", "100B", "--workers", "2")
					if force {
						args = append(args, "--force")
					}
					cmd := exec.Command(strace, args...)
					output, err := cmd.CombinedOutput()
					killed := false
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						ws, ok := ee.Sys().(syscall.WaitStatus)
						killed = ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
						if !killed {
							t.Fatalf("%s K=%d: build failed without being killed: %v\n%s", name, k, err, output)
						}
					} else if err != nil {
						t.Fatal(err)
					}
					what := checkCrashState(t, name, k, out, force, oldSum)
					if what == "old-aside" && mode == "exchange" {
						t.Fatalf("%s K=%d: OUT is missing although the exchange is atomic", name, k)
					}
					if !killed {
						if what != "new" {
							t.Fatalf("%s K=%d: the build completed but OUT holds %s", name, k, what)
						}
						break
					}
					kills++
					// The next plain build refuses a non-empty OUT and keeps what is there.
					before := oldSum // "old", or "old-aside": the next build puts it back
					if what == "new" {
						before = treeSum(t, out)
					}
					_, errs, code := run(t, "build", src, "--from", "folder", "-o", out, "--shard-size", "100B")
					if what == "none" {
						if code != 0 {
							t.Fatalf("%s K=%d: plain build after the kill: exit %d: %s", name, k, code, errs)
						}
					} else {
						if code != exitUsage {
							t.Fatalf("%s K=%d: plain build over the %s dataset: exit %d (%s), want %d", name, k, what, code, errs, exitUsage)
						}
						if after := treeSum(t, out); after != before {
							t.Fatalf("%s K=%d: a refused plain build changed the %s dataset", name, k, what)
						}
					}
					mustRun(t, "verify", out)
					// The next --force build replaces it and leaves nothing beside OUT.
					mustRun(t, "build", src, "--from", "folder", "-o", out, "--shard-size", "100B", "--force")
					mustRun(t, "verify", out)
					for _, p := range []string{out + ".packer-partial", out + ".packer-old", out + ".packer-trash"} {
						if _, err := os.Lstat(p); !os.IsNotExist(err) {
							t.Fatalf("%s K=%d: %s left after the next --force build", name, k, p)
						}
					}
				}
			}
		}
	}
	if kills == 0 {
		t.Fatal("no build was killed: the injection does not reach the commit path")
	}
	t.Logf("kills per call: %s", strings.Join(perCall, " "))
	t.Logf("%d builds killed at a commit-path syscall, all recovered, in %v", kills, time.Since(start).Round(time.Millisecond))
}

// checkCrashState says what a killed (or finished) build left at OUT: "none" (no OUT, only
// allowed when there was no old dataset), "old" (byte for byte the old dataset) or "new" (a
// complete chw dataset); verify must pass on it.
func checkCrashState(t *testing.T, name string, k int, out string, force bool, oldSum string) string {
	t.Helper()
	if _, err := os.Lstat(out); os.IsNotExist(err) {
		if force {
			// The old dataset must still exist under a name the next build restores.
			if _, err := os.Stat(filepath.Join(out+".packer-old", shard.ManifestName)); err != nil {
				t.Fatalf("%s K=%d: OUT is gone and the old dataset is nowhere: %v", name, k, err)
			}
			// verify refuses a leftover name (it is not a committed dataset); what lies there
			// must be the old dataset byte for byte, and the next build puts it back (below).
			if got := treeSum(t, out+".packer-old"); got != oldSum {
				t.Fatalf("%s K=%d: the old dataset set aside is not the old dataset byte for byte", name, k)
			}
			return "old-aside"
		}
		return "none"
	}
	if _, errs, code := run(t, "verify", out); code != 0 {
		t.Fatalf("%s K=%d: verify OUT after the kill: exit %d: %s", name, k, code, errs)
	}
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatalf("%s K=%d: %v", name, k, err)
	}
	if m.Sample.Layout == "chw" {
		return "new"
	}
	if !force {
		t.Fatalf("%s K=%d: OUT holds a dataset that is not the new one", name, k)
	}
	if got := treeSum(t, out); got != oldSum {
		t.Fatalf("%s K=%d: OUT holds a changed old dataset:\n%s\nwant\n%s", name, k, got, oldSum)
	}
	return "old"
}
