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

	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
)

// buildBinary builds packer (with the given build tags, if any) for tests that run it as a
// process, to stop or kill it.
func buildBinary(t *testing.T, tags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "packer")
	args := []string{"build"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	if out, err := exec.Command("go", append(args, "-o", bin, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// needStrace returns strace's path for the tests that inject kills with it: a missing strace
// fails (scripts/setup.sh installs it), a machine where it cannot trace skips.
func needStrace(t *testing.T) string {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Fatalf("strace is not installed (scripts/setup.sh installs it): %v", err)
	}
	if out, err := exec.Command(strace, "-qq", "-o", "/dev/null", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (no ptrace?): %v: %s", err, out)
	}
	return strace
}

// straceKnows reports whether strace can inject into syscall sc on this architecture (rename,
// renameat, unlink and rmdir do not exist on arm64).
func straceKnows(strace, sc string) bool {
	return exec.Command(strace, "-qq", "-o", "/dev/null", "-e", "inject="+sc+":signal=KILL:when=65535", "true").Run() == nil
}

// syscallSet joins the names of syscalls strace knows on this architecture (rename and
// renameat do not exist on arm64), for an inject expression.
func syscallSet(t *testing.T, strace string, names ...string) string {
	t.Helper()
	var ok []string
	for _, sc := range names {
		if straceKnows(strace, sc) {
			ok = append(ok, sc)
		}
	}
	if len(ok) == 0 {
		t.Fatalf("strace knows none of %v", names)
	}
	return strings.Join(ok, ",")
}

// killedAt runs packer under strace with SIGKILL injected at the k-th call of the syscalls sc
// (a comma-separated set) by one thread (strace counts each thread's calls), and reports
// whether it was killed (false: it completed). Which threads the Go scheduler gives the
// build's calls depends on the machine's load, so the place a given k stops the build varies
// from run to run: a test that needs a given place kills with killedAtRename.
func killedAt(t *testing.T, strace, bin, sc string, k int, args ...string) bool {
	t.Helper()
	return straceKilled(t, strace, []string{"-e", fmt.Sprintf("inject=%s:signal=KILL:when=%d", sc, k)}, bin, args...)
}

// killedAtRename runs packer under strace with SIGKILL injected at the first call of the
// syscalls sc (renames), in any thread, that names the path final, before it renames, and
// reports whether it was killed (false: it completed without that rename). The kill point
// depends on nothing but what the build writes: killed at the rename that commits shard k
// (k >= 1) of a build with --checkpoint-every 0, the staging folder holds the checkpoint of
// shards 0 to k-1, since shard k is started only once that checkpoint is written.
func killedAtRename(t *testing.T, strace, bin, sc, final string, args ...string) bool {
	t.Helper()
	if !filepath.IsAbs(final) {
		t.Fatalf("killedAtRename: %s is not absolute (strace matches the path as the build names it)", final)
	}
	return straceKilled(t, strace, []string{"-P", final, "-e", fmt.Sprintf("inject=%s:signal=KILL:when=1", sc)}, bin, args...)
}

// killedAtShard is killedAtRename at the commit of shard k in the staging folder of the build
// writing OUT, for a build that must be killed there: it fails the test if the build completed.
func killedAtShard(t *testing.T, strace, bin, sc, out string, k int, args ...string) {
	t.Helper()
	if !killedAtRename(t, strace, bin, sc, filepath.Join(out+pipeline.StagingSuffix, shards.ShardName(k)), args...) {
		t.Fatalf("%s: the build completed without committing %s", strings.Join(args, " "), shards.ShardName(k))
	}
}

// straceKilled runs bin with args under strace -f with the options sopts, and reports whether
// it was killed by SIGKILL (false: it completed); any other failure fails the test.
func straceKilled(t *testing.T, strace string, sopts []string, bin string, args ...string) bool {
	t.Helper()
	sargs := append(append([]string{"-f", "-qq", "-o", "/dev/null"}, sopts...), bin)
	out, err := exec.Command(strace, append(sargs, args...)...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
		t.Fatalf("%s under strace %s: failed without being killed: %v\n%s", strings.Join(args, " "), strings.Join(sopts, " "), err, out)
	} else if err != nil {
		t.Fatal(err)
	}
	return false
}

// checkOnlyOut fails if anything but OUT and its lock file is left beside OUT.
func checkOnlyOut(t *testing.T, out string) {
	t.Helper()
	for _, suf := range []string{pipeline.StagingSuffix, pipeline.OldSuffix, pipeline.TrashSuffix} {
		if exists(out + suf) {
			t.Fatalf("%s left beside OUT", out+suf)
		}
	}
	if exists(filepath.Join(out, pipeline.JournalName)) {
		t.Fatalf("the resume journal reached OUT")
	}
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// TestResumeSameBytes kills real builds (SIGKILL, injected by strace into any thread) at the
// K-th fsync and the K-th rename, for K = 1, 2, 3, 5, 8, ... until the build completes unkilled, then resumes
// each with --resume: the output is byte-identical to an uninterrupted build's and nothing is
// left beside OUT. The sources have what makes resuming hard: skipped inputs (damaged images),
// inputs yielding several records that a checkpoint falls between (clips), records of several
// sizes, a source that does not know its size (WebDataset); a part resumes too, and merges
// into the one-machine build; a build cut with --cut-inputs resumes too. (CIFAR resumes in TestInterruptRerun; video files cut into
// clips go through the same writer path as frames and are left out for time.) The test fails unless some resumes did go on from a checkpoint.
func TestResumeSameBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the resume test runs a few hundred builds")
	}
	strace := needStrace(t)
	bin := buildBinary(t)
	syncs := syscallSet(t, strace, "fsync", "fdatasync")
	renames := syscallSet(t, strace, "rename", "renameat", "renameat2")
	root := t.TempDir()
	src := partsCorpus(t, root)
	cases := []struct {
		name, src string
		args      []string
	}{
		{"folder-varsize", src["folder"], []string{"--resize", "8"}},
		{"frames-clips", src["frames"], []string{"--from", "frames", "--clip-len", "2", "--crop", "8"}},
		{"webdataset", src["wds"], []string{"--crop", "5", "--classes", "x,y,z"}},
		{"frames-part", src["frames"], []string{"--from", "frames", "--clip-len", "2", "--crop", "8", "--part", "1/2"}},
		// Cut at every 3rd input: a resumed build goes on with the chunk and piece its
		// checkpoint's last shard had (FORMAT.md "Dataset").
		{"webdataset-cut", src["wds"], []string{"--crop", "5", "--classes", "x,y,z", "--cut-inputs", "3"}},
	}
	resumed, kills := 0, 0
	for _, c := range cases {
		args := append(append([]string{}, c.args...), "--shard-size", "500", "--workers", "2", "--checkpoint-every", "0")
		full := filepath.Join(root, "out", c.name, "full")
		mustRun(t, append([]string{"build", c.src, "-o", full}, args...)...)
		out := filepath.Join(root, "out", c.name, "out")
		for _, sc := range []string{syncs, renames} {
			// Kill points 1, 2, 3, 5, 8, 13, ...: the early steps one by one, later ones spread.
			for k, prev := 1, 1; ; k, prev = k+prev, k {
				if k > 400 {
					t.Fatalf("%s: still killed at %s #%d", c.name, sc, k)
				}
				for _, p := range []string{out, out + pipeline.StagingSuffix} {
					os.RemoveAll(p)
				}
				bargs := append([]string{"build", c.src, "-o", out}, args...)
				if !killedAt(t, strace, bin, sc, k, bargs...) {
					break
				}
				kills++
				if exists(filepath.Join(out, "manifest.json")) {
					// Killed after the dataset was published (syncing its parent folder).
					sameTree(t, full, out)
					continue
				}
				stdout := mustRun(t, append(bargs, "--resume")...)
				if strings.Contains(stdout, "resumed: kept") {
					resumed++
				}
				sameTree(t, full, out)
				checkOnlyOut(t, out)
				if t.Failed() {
					t.Fatalf("%s: killed at %s #%d, resumed:\n%s", c.name, sc, k, stdout)
				}
			}
		}
		if c.name == "frames-part" {
			// The resumed part merges with the other part into the one-machine build.
			whole := filepath.Join(root, "out", c.name, "whole")
			wargs := []string{"--from", "frames", "--clip-len", "2", "--crop", "8", "--shard-size", "500", "--workers", "2"}
			mustRun(t, append([]string{"build", c.src, "-o", whole}, wargs...)...)
			p0 := filepath.Join(root, "out", c.name, "p0")
			mustRun(t, append([]string{"build", c.src, "-o", p0, "--part", "0/2"}, wargs...)...)
			merged := filepath.Join(root, "out", c.name, "merged")
			mustRun(t, "merge", "-o", merged, p0, out)
			sameTree(t, whole, merged)
		}
	}
	t.Logf("%d kills, %d resumed from a checkpoint", kills, resumed)
	if resumed < len(cases) {
		t.Fatalf("only %d of %d resumed builds went on from a checkpoint: the test does not exercise resuming", resumed, kills)
	}
}

// TestResumeRefuses: an interrupted build's checkpoint is not taken over by a build with
// other options, another source listing, or a format that cannot resume; it stays for the right
// build, and a build without --resume starts over.
func TestResumeRefuses(t *testing.T) {
	strace := needStrace(t)
	bin := buildBinary(t)
	renames := syscallSet(t, strace, "rename", "renameat", "renameat2")
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 12)
	out := filepath.Join(root, "out")
	args := []string{"build", src, "--from", "folder", "-o", out, "--crop", "8", "--shard-size", "500", "--workers", "1", "--checkpoint-every", "0"}
	full := filepath.Join(root, "full")
	mustRun(t, "build", src, "--from", "folder", "-o", full, "--crop", "8", "--shard-size", "500")
	// Killed at the commit of its third shard: two shards and a journal are in the staging folder.
	killedAtShard(t, strace, bin, renames, out, 2, args...)
	journal := filepath.Join(out+pipeline.StagingSuffix, pipeline.JournalName)
	if !exists(journal) {
		t.Fatalf("no journal in the staging folder after the kill")
	}
	for _, c := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"other transform", []string{"--crop", "6"}, "transform: was", 1},
		{"other shard size", []string{"--shard-size", "700"}, "shard_size: was", 1},
		{"other checksum block", []string{"--checksum-block", "4KiB"}, "checksum_block: was none, now 4096", 1},
		{"format without checkpoints", []string{"--format", "npy"}, "writes no checkpoints", exitUsage},
	} {
		a := append(append([]string{}, args...), c.args...)
		a = append(a, "--resume")
		_, errs, code := run(t, a...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d saying %q", c.name, code, errs, c.code, c.want)
		}
		if !exists(journal) {
			t.Fatalf("%s: the refused resume removed the checkpoint", c.name)
		}
	}
	// The source changed: an image the checkpoint covers is gone.
	ents, err := filepath.Glob(filepath.Join(src, "*", "*.png"))
	if err != nil || len(ents) < 2 {
		t.Fatalf("source images: %v %v", ents, err)
	}
	moved := ents[0] + ".moved"
	if err := os.Rename(ents[0], moved); err != nil {
		t.Fatal(err)
	}
	_, errs, code := run(t, append(append([]string{}, args...), "--resume")...)
	if code == 0 || !strings.Contains(errs, "source changed") {
		t.Errorf("resume over a changed source: exit %d, stderr %q; want a refusal saying the source changed", code, errs)
	}
	os.Rename(moved, ents[0])
	// The right build takes it over.
	stdout := mustRun(t, append(append([]string{}, args...), "--resume")...)
	if !strings.Contains(stdout, "resumed: kept") {
		t.Fatalf("the matching build did not resume: %s", stdout)
	}
	sameTree(t, full, out)
	checkOnlyOut(t, out)
	// Killed again, a build without --resume starts over and discards the checkpoint.
	os.RemoveAll(out)
	killedAtShard(t, strace, bin, renames, out, 2, args...)
	stdout = mustRun(t, args...)
	if strings.Contains(stdout, "resumed") {
		t.Fatalf("a build without --resume resumed: %s", stdout)
	}
	sameTree(t, full, out)
	checkOnlyOut(t, out)
}
