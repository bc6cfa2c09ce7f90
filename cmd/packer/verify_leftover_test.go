package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyRefusesBuildLeftovers: a build's staging folder gets its manifest just before it
// is renamed to OUT, and after an exchange it holds the dataset OUT replaced; OUT.packer-old
// and OUT.packer-trash hold datasets set aside. None of them is a committed dataset (the next
// build into OUT removes or restores them), so verify must not say "ok" for one, even though
// its files match its manifest; it names what the folder is and exits 1. OUT itself, with the
// lock file and the leftovers beside it, still verifies.
func TestVerifyRefusesBuildLeftovers(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	writePNGFolder(t, src, 3)
	out := filepath.Join(tmp, "out")
	mustRun(t, "build", src, "--from", "folder", "-o", out)
	if err := os.WriteFile(out+".packer-lock", []byte("123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, leftover := range []string{out + ".packer-partial", out + ".packer-old", filepath.Join(out+".packer-trash", "out.packer-partial.77.0")} {
		if err := os.CopyFS(leftover, os.DirFS(out)); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(tmp, "link")
		os.Remove(link)
		if err := os.Symlink(leftover, link); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{leftover, link} {
			stdout, errs, code := run(t, "verify", dir)
			if code != exitFailure || strings.Contains(stdout, "ok:") || !strings.Contains(errs, "not a committed dataset") {
				t.Errorf("verify %s: exit %d, output %q %q: want exit %d naming a leftover", dir, code, stdout, errs, exitFailure)
			}
		}
	}
	mustRun(t, "verify", out)
}

// TestVerifyThroughSymlink: a dataset named through a symlink to its folder verifies like the
// folder itself (its files are walked, not the link reported as an unlisted file).
func TestVerifyThroughSymlink(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	writePNGFolder(t, src, 3)
	out := filepath.Join(tmp, "out")
	mustRun(t, "build", src, "--from", "folder", "-o", out)
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(out, link); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "verify", link)
	if err := os.WriteFile(filepath.Join(out, "stray.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, _, code := run(t, "verify", "--strict", link); code != exitCorrupt || !strings.Contains(stdout, "stray.bin") {
		t.Errorf("verify --strict %s with an unlisted file: exit %d, output %q", link, code, stdout)
	}
	if stdout, _, code := run(t, "verify", link); code != 0 || !strings.Contains(stdout, "warning: stray.bin") {
		t.Errorf("verify %s with an unlisted file: exit %d, output %q", link, code, stdout)
	}
}
