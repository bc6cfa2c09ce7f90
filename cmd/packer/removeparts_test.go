package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
