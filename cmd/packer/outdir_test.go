package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source/cifar"
)

// writePNGFolder writes an ImageFolder tree (two classes, n tiny PNGs each) under root.
func writePNGFolder(t *testing.T, root string, n int) {
	t.Helper()
	for _, cls := range []string{"cat", "dog"} {
		dir := filepath.Join(root, cls)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			writeTinyPNG(t, filepath.Join(dir, fmt.Sprintf("%03d.png", i)), byte(i*37+len(cls)))
		}
	}
}

func writeTinyPNG(t *testing.T, path string, seed byte) {
	t.Helper()
	im := image.NewRGBA(image.Rect(0, 0, 4, 3))
	for i := range im.Pix {
		im.Pix[i] = seed + byte(i*13)
	}
	im.Set(0, 0, color.RGBA{seed, 0, 255, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, im); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// treeSum describes every entry under root (files by SHA-256, links by target, folders by
// name), so a test can assert that nothing in a tree changed.
func treeSum(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s -> %s\n", rel, target)
		case d.IsDir():
			fmt.Fprintf(&b, "%s/\n", rel)
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(data)
			fmt.Fprintf(&b, "%s %s\n", rel, hex.EncodeToString(h[:]))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return b.String()
}

// fakeDataset writes a manifest.json listing the files in dir, which makes it look like a
// packer dataset to --force (which replaces only those).
func fakeDataset(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		files = append(files, fmt.Sprintf(`{"path":%q}`, e.Name()))
	}
	m := `{"packer":"0.2.0","format":"shards","files":[` + strings.Join(files, ",") + `]}`
	if err := os.WriteFile(filepath.Join(dir, shard.ManifestName), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBuildRefusesOutputOverSource: no OUT (nor the names packer keeps beside it) may be the
// source, contain it or lie inside it, whatever --force says; the refusal comes before
// anything is created or removed and exits 2.
func TestBuildRefusesOutputOverSource(t *testing.T) {
	cases := []struct {
		name string
		// enumerated: the overlap is found as the inputs are enumerated, after the build took
		// OUT's lock (whose file stays); all others are refused before anything is created.
		enumerated bool
		// setup prepares tmp and returns the build's arguments and the folder that must not
		// change.
		setup func(t *testing.T, tmp string) (args []string, keep string)
	}{
		{"out is the source", false, func(t *testing.T, tmp string) ([]string, string) {
			src := filepath.Join(tmp, "src")
			writePNGFolder(t, src, 2)
			return []string{"build", src, "-o", src, "--force"}, tmp
		}},
		{"out contains the source", false, func(t *testing.T, tmp string) ([]string, string) {
			writePNGFolder(t, filepath.Join(tmp, "data", "train"), 2)
			return []string{"build", filepath.Join(tmp, "data", "train"), "-o", filepath.Join(tmp, "data"), "--force"}, tmp
		}},
		{"out inside the source", false, func(t *testing.T, tmp string) ([]string, string) {
			src := filepath.Join(tmp, "src")
			writePNGFolder(t, src, 2)
			return []string{"build", src, "--from", "folder", "-o", filepath.Join(src, "packed")}, tmp
		}},
		{"out is a link to the source", false, func(t *testing.T, tmp string) ([]string, string) {
			src := filepath.Join(tmp, "src")
			writePNGFolder(t, src, 2)
			if err := os.Symlink(src, filepath.Join(tmp, "link")); err != nil {
				t.Fatal(err)
			}
			return []string{"build", src, "-o", filepath.Join(tmp, "link"), "--force"}, tmp
		}},
		{"source named like the staging folder", false, func(t *testing.T, tmp string) ([]string, string) {
			src := filepath.Join(tmp, "x.packer-partial")
			writePNGFolder(t, src, 2)
			return []string{"build", src, "--from", "folder", "-o", filepath.Join(tmp, "x")}, tmp
		}},
		{"source named like the old-output folder", false, func(t *testing.T, tmp string) ([]string, string) {
			src := filepath.Join(tmp, "x.packer-old")
			writePNGFolder(t, src, 2)
			if err := os.MkdirAll(filepath.Join(tmp, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeTinyPNG(t, filepath.Join(tmp, "x", "keep.png"), 9)
			return []string{"build", src, "--from", "folder", "-o", filepath.Join(tmp, "x"), "--force"}, tmp
		}},
		{"out contains a cifar file", false, func(t *testing.T, tmp string) ([]string, string) {
			dir := filepath.Join(tmp, "d")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "data.bin")
			if err := cifar.WriteBinary(path, "cifar10", cifar.TestRecords("cifar10", 5, 1)); err != nil {
				t.Fatal(err)
			}
			return []string{"build", path, "--from", "cifar10", "-o", dir, "--force"}, tmp
		}},
		{"out holds the listed files", true, func(t *testing.T, tmp string) ([]string, string) {
			imgs := filepath.Join(tmp, "imgs")
			if err := os.MkdirAll(imgs, 0o755); err != nil {
				t.Fatal(err)
			}
			writeTinyPNG(t, filepath.Join(imgs, "a.png"), 1)
			writeTinyPNG(t, filepath.Join(imgs, "b.png"), 2)
			fakeDataset(t, imgs) // else --force refuses it first, as no dataset
			list := filepath.Join(tmp, "list.csv")
			data := fmt.Sprintf("path,label\n%s,0\n%s,1\n", filepath.Join(imgs, "a.png"), filepath.Join(imgs, "b.png"))
			if err := os.WriteFile(list, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"build", list, "--from", "list", "-o", imgs, "--force"}, tmp
		}},
		{"a link in the source points into out", true, func(t *testing.T, tmp string) ([]string, string) {
			src := filepath.Join(tmp, "src")
			writePNGFolder(t, src, 2)
			out := filepath.Join(tmp, "out")
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			writeTinyPNG(t, filepath.Join(out, "precious.png"), 7)
			fakeDataset(t, out) // else --force refuses it first, as no dataset
			if err := os.Symlink(filepath.Join(out, "precious.png"), filepath.Join(src, "cat", "zz.png")); err != nil {
				t.Fatal(err)
			}
			return []string{"build", src, "--from", "folder", "-o", out, "--force"}, tmp
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			args, keep := c.setup(t, tmp)
			before := treeSum(t, keep)
			_, errs, code := run(t, args...)
			if code != exitUsage {
				t.Errorf("packer %s: exit %d, want %d (stderr %q)", strings.Join(args, " "), code, exitUsage, errs)
			}
			if !strings.Contains(errs, "source") {
				t.Errorf("the refusal does not say why: %q", errs)
			}
			after := treeSum(t, keep)
			if c.enumerated {
				var kept []string
				for _, l := range strings.SplitAfter(after, "\n") {
					if !strings.Contains(l, ".packer-lock ") {
						kept = append(kept, l)
					}
				}
				after = strings.Join(kept, "")
			}
			if after != before {
				t.Fatalf("the build changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestBuildRefusesLockedOutput: while another build holds OUT's lock, a build refuses at once,
// names the holder's pid, and leaves the holder's staging folder alone.
func TestBuildRefusesLockedOutput(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	writePNGFolder(t, src, 2)
	out := filepath.Join(tmp, "out")
	// The holder: a real flock on the lock file, as a running build takes it.
	lf, err := os.OpenFile(out+".packer-lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if _, err := lf.WriteString("424242\n"); err != nil {
		t.Fatal(err)
	}
	staging := out + ".packer-partial"
	if err := os.MkdirAll(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTinyPNG(t, filepath.Join(staging, "shard-in-progress"), 3)
	before := treeSum(t, tmp)
	_, errs, code := run(t, "build", src, "--from", "folder", "-o", out)
	if code == 0 {
		t.Fatalf("a second build into a locked OUT succeeded (stderr %q)", errs)
	}
	if !strings.Contains(errs, "424242") {
		t.Errorf("the refusal does not name the holder's pid: %q", errs)
	}
	if after := treeSum(t, tmp); after != before {
		t.Fatalf("the refused build changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// Once the holder is gone, the build goes ahead (and clears the dead holder's staging).
	lf.Close()
	mustRun(t, "build", src, "--from", "folder", "-o", out)
	mustRun(t, "verify", out)
	if _, err := os.Stat(staging); !os.IsNotExist(err) {
		t.Fatalf("staging folder left behind: %v", err)
	}
}

// TestBuildRecoversInterruptedSwap: a --force build killed after moving the old dataset aside
// left OUT missing and OUT.packer-old holding the old dataset; the next build puts it back
// instead of deleting it.
func TestBuildRecoversInterruptedSwap(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			tmp := t.TempDir()
			src := filepath.Join(tmp, "src")
			writePNGFolder(t, src, 2)
			out := filepath.Join(tmp, "out")
			mustRun(t, "build", src, "--from", "folder", "-o", out)
			oldSum := treeSum(t, out)
			if err := os.Rename(out, out+".packer-old"); err != nil {
				t.Fatal(err)
			}
			// A half-written staging folder of the killed build.
			if err := os.MkdirAll(out+".packer-partial", 0o755); err != nil {
				t.Fatal(err)
			}
			args := []string{"build", src, "--from", "folder", "-o", out, "--layout", "chw"}
			if force {
				args = append(args, "--force")
			}
			_, errs, code := run(t, args...)
			if force {
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errs)
				}
				m, err := shard.ReadManifest(out)
				if err != nil || m.Sample.Layout != "chw" {
					t.Fatalf("--force after recovery did not build: %v", err)
				}
			} else {
				if code != exitUsage {
					t.Fatalf("plain build after an interrupted swap: exit %d (%s), want %d: OUT (recovered) is not empty", code, errs, exitUsage)
				}
				if got := treeSum(t, out); got != oldSum {
					t.Fatalf("the old dataset was not put back at OUT:\n%s\nwant\n%s", got, oldSum)
				}
			}
			mustRun(t, "verify", out)
			for _, p := range []string{out + ".packer-old", out + ".packer-partial"} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s left behind: %v", p, err)
				}
			}
		})
	}
}

// TestBuildRefusesMountPoint: an OUT that is a mount point cannot be swapped by rename; the
// build says so before decoding anything instead of failing at the end.
func TestBuildRefusesMountPoint(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	writePNGFolder(t, src, 2)
	out := filepath.Join(tmp, "mnt")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", out).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); mount-point detection untested", err, msg)
	}
	defer exec.Command("umount", out).Run()
	for _, force := range []bool{false, true} {
		args := []string{"build", src, "--from", "folder", "-o", out}
		if force {
			writeTinyPNG(t, filepath.Join(out, "old.png"), 5)
			args = append(args, "--force")
		}
		before := treeSum(t, tmp)
		_, errs, code := run(t, args...)
		if code != exitUsage || !strings.Contains(errs, "mount point") || !strings.Contains(errs, "subdirectory") {
			t.Fatalf("build into a mount point (force=%v): exit %d, stderr %q; want exit %d saying it is a mount point and to use a subdirectory", force, code, errs, exitUsage)
		}
		if after := treeSum(t, tmp); after != before {
			t.Fatalf("the refused build changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	}
	// A subdirectory of the mount point works.
	mustRun(t, "build", src, "--from", "folder", "-o", filepath.Join(out, "ds"))
	mustRun(t, "verify", filepath.Join(out, "ds"))
}

// TestConcurrentBuildsIntoOneOutput runs a real build and, while it holds OUT (stopped with
// SIGSTOP once it holds the lock, so the overlap does not depend on the machine's speed), a
// second build into the same OUT: the second refuses at once naming the first's pid and
// touches nothing; the first, continued, completes intact.
func TestConcurrentBuildsIntoOneOutput(t *testing.T) {
	bin := buildBinary(t)
	tmp := t.TempDir()
	src, err := cifar.WriteTestDataset(tmp, "cifar10", 2000)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out")
	first := exec.Command(bin, "build", src, "-o", out, "--shard-size", "64KiB", "--workers", "1")
	var stderr bytes.Buffer
	first.Stderr = &stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		first.Process.Signal(syscall.SIGCONT)
		first.Process.Kill()
	}()
	pid := strconv.Itoa(first.Process.Pid)
	// The lock file holds the pid once the first build holds the lock; stop it once it is
	// writing shards into its staging folder.
	staging := out + ".packer-partial"
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		b, _ := os.ReadFile(out + ".packer-lock")
		ents, _ := os.ReadDir(staging)
		if strings.TrimSpace(string(b)) == pid && len(ents) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first build never took the lock: %s", stderr.String())
		}
	}
	if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// kill(2) returns before the stop takes effect: wait until every thread of the first
	// build is stopped, or it may still rename a shard while the tree is being summed.
	if !waitStopped(t, first.Process.Pid) {
		t.Fatalf("the first build finished before it could be stopped; nothing overlapped")
	}
	// The first build must still hold the lock (it did not finish before it was stopped).
	lf, err := os.Open(out + ".packer-lock")
	if err != nil {
		t.Fatal(err)
	}
	if syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		lf.Close()
		t.Fatalf("the first build finished before it could be stopped; nothing overlapped")
	}
	lf.Close()
	before := treeSum(t, staging)
	_, errs, code := run(t, "build", src, "-o", out, "--force", "--layout", "chw")
	after := treeSum(t, staging)
	if err := first.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if werr := first.Wait(); werr != nil {
		t.Fatalf("the first build failed (%v): %s", werr, stderr.String())
	}
	if code == 0 {
		t.Fatalf("a second build into an OUT being built succeeded")
	}
	if !strings.Contains(errs, "pid "+pid) {
		t.Fatalf("the refusal does not name the first build's pid %s: %q", pid, errs)
	}
	if after != before {
		t.Fatalf("the second build changed the first build's staging folder:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	mustRun(t, "verify", out)
	m, err := shard.ReadManifest(out)
	if err != nil || m.Count != 10000 || m.Sample.Layout != "hwc" {
		t.Fatalf("OUT is not the first build's dataset: %v %+v", err, m)
	}
}

// TestBuildRefusesBindMountOfSource: the source seen under another path through a bind mount
// is still the source (device and inode, not names, are compared).
func TestBuildRefusesBindMountOfSource(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	writePNGFolder(t, src, 2)
	alias := filepath.Join(tmp, "alias")
	if err := os.Mkdir(alias, 0o755); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command("mount", "--bind", src, alias).CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount here (%v: %s); bind-mount aliasing untested", err, msg)
	}
	defer exec.Command("umount", alias).Run()
	before := treeSum(t, src)
	for _, args := range [][]string{
		{"build", src, "--from", "folder", "-o", alias, "--force"},
		{"build", src, "--from", "folder", "-o", filepath.Join(alias, "packed")},
		{"build", alias, "--from", "folder", "-o", filepath.Join(src, "packed")},
	} {
		_, errs, code := run(t, args...)
		if code != exitUsage || !strings.Contains(errs, "source") {
			t.Errorf("packer %s: exit %d (%q), want %d naming the source", strings.Join(args, " "), code, errs, exitUsage)
		}
		if after := treeSum(t, src); after != before {
			t.Fatalf("packer %s changed the source:\n%s", strings.Join(args, " "), after)
		}
	}
}

// TestBuildRefusesInputInLeftover: a listed file inside what an interrupted build left beside
// OUT (its staging folder, or the old OUT set aside) is refused, and the leftover, which the
// build moves into OUT.packer-trash, is not removed with the file in it.
func TestBuildRefusesInputInLeftover(t *testing.T) {
	for _, leftover := range []string{".packer-partial", ".packer-old"} {
		t.Run(leftover, func(t *testing.T) {
			tmp := t.TempDir()
			out := filepath.Join(tmp, "x")
			if leftover == ".packer-old" {
				// OUT.packer-old beside a committed OUT is a finished replacement's old tree.
				src := filepath.Join(tmp, "src")
				writePNGFolder(t, src, 1)
				mustRun(t, "build", src, "--from", "folder", "-o", out)
			}
			dir := out + leftover
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			img := filepath.Join(dir, "img.png")
			writeTinyPNG(t, img, 4)
			want, err := os.ReadFile(img)
			if err != nil {
				t.Fatal(err)
			}
			list := filepath.Join(tmp, "list.csv")
			if err := os.WriteFile(list, []byte("path,label\n"+img+",0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errs, code := run(t, "build", list, "--from", "list", "-o", out, "--force")
			if code != exitUsage || !strings.Contains(errs, "img.png") {
				t.Fatalf("exit %d (%q), want %d naming the input", code, errs, exitUsage)
			}
			found := false
			_ = filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Name() == "img.png" {
					if got, _ := os.ReadFile(p); bytes.Equal(got, want) {
						found = true
					}
				}
				return nil
			})
			if !found {
				t.Fatalf("the listed file in %s was deleted", dir)
			}
		})
	}
}

// TestBuildLeavesForeignLockFileAlone: the lock file is opened without following links and
// only ever holds a pid, so a link or a user's file under its name is refused, not truncated.
func TestBuildLeavesForeignLockFileAlone(t *testing.T) {
	for _, kind := range []string{"link", "file"} {
		t.Run(kind, func(t *testing.T) {
			tmp := t.TempDir()
			src := filepath.Join(tmp, "src")
			writePNGFolder(t, src, 1)
			precious := filepath.Join(tmp, "notes.txt")
			if err := os.WriteFile(precious, []byte("do not truncate me\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(tmp, "out")
			if kind == "link" {
				if err := os.Symlink(precious, out+".packer-lock"); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.Rename(precious, out+".packer-lock"); err != nil {
					t.Fatal(err)
				}
			}
			before := treeSum(t, tmp)
			_, errs, code := run(t, "build", src, "--from", "folder", "-o", out)
			if code == 0 || !strings.Contains(errs, ".packer-lock") {
				t.Fatalf("exit %d (%q), want a failure naming the lock file", code, errs)
			}
			if after := treeSum(t, tmp); after != before {
				t.Fatalf("the build changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// waitStopped waits until every thread of process pid (a child not yet waited for) is in the
// stopped state ('T' in /proc/PID/task/TID/stat), and reports true; false if the process
// exited first (a zombie, 'Z': it ended before the stop came).
func waitStopped(t *testing.T, pid int) bool {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			if err != nil {
				stopped = false
				break
			}
			// The state follows the command name, which is in parentheses.
			i := bytes.LastIndexByte(b, ')')
			if i >= 0 && i+2 < len(b) && b[i+2] == 'Z' && task.Name() == strconv.Itoa(pid) {
				return false
			}
			if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return true
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not stop within 30 s of SIGSTOP", pid)
		}
	}
}

// TestForceReplacesOnlyDatasets: --force replaces a packer dataset or an empty folder, never a
// folder of something else, nor a part (only a build of the same part replaces one), for build
// and merge; an OUT that is a file is refused saying so (not "use --force").
func TestForceReplacesOnlyDatasets(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 2)
	var parts []string
	for i := 0; i < 2; i++ {
		p := filepath.Join(root, fmt.Sprint("p", i))
		mustRun(t, "build", src, "--from", "folder", "-o", p, "--part", fmt.Sprintf("%d/2", i))
		parts = append(parts, p)
	}
	build := func(out string) []string { return []string{"build", src, "--from", "folder", "-o", out, "--force"} }
	merge := func(out string) []string { return append([]string{"merge", "-o", out, "--force"}, parts...) }
	for _, cmd := range []struct {
		name string
		args func(string) []string
	}{{"build", build}, {"merge", merge}} {
		t.Run(cmd.name, func(t *testing.T) {
			dir := t.TempDir()
			// Refused: a folder holding only someone's file, a folder with a manifest.json
			// that is not a packer manifest, a file.
			thesis := filepath.Join(dir, "thesis")
			os.MkdirAll(thesis, 0o755)
			os.WriteFile(filepath.Join(thesis, "thesis.txt"), []byte("four years"), 0o644)
			notOurs := filepath.Join(dir, "web")
			os.MkdirAll(notOurs, 0o755)
			os.WriteFile(filepath.Join(notOurs, "manifest.json"), []byte(`{"name":"my web app"}`), 0o644)
			file := filepath.Join(dir, "file")
			os.WriteFile(file, []byte("not a folder"), 0o644)
			// A dataset folder into which the user put a file of their own.
			mixed := filepath.Join(dir, "mixed")
			mustRun(t, "build", src, "--from", "folder", "-o", mixed)
			os.WriteFile(filepath.Join(mixed, "notes.txt"), []byte("mine"), 0o644)
			// A part: only a build of the same part replaces it (TestForceReplacesOnlyTheSamePart).
			part := filepath.Join(dir, "part")
			mustRun(t, "build", src, "--from", "folder", "-o", part, "--part", "1/3")
			for _, c := range []struct{ out, want string }{
				{thesis, "not a packer dataset"},
				{notOurs, "not a packer dataset"},
				{file, "is a file"},
				{mixed, "notes.txt, which packer did not write"},
				{part, "a part is replaced only by a build of the same part"},
			} {
				before := noLocks(treeSum(t, dir))
				_, errs, code := run(t, cmd.args(c.out)...)
				t.Log(errs)
				if code != exitUsage || !strings.Contains(errs, c.want) || !strings.Contains(errs, c.out) || strings.Contains(errs, "use --force") {
					t.Errorf("%s -o %s --force: exit %d, want %d naming it and saying %q (not \"use --force\"):\n%s", cmd.name, c.out, code, exitUsage, c.want, errs)
				}
				if after := noLocks(treeSum(t, dir)); after != before {
					t.Errorf("%s -o %s --force changed the tree:\nbefore:\n%s\nafter:\n%s", cmd.name, c.out, before, after)
				}
			}
			// Replaced: an empty folder, a dataset.
			empty := filepath.Join(dir, "empty")
			os.MkdirAll(empty, 0o755)
			dataset := filepath.Join(dir, "dataset")
			mustRun(t, "build", src, "--from", "folder", "-o", dataset, "--format", "npy", "--crop", "2")
			for _, out := range []string{empty, dataset} {
				mustRun(t, cmd.args(out)...)
				if m, err := shard.ReadManifest(out); err != nil || m.Part != nil {
					t.Errorf("%s -o %s --force: %v (part %v)", cmd.name, out, err, m != nil && m.Part != nil)
				}
			}
		})
	}
}
