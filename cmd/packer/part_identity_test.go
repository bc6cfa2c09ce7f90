package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/storage/s3"
)

// TestForceReplacesOnlyTheSamePart: --force over a finished part replaces it only with a build
// of the same part. Another count (the retry of an array task that took its count from the
// array it was resubmitted in), another index, a whole build, a listing of another size, a
// listing of the same size with other names, and the same listing of touched files are each
// refused (exit 2) naming the part at OUT and what this build is, and leave every part's files
// as they were. The same part replaces a damaged copy of itself, with the bytes of the first
// build, from --part I/N and from --part auto with SLURM_ARRAY_TASK_ID and PACKER_PARTS.
func TestForceReplacesOnlyTheSamePart(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 3) // 6 inputs: parts of 2
	parts := filepath.Join(root, "parts")
	part := func(i int) string { return filepath.Join(parts, "part-"+string(rune('0'+i))) }
	build := func(out string, extra ...string) []string {
		return append([]string{"build", src, "--from", "folder", "-o", out, "--crop", "2"}, extra...)
	}
	for i := 0; i < 3; i++ {
		mustRun(t, build(part(i), "--part", string(rune('0'+i))+"/3")...)
	}
	first := filepath.Join(root, "first")
	if err := os.CopyFS(first, os.DirFS(part(1))); err != nil {
		t.Fatal(err)
	}
	refused := func(name string, args []string, want ...string) {
		t.Helper()
		before := noLocks(treeSum(t, parts))
		_, errs, code := run(t, args...)
		want = append(want, part(1)+" holds part 1/3 of a listing of 6 inputs (listing_sha256 ", "a part is replaced only by a build of the same part",
			part(1)+" is left as it was: retry it as part 1/3")
		for _, w := range want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: exit %d, stderr lacks %q:\n%s", name, code, w, errs)
			}
		}
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d", name, code, exitUsage)
		}
		if after := noLocks(treeSum(t, parts)); after != before {
			t.Errorf("%s changed the parts:\nbefore:\n%s\nafter:\n%s", name, before, after)
		}
		for _, suf := range []string{pipeline.StagingSuffix, pipeline.OldSuffix, pipeline.TrashSuffix} {
			if exists(part(1) + suf) {
				t.Errorf("%s left %s", name, part(1)+suf)
			}
		}
	}
	refused("another count", build(part(1), "--part", "1/2", "--force"), "this build is part 1/2")
	refused("another index", build(part(1), "--part", "2/3", "--force"), "this build is part 2/3")
	refused("a whole build", build(part(1), "--force"), "this command writes a whole dataset, not a part")
	t.Setenv("SLURM_ARRAY_TASK_ID", "1")
	t.Setenv("PACKER_PARTS", "2")
	refused("--part auto, PACKER_PARTS=2", build(part(1), "--part", "auto", "--force"), "this build is part 1/2")

	// The source's listing changed: one more input (refused before anything is decoded), the
	// same number of inputs under other names, the same names with other modification times.
	extra := filepath.Join(src, "dog", "zzz.png")
	writeTinyPNG(t, extra, 99)
	refused("a longer listing", build(part(1), "--part", "1/3", "--force"), "this build is part 1/3 of a listing of 7 inputs")
	gone := filepath.Join(src, "cat", "000.png")
	moved := filepath.Join(root, "000.png")
	if err := os.Rename(gone, moved); err != nil {
		t.Fatal(err)
	}
	refused("another listing", build(part(1), "--part", "1/3", "--force"), "this build is part 1/3 of a listing of 6 inputs (listing_sha256 ")
	if err := os.Rename(moved, gone); err != nil {
		t.Fatal(err)
	}
	os.Remove(extra)
	touched := filepath.Join(src, "cat", "002.png") // an input of part 1
	st, err := os.Stat(touched)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(touched, st.ModTime().Add(time.Hour), st.ModTime().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	refused("touched inputs", build(part(1), "--part", "1/3", "--force"), "of the same listing with other input files (content_sha256 ")
	if err := os.Chtimes(touched, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}

	// The same part replaces a damaged copy of itself: from --part 1/3, and from --part auto
	// with the count from PACKER_PARTS (SLURM_ARRAY_TASK_ID=1 as set above).
	shards, err := filepath.Glob(filepath.Join(part(1), "*.pks"))
	if err != nil || len(shards) == 0 {
		t.Fatalf("part 1's shards: %v %v", shards, err)
	}
	if err := os.Remove(shards[0]); err != nil {
		t.Fatal(err)
	}
	mustRun(t, build(part(1), "--part", "1/3", "--force")...)
	sameTree(t, first, part(1))
	if err := os.WriteFile(shards[0], []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PACKER_PARTS", "3")
	mustRun(t, build(part(1), "--part", "auto", "--force")...)
	sameTree(t, first, part(1))
	mustRun(t, "verify", part(1))
}

// TestPartCheckpointKept: the checkpoint of an interrupted part (its staging folder with a
// journal) is neither resumed nor discarded by a build of another part or a whole build, with
// --resume or without, --force or not; the same part resumes from it.
func TestPartCheckpointKept(t *testing.T) {
	strace := needStrace(t)
	bin := buildBinary(t)
	renames := syscallSet(t, strace, "rename", "renameat", "renameat2")
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 12)
	out := filepath.Join(root, "part-1")
	args := []string{"build", src, "--from", "folder", "-o", out, "--crop", "8", "--shard-size", "500", "--workers", "1", "--checkpoint-every", "0"}
	full := filepath.Join(root, "full")
	mustRun(t, append(args[:4:4], "-o", full, "--crop", "8", "--shard-size", "500", "--part", "1/2")...)
	// Killed at the commit of its second shard: the checkpoint holds the first.
	killedAtShard(t, strace, bin, renames, out, 1, append(args, "--part", "1/2")...)
	staging := out + pipeline.StagingSuffix
	if !exists(filepath.Join(staging, pipeline.JournalName)) {
		t.Fatal("no journal in the staging folder after the kill")
	}
	for _, c := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"another count, resumed", []string{"--part", "1/3", "--resume", "--force"}, "this build is part 1/3"},
		{"another count", []string{"--part", "1/3"}, "this build is part 1/3"},
		{"another index", []string{"--part", "0/2", "--force"}, "this build is part 0/2"},
		{"a whole build", []string{"--force"}, "this command writes a whole dataset"},
	} {
		before := treeSum(t, staging)
		_, errs, code := run(t, append(append([]string{}, args...), c.extra...)...)
		for _, w := range []string{staging + " holds the checkpoint of an interrupted part 1/2", c.want, "a part is replaced only by a build of the same part"} {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: exit %d, stderr lacks %q:\n%s", c.name, code, w, errs)
			}
		}
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d", c.name, code, exitUsage)
		}
		if after := treeSum(t, staging); after != before {
			t.Fatalf("%s changed the checkpoint:\nbefore:\n%s\nafter:\n%s", c.name, before, after)
		}
	}
	stdout := mustRun(t, append(args, "--part", "1/2", "--force", "--resume")...)
	if !strings.Contains(stdout, "resumed: kept") {
		t.Fatalf("the same part did not resume: %s", stdout)
	}
	sameTree(t, full, out)
	checkOnlyOut(t, out)
}

