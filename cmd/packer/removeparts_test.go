package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
)

// TestRemovePartsKeepsOtherFiles: merge --remove-parts of parts built with --cut-inputs (merged
// by linking, which reads only what each part's manifest lists) removes what the parts' builds
// wrote, never a file of someone else's that lies in a part's folder: a notes file beside the
// shards and a file in a sub-folder are kept, with their folder, and the command says so.
func TestRemovePartsKeepsOtherFiles(t *testing.T) {
	root := t.TempDir()
	src := cutCorpus(t, root)
	args := []string{"--classes", "x,y,z", "--resize", "8", "--crop", "6", "--shard-size", "250", "--cut-inputs", "4", "--workers", "2"}
	var parts []string
	for i := range 2 {
		p := filepath.Join(root, fmt.Sprintf("p%d", i))
		mustRun(t, append([]string{"build", src, "-o", p, "--part", fmt.Sprintf("%d/2", i)}, args...)...)
		parts = append(parts, p)
	}
	notes := filepath.Join(parts[0], "notes.txt")
	kept := filepath.Join(parts[1], "logs", "run.log")
	if err := os.WriteFile(notes, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(kept), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kept, []byte("mine too"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "merged")
	stdout, stderr, code := run(t, "merge", "-o", out, "--remove-parts", parts[0], parts[1])
	for _, f := range []string{notes, kept} {
		if data, err := os.ReadFile(f); err != nil || !strings.HasPrefix(string(data), "mine") {
			t.Errorf("merge --remove-parts (exit %d) removed %s, a file no part's manifest lists: %v\n%s%s", code, f, err, stdout, stderr)
		}
	}
	if code != 0 {
		t.Fatalf("merge --remove-parts: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "notes.txt") || !strings.Contains(stderr, "logs") {
		t.Errorf("merge --remove-parts does not say which files it left:\n%s", stderr)
	}
	for _, p := range parts {
		ents, err := os.ReadDir(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() != "notes.txt" && e.Name() != "logs" {
				t.Errorf("merge --remove-parts left %s of the part %s", e.Name(), p)
			}
		}
	}
	mustRun(t, "verify", out)
}

// TestCutPartsCheckedAsRead: the check of parts built with --cut-inputs (pipeline.CheckCutParts,
// which the linked merge's check shares) returns the merged manifest from the parts' manifests
// as ReadParts read them, so what it checks must be those parts: a part folder whose files are
// another build's by the time they are checked (here part 0 rebuilt with another --resize:
// the same number of shards, of the same sizes, other bytes) is refused, not checked and then
// listed with the SHA-256 of the files it replaced.
func TestCutPartsCheckedAsRead(t *testing.T) {
	root := t.TempDir()
	src := cutCorpus(t, root)
	args := []string{"--classes", "x,y,z", "--crop", "6", "--shard-size", "250", "--cut-inputs", "4", "--workers", "2"}
	build := func(name string, i int, resize string) string {
		p := filepath.Join(root, name)
		mustRun(t, append([]string{"build", src, "-o", p, "--part", fmt.Sprintf("%d/2", i), "--resize", resize}, args...)...)
		return p
	}
	p0, p1, other := build("p0", 0, "8"), build("p1", 1, "8"), build("p0b", 0, "9")
	parts, err := pipeline.ReadParts([]string{p0, p1}, outputNames(false))
	if err != nil {
		t.Fatal(err)
	}
	fss := []shard.FS{shard.DirFS(other), shard.DirFS(p1)}
	_, _, _, err = pipeline.CheckCutParts(parts, fss, shards.ShardName, nil)
	if err == nil {
		t.Fatalf("parts checked through another build's files passed the check")
	}
	t.Logf("refused: %v", err)
}
