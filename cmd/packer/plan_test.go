package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/shard"
)

// buildPartsFrom builds n parts from src (a source or a plan) under dir and merges them into
// dir/merged, which it returns.
func buildPartsFrom(t *testing.T, src, dir string, n int, args ...string) string {
	t.Helper()
	var parts []string
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("p%d", i))
		mustRun(t, append([]string{"build", src, "-o", p, "--part", fmt.Sprintf("%d/%d", i, n)}, args...)...)
		parts = append(parts, p)
	}
	merged := filepath.Join(dir, "merged")
	mustRun(t, append([]string{"merge", "-o", merged}, parts...)...)
	return merged
}

// TestPlanPartsMergeSameBytes: for every kind, parts built from a plan merge into the dataset
// one build of the source writes, byte for byte; a part built from a plan records what a part
// built from the source records (same manifest). A whole build from a plan is the build of the
// source too.
func TestPlanPartsMergeSameBytes(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	cases := []struct {
		name, src string
		args      []string
		items     bool
	}{
		{"folder", src["folder"], []string{"--resize", "8", "--crop", "6"}, true},
		{"list", src["list"], []string{"--resize", "6", "--crop", "6", "--classes", "x,y,z"}, true},
		{"frames", src["frames"], []string{"--from", "frames", "--clip-len", "2", "--crop", "8"}, true},
		{"cifar", src["cifar"], []string{"--from", "cifar10", "--dtype", "float16"}, false},
		{"idx", src["idx"], []string{"--layout", "chw"}, false},
		{"webdataset", src["wds"], []string{"--crop", "5", "--classes", "x,y,z"}, false},
		{"video", src["video"], []string{"--from", "video", "--clip-len", "3", "--clip-stride", "2", "--resize", "12", "--crop", "10"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(root, "out", c.name)
			full := filepath.Join(dir, "full")
			build := append([]string{"--format", "npy", "--shard-size", "600", "--workers", "2"}, c.args...)
			if c.name == "webdataset" || c.name == "frames" || c.name == "video" {
				build[1] = "shards"
			}
			mustRun(t, append([]string{"build", c.src, "-o", full}, build...)...)
			// The plan takes the source flags; the transform and format flags are the build's.
			var srcFlags, xform []string
			for i := 0; i < len(build); i += 2 {
				switch build[i] {
				case "--from", "--classes", "--clip-len", "--clip-stride":
					srcFlags = append(srcFlags, build[i:i+2]...)
				default:
					xform = append(xform, build[i:i+2]...)
				}
			}
			plan := filepath.Join(dir, "src.plan")
			out := mustRun(t, append([]string{"plan", c.src, "-o", plan}, srcFlags...)...)
			if got := strings.Contains(out, "its inputs listed"); got != c.items {
				t.Errorf("plan of %s: item lines %v, want %v:\n%s", c.name, got, c.items, out)
			}
			merged := buildPartsFrom(t, plan, filepath.Join(dir, "fromplan"), 3, xform...)
			sameTree(t, full, merged)
			// Part 1 from the plan is the part built from the source: same manifest, same data.
			direct := filepath.Join(dir, "direct-p1")
			mustRun(t, append([]string{"build", c.src, "-o", direct, "--part", "1/3"}, build...)...)
			sameTree(t, direct, filepath.Join(dir, "fromplan", "p1"))
			// A whole build from the plan.
			whole := filepath.Join(dir, "whole")
			mustRun(t, append([]string{"build", plan, "-o", whole}, xform...)...)
			sameTree(t, full, whole)
		})
	}
}

