package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
)

// TestCutInputsAuto: --cut-inputs auto resolves K = max(1, ⌊shard size / record size⌋) for a
// fixed record shape, before anything is decoded; parts built with auto merge by link into the
// bytes of the one-machine build with auto; a variable-size output is refused (exit 2), naming
// the reason.
func TestCutInputsAuto(t *testing.T) {
	root := t.TempDir()
	src := cutCorpus(t, root)
	base := []string{"--classes", "x,y,z", "--workers", "2", "--cut-inputs", "auto"}
	for _, c := range []struct {
		name string
		args []string
		k    int64
	}{
		{"uint8", []string{"--resize", "8", "--crop", "6", "--shard-size", "250"}, 2},                  // 108-byte records
		{"float16", []string{"--crop", "6", "--dtype", "float16", "--shard-size", "1000"}, 4},          // 216-byte records
		{"larger-than-shard", []string{"--crop", "6", "--dtype", "float32", "--shard-size", "250"}, 1}, // 432 > 250
	} {
		out := filepath.Join(root, c.name)
		_, errs, code := run(t, append(append([]string{"build", src, "-o", out}, base...), c.args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		m, err := shard.ReadManifest(out)
		if err != nil {
			t.Fatal(err)
		}
		if m.CutInputs != c.k || !strings.Contains(errs, fmt.Sprintf("K = %d ", c.k)) {
			t.Errorf("%s: cut_inputs %d, want %d; stderr %q", c.name, m.CutInputs, c.k, errs)
		}
	}

	// Parts with auto merge by link, byte-identical to the one-machine build with auto.
	args := append(cloneArgs(base), "--resize", "8", "--crop", "6", "--shard-size", "250")
	full := filepath.Join(root, "uint8")
	var parts []string
	for i := 0; i < 3; i++ {
		p := filepath.Join(root, fmt.Sprintf("p%d", i))
		mustRun(t, append([]string{"build", src, "-o", p, "--part", fmt.Sprintf("%d/3", i)}, args...)...)
		parts = append(parts, p)
	}
	merged := filepath.Join(root, "merged")
	mustRun(t, append([]string{"merge", "-o", merged}, parts...)...)
	sameTree(t, full, merged)
	mustBeLinked(t, parts[0], merged)

	// Variable-size outputs: refused before anything is written, naming the reason.
	for _, c := range []struct {
		name, why string
		args      []string
	}{
		{"varsize", "shape", []string{"--resize", "8"}},
		{"fields", "fields", []string{"--crop", "6", "--fields", "txt"}},
	} {
		out := filepath.Join(root, "refused-"+c.name)
		_, errs, code := run(t, append(append([]string{"build", src, "-o", out}, base...), c.args...)...)
		if code != 2 || !strings.Contains(errs, "--cut-inputs auto") || !strings.Contains(errs, c.why) || !strings.Contains(errs, "--cut-inputs K") {
			t.Errorf("%s: exit %d, want 2 naming %q: %s", c.name, code, c.why, errs)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: the refused build left %s: %v", c.name, out, err)
		}
	}
	_, errs, code := run(t, "build", src, "-o", filepath.Join(root, "npy"), "--format", "npy", "--cut-inputs", "auto", "--crop", "6", "--classes", "x,y,z")
	if code != 2 || !strings.Contains(errs, "--cut-inputs") {
		t.Errorf("--format npy --cut-inputs auto: exit %d: %s", code, errs)
	}
}

// TestPlanRecordsCutInputs: a plan made with --cut-inputs auto (and the transform flags it is
// resolved with) records the resolved K; its parts take it without the flag, or with auto or
// the same K, and merge by link into the one-machine build's bytes; a part given another K is
// refused (exit 2), naming both; the transform flags without auto are refused.
func TestPlanRecordsCutInputs(t *testing.T) {
	root := t.TempDir()
	src := cutCorpus(t, root)
	plan := filepath.Join(root, "wds.plan")
	out := mustRun(t, "plan", src, "-o", plan, "--classes", "x,y,z", "--cut-inputs", "auto", "--crop", "6", "--shard-size", "250")
	h, err := pipeline.ReadPlanHeader(plan)
	if err != nil {
		t.Fatal(err)
	}
	if h.Options["cut-inputs"] != "2" || !strings.Contains(out, "--cut-inputs 2") {
		t.Fatalf("the plan records cut-inputs %q, want 2; output %q", h.Options["cut-inputs"], out)
	}
	args := []string{"--resize", "8", "--crop", "6", "--shard-size", "250", "--workers", "2"}
	full := filepath.Join(root, "full")
	mustRun(t, append([]string{"build", src, "-o", full, "--classes", "x,y,z", "--cut-inputs", "2"}, args...)...)
	var parts []string
	for i, cut := range [][]string{nil, {"--cut-inputs", "auto"}, {"--cut-inputs", "2"}} {
		p := filepath.Join(root, fmt.Sprintf("p%d", i))
		mustRun(t, append(append([]string{"build", plan, "-o", p, "--part", fmt.Sprintf("%d/3", i)}, args...), cut...)...)
		m, err := shard.ReadManifest(p)
		if err != nil {
			t.Fatal(err)
		}
		if m.Part == nil || m.Part.CutInputs != 2 {
			t.Errorf("part %d from the plan: %+v, want cut_inputs 2", i, m.Part)
		}
		parts = append(parts, p)
	}
	merged := filepath.Join(root, "merged")
	mustRun(t, append([]string{"merge", "-o", merged}, parts...)...)
	sameTree(t, full, merged)

	// A part for npy does not take the plan's K (npy is not cut; its merge writes one file).
	npy := filepath.Join(root, "npy-part")
	mustRun(t, append([]string{"build", plan, "-o", npy, "--part", "0/3", "--format", "npy"}, args...)...)
	if m, err := shard.ReadManifest(npy); err != nil || m.Part == nil || m.Part.CutInputs != 0 {
		t.Errorf("an npy part of the plan: %v, want no cut_inputs", err)
	}
	// Another K, or an explicit 0 (no cut), disagrees with the plan's K: refused, naming both.
	for _, k := range []string{"3", "0"} {
		other := filepath.Join(root, "other"+k)
		_, errs, code := run(t, append([]string{"build", plan, "-o", other, "--part", "0/3", "--cut-inputs", k}, args...)...)
		if code != 2 || !strings.Contains(errs, "--cut-inputs "+k+" disagrees") || !strings.Contains(errs, "--cut-inputs 2") {
			t.Errorf("a part of the plan with --cut-inputs %s: exit %d, want 2 naming both: %s", k, code, errs)
		}
		if _, err := os.Stat(other); err == nil {
			t.Errorf("the refused part with --cut-inputs %s left %s", k, other)
		}
	}
	_, errs, code := run(t, "plan", src, "-o", filepath.Join(root, "crop.plan"), "--classes", "x,y,z", "--crop", "6")
	if code != 2 || !strings.Contains(errs, "--crop is for --cut-inputs auto") {
		t.Errorf("plan --crop without --cut-inputs auto: exit %d: %s", code, errs)
	}
	_, errs, code = run(t, "plan", src, "-o", filepath.Join(root, "var.plan"), "--classes", "x,y,z", "--cut-inputs", "auto", "--resize", "8")
	if code != 2 || !strings.Contains(errs, "--cut-inputs auto") {
		t.Errorf("plan --cut-inputs auto of a variable shape: exit %d: %s", code, errs)
	}
}

// cloneArgs returns a copy of s, so that appends to it leave s alone.
func cloneArgs(s []string) []string { return append([]string(nil), s...) }
