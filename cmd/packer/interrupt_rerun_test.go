package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/source/cifar"
)

// TestInterruptRerun stops real builds with SIGTERM and SIGINT as soon as the staging folder
// appears (enumeration, first records) and once shards are being written, into a fresh OUT
// and over an old dataset with --force. Each exits 130 (or finished first), leaves OUT absent
// or byte-for-byte the old dataset, does not hold the lock, and the next build into the same
// OUT (with --resume once shards were being written) succeeds, verifies, equals an
// uninterrupted build, and leaves nothing beside OUT but the lock file.
func TestInterruptRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a dozen real builds")
	}
	bin := buildBinary(t)
	tmp := t.TempDir()
	src, err := cifar.WriteTestDataset(tmp, "cifar10", 3000)
	if err != nil {
		t.Fatal(err)
	}
	oldDS := filepath.Join(tmp, "old")
	mustRun(t, "build", src, "-o", oldDS, "--shard-size", "1MiB")
	oldSum := treeSum(t, oldDS)
	ref := filepath.Join(tmp, "ref")
	mustRun(t, "build", src, "-o", ref, "--shard-size", "64KiB", "--workers", "1", "--layout", "chw")
	interrupted, resumed := 0, 0
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		for _, when := range []int{0, 3} {
			for _, force := range []bool{false, true} {
				out := filepath.Join(tmp, "out")
				for _, p := range []string{out, out + ".packer-partial", out + ".packer-old", out + ".packer-lock", out + ".packer-trash"} {
					if err := os.RemoveAll(p); err != nil {
						t.Fatal(err)
					}
				}
				args := []string{"build", src, "-o", out, "--shard-size", "64KiB", "--workers", "1", "--layout", "chw", "--checkpoint-every", "0"}
				if force {
					if err := os.CopyFS(out, os.DirFS(oldDS)); err != nil {
						t.Fatal(err)
					}
					args = append(args, "--force")
				}
				cmd := exec.Command(bin, args...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					if ents, err := os.ReadDir(out + ".packer-partial"); err == nil && len(ents) >= when {
						break
					}
				}
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				err := cmd.Wait()
				var ee *exec.ExitError
				switch {
				case err == nil:
					t.Logf("%v at %d entries, force %v: the build finished first", sig, when, force)
				case errors.As(err, &ee) && ee.ExitCode() == exitInterrupted:
					interrupted++
					// A build that kept its checkpoint says so, and how to go on from it.
					if _, err := os.Stat(filepath.Join(out+".packer-partial", pipeline.JournalName)); err == nil &&
						!strings.Contains(stderr.String(), "--resume") {
						t.Errorf("%v at %d entries: the checkpoint is kept but stderr does not say to use --resume: %s", sig, when, stderr.String())
					}
					if force {
						if got := treeSum(t, out); got != oldSum {
							t.Fatalf("%v, force: OUT is no longer the old dataset", sig)
						}
					} else if _, err := os.Stat(out); !os.IsNotExist(err) {
						t.Fatalf("%v: an interrupted build left %s (%v)", sig, out, err)
					}
				default:
					t.Fatalf("%v at %d entries: %v, want exit %d; stderr %s", sig, when, err, exitInterrupted, stderr.String())
				}
				// The lock is free and the leftovers are cleared by the next build; once shards
				// were being written, the next build resumes from the interrupted one's last
				// checkpoint (a preempted job's SIGTERM) and writes the uninterrupted bytes.
				rerun := append(args[:len(args):len(args)], "--force")
				if when > 0 {
					rerun = append(rerun, "--resume")
				}
				stdout := mustRun(t, rerun...)
				if strings.Contains(stdout, "resumed: kept") {
					resumed++
				}
				mustRun(t, "verify", out)
				sameTree(t, ref, out)
				for _, p := range []string{out + ".packer-partial", out + ".packer-old", out + ".packer-trash"} {
					if _, err := os.Lstat(p); err == nil {
						t.Errorf("%v: %s left after the rerun", sig, p)
					}
				}
			}
		}
	}
	if interrupted == 0 {
		t.Fatal("no build was interrupted: the test checked nothing")
	}
	t.Logf("%d of 8 builds interrupted, %d reruns resumed", interrupted, resumed)
	if resumed == 0 {
		t.Fatal("no rerun resumed from an interrupted build's checkpoint")
	}
}