// TestPlanSourceChanged: after `packer plan`, files added to a folder source (and one removed)
// do not change what parts built from the plan build: they do not list the source. A CIFAR
// plan (count and digest only) refuses a part built while the source changed, naming the plan
// and the source; and merge refuses a part built from the plan mixed with one built from the
// changed source's own listing, naming it.
func TestPlanSourceChanged(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	args := []string{"--resize", "8", "--crop", "6", "--workers", "2"}
	full := filepath.Join(root, "full")
	mustRun(t, append([]string{"build", src["folder"], "-o", full}, args...)...)
	plan := filepath.Join(root, "folder.plan")
	mustRun(t, "plan", src["folder"], "-o", plan)
	writePNG(t, filepath.Join(src["folder"], "a", "00new.png"), 9, 9, 3)
	writePNG(t, filepath.Join(src["folder"], "c", "zz.png"), 9, 9, 4)
	merged := buildPartsFrom(t, plan, filepath.Join(root, "fromplan"), 3, args...)
	sameTree(t, full, merged)

	// A part of the changed source's own listing does not merge with parts of the plan.
	other := filepath.Join(root, "other-p2")
	mustRun(t, append([]string{"build", src["folder"], "-o", other, "--part", "2/3"}, args...)...)
	out := filepath.Join(root, "mixed")
	_, stderr, code := run(t, "merge", "-o", out, filepath.Join(root, "fromplan", "p0"), filepath.Join(root, "fromplan", "p1"), other)
	if code != 1 || !strings.Contains(stderr, "source listing") || !strings.Contains(stderr, other) {
		t.Errorf("merge of a plan's parts and another listing's part: exit %d, want 1 naming %s and the listing:\n%s", code, other, stderr)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused merge wrote %s", out)
	}

	// CIFAR: the plan has no item lines; a part lists the source and checks it.
	cplan := filepath.Join(root, "cifar.plan")
	mustRun(t, "plan", src["cifar"], "-o", cplan, "--from", "cifar10")
	if data, err := os.ReadFile(cplan); err != nil || strings.Count(string(data), "\n") != 1 {
		t.Fatalf("CIFAR plan: want the header line only, got %q (%v)", data, err)
	}
	batch := filepath.Join(src["cifar"], "data_batch_2.bin")
	data, err := os.ReadFile(batch)
	if err != nil {
		t.Fatal(err)
	}
	data[0] = (data[0] + 1) % 10 // the first record's label
	if err := os.WriteFile(batch, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cpart := filepath.Join(root, "cifar-p0")
	_, stderr, code = run(t, "build", cplan, "-o", cpart, "--part", "0/2")
	if code == 0 || !strings.Contains(stderr, cplan) || !strings.Contains(stderr, src["cifar"]) || !strings.Contains(stderr, "make a new plan") {
		t.Errorf("part of a CIFAR plan whose source changed: exit %d, want a refusal naming the plan and the source:\n%s", code, stderr)
	}
	if _, err := os.Stat(cpart); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused part wrote %s", cpart)
	}
}

// TestPlanRefuses: a damaged, truncated or foreign plan file is refused with an error naming the
// file (and the line, where one is at fault), and nothing is written; source flags that disagree
// with the plan are a usage error.
func TestPlanRefuses(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 3)
	plan := filepath.Join(root, "ok.plan")
	mustRun(t, "plan", src, "-o", plan)
	good, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	if len(lines) != 8 || lines[7] != "" { // header, 6 items, "" after the last newline
		t.Fatalf("plan of 6 images: %d lines:\n%s", len(lines), good)
	}
	join := func(ls ...string) string { return strings.Join(ls, "") }
	for _, c := range []struct {
		name, data, want string
	}{
		{"truncated", join(lines[:5]...), ":5: truncated: 4 item lines, the header says 6"},
		{"cut-mid-line", join(lines[:4]...) + lines[4][:20], ":5: "},
		{"not-json", join(lines[:3]...) + "{\"seq\":2,\n" + join(lines[4:]...), ":4: "},
		{"wrong-seq", join(lines[:3]...) + strings.Replace(lines[3], `"seq":2`, `"seq":7`, 1) + join(lines[4:]...), ":4: want input 2"},
		{"other-path", join(lines[:3]...) + strings.Replace(lines[3], "/cat/", "/dog/", 1) + join(lines[4:]...), ": the item lines do not match the header's items_sha256"},
		{"extra-line", string(good) + lines[6], ":8: more item lines"},
		{"unknown-field", join(lines[:2]...) + strings.Replace(lines[2], `{"seq"`, `{"x":1,"seq"`, 1) + join(lines[3:]...), ":3: "},
		{"other-version", strings.Replace(string(good), `"packer":"`, `"packer":"9.`, 1), ":1: made by packer 9."},
		{"other-content", regexp.MustCompile(`"content_sha256":"[0-9a-f]{64}"`).ReplaceAllString(string(good), `"content_sha256":"`+strings.Repeat("0", 64)+`"`), ": the item lines do not match the header's content_sha256"},
		{"no-content", regexp.MustCompile(`"content_sha256":"[0-9a-f]{64}",`).ReplaceAllString(string(good), ``), ":1: content_sha256"},
		{"format-1", strings.Replace(string(good), `{"packer_plan":3`, `{"packer_plan":1`, 1), ":1: plan format 1"},
		{"bad-header", `{"packer_plan":1,"packer":` + "\n", ":1: "},
		{"header-only-empty", `{"packer_plan":1}` + "\n", ":1: "},
	} {
		bad := filepath.Join(root, c.name+".plan")
		if err := os.WriteFile(bad, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(root, "out-"+c.name)
		_, stderr, code := run(t, "build", bad, "-o", out, "--part", "0/2")
		if code == 0 || !strings.Contains(stderr, bad+c.want) || strings.Contains(stderr, "panic") {
			t.Errorf("%s: exit %d, want a refusal with %q:\n%s", c.name, code, bad+c.want, stderr)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the refused build wrote %s", c.name, out)
		}
	}
	// Source flags must agree with the plan's.
	_, stderr, code := run(t, "build", plan, "-o", filepath.Join(root, "x"), "--exif-orient")
	if code != 2 || !strings.Contains(stderr, "--exif-orient") || !strings.Contains(stderr, plan) {
		t.Errorf("--exif-orient against a plan made without it: exit %d, want 2:\n%s", code, stderr)
	}
	_, stderr, code = run(t, "build", plan, "-o", filepath.Join(root, "x"), "--from", "frames")
	if code != 2 || !strings.Contains(stderr, "--from") {
		t.Errorf("--from frames against a folder plan: exit %d, want 2:\n%s", code, stderr)
	}
	mustRun(t, "build", plan, "-o", filepath.Join(root, "agree"), "--from", "folder", "--exif-orient=false")
	writePNGFolder(t, filepath.Join(root, "src2"), 2)
	plan2 := filepath.Join(root, "two.plan")
	mustRun(t, "plan", filepath.Join(root, "src2"), "-o", plan2)
	if err := os.Rename(filepath.Join(root, "src2", "dog"), filepath.Join(root, "src2", "emu")); err != nil {
		t.Fatal(err)
	}
	// Replay opens with the plan's classes: the build decodes the planned paths, and the
	// renamed class's images are missing inputs, skipped with their reason.
	m := filepath.Join(root, "renamed")
	mustRun(t, "build", plan2, "-o", m)
	man, err := shard.ReadManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Skipped) != 2 || strings.Join(man.Classes, ",") != "cat,dog" {
		t.Errorf("build of a plan whose class folder was renamed: skipped %v, classes %v; want the 2 dog images skipped and classes cat,dog", man.Skipped, man.Classes)
	}
}