// TestS3ForceReplacesOnlyTheSamePart: a part published to an object store is replaced only by
// the same part, as a local one: another count, a whole build and a merge are refused before
// any work, a part of a longer listing before its publish; every object stays as it was. The
// same part replaces it with the same bytes.
func TestS3ForceReplacesOnlyTheSamePart(t *testing.T) {
	srv := s3Setup(t, "parts")
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 3)
	out := "s3://parts/run/part-1"
	build := func(extra ...string) []string {
		return append([]string{"build", src, "--from", "folder", "-o", out, "--crop", "2"}, extra...)
	}
	mustRun(t, build("--part", "1/3")...)
	before := objects(t, srv, s3.URL{Bucket: "parts"})
	p0 := filepath.Join(root, "p0")
	mustRun(t, "build", src, "--from", "folder", "-o", p0, "--crop", "2", "--part", "0/1")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"another count", build("--part", "1/2", "--force"), "this build is part 1/2"},
		{"a whole build", build("--force"), "this command writes a whole dataset"},
		{"a merge", []string{"merge", "-o", out, "--force", p0}, "this command writes a whole dataset"},
	} {
		_, errs, code := run(t, c.args...)
		for _, w := range []string{out + " holds part 1/3 of a listing of 6 inputs", c.want, "a part is replaced only by a build of the same part"} {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: exit %d, stderr lacks %q:\n%s", c.name, code, w, errs)
			}
		}
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d", c.name, code, exitUsage)
		}
	}
	extra := filepath.Join(src, "dog", "zzz.png")
	writeTinyPNG(t, extra, 99)
	_, errs, code := run(t, build("--part", "1/3", "--force")...)
	if code != exitUsage || !strings.Contains(errs, "this build is part 1/3 of a listing of 7 inputs (listing_sha256 ") {
		t.Errorf("a longer listing: exit %d, want %d refusing it:\n%s", code, exitUsage, errs)
	}
	if after := objects(t, srv, s3.URL{Bucket: "parts"}); !maps.EqualFunc(before, after, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("the refused builds changed the bucket: %d objects before, %d after", len(before), len(after))
	}
	os.Remove(extra)
	mustRun(t, build("--part", "1/3", "--force")...)
	// The replacement (under a new generation prefix) holds the same files, by SHA-256.
	sums := func(m []byte) []string {
		var man struct {
			Files []struct {
				SHA256 string `json:"sha256"`
			} `json:"files"`
		}
		if err := json.Unmarshal(m, &man); err != nil || len(man.Files) == 0 {
			t.Fatalf("manifest: %v\n%s", err, m)
		}
		var out []string
		for _, f := range man.Files {
			out = append(out, f.SHA256)
		}
		return out
	}
	after := objects(t, srv, s3.URL{Bucket: "parts"})
	if a, b := sums(before["run/part-1/manifest.json"]), sums(after["run/part-1/manifest.json"]); !slices.Equal(a, b) {
		t.Errorf("the same part replaced itself with other files: %v, then %v", a, b)
	}
	mustRun(t, "verify", out)
}