// TestPlanOutRefuses: packer plan never replaces a file that is not a plan, replaces a plan
// only with --force, and never writes inside the source.
func TestPlanOutRefuses(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 2)
	user := filepath.Join(root, "labels.csv")
	if err := os.WriteFile(user, []byte("path,label\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, out string
		force     bool
		want      string
	}{
		{"a user's file", user, false, "not a packer plan"},
		{"a user's file, --force", user, true, "not a packer plan"},
		{"inside the source", filepath.Join(src, "x.plan"), false, "inside the source"},
	} {
		args := []string{"plan", src, "-o", c.out}
		if c.force {
			args = append(args, "--force")
		}
		_, errs, code := run(t, args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d saying %q", c.name, code, errs, exitUsage, c.want)
		}
	}
	if data, _ := os.ReadFile(user); string(data) != "path,label\n" {
		t.Fatalf("the user's file was changed: %q", data)
	}
	if exists(filepath.Join(src, "x.plan")) {
		t.Fatal("a plan was written inside the source")
	}
	plan := filepath.Join(root, "p.plan")
	mustRun(t, "plan", src, "-o", plan)
	if _, errs, code := run(t, "plan", src, "-o", plan); code != exitUsage || !strings.Contains(errs, "--force") {
		t.Errorf("plan over a plan without --force: exit %d, stderr %q", code, errs)
	}
	mustRun(t, "plan", src, "-o", plan, "--force")
}

// TestPlanPartInputChanged: a part built from a plan refuses to build when one of its own
// inputs is there with another size or modification time than the plan recorded (here: other
// bytes of the same size, a later modification time), naming the input and the plan; a part
// whose inputs are unchanged still builds, and a file changed in another part's slice is that
// part's to refuse.
func TestPlanPartInputChanged(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 3) // cat/000..002, dog/000..002: part 1/2 is dog/
	plan := filepath.Join(root, "src.plan")
	mustRun(t, "plan", src, "-o", plan)
	p0 := filepath.Join(root, "p0")
	mustRun(t, "build", plan, "-o", p0, "--part", "0/2")
	changed := filepath.Join(src, "dog", "001.png")
	data, err := os.ReadFile(changed)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(changed, data, 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(changed, later, later); err != nil {
		t.Fatal(err)
	}
	// Part 0's inputs are unchanged: it builds again.
	mustRun(t, "build", plan, "-o", p0, "--part", "0/2", "--force")
	p1 := filepath.Join(root, "p1")
	_, stderr, code := run(t, "build", plan, "-o", p1, "--part", "1/2")
	if code == 0 || !strings.Contains(stderr, "dog/001.png") || !strings.Contains(stderr, plan) || !strings.Contains(stderr, "changed since the plan") {
		t.Errorf("part of a plan one of whose inputs changed: exit %d, want a refusal naming the input and the plan:\n%s", code, stderr)
	}
	if _, err := os.Stat(p1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused part wrote %s", p1)
	}
}
