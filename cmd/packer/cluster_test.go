package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestScriptsKnowThePlanFlags: scripts/slurm/submit.sh and scripts/k8s/render.sh pick the flags
// they give packer plan out of the build flags by two lists of names (the flags plan takes, and
// those of them that take no value); they are packer plan's flags, so that a flag added to plan
// reaches the plan, and a boolean is not taken to swallow the next word.
func TestScriptsKnowThePlanFlags(t *testing.T) {
	for _, script := range []string{"../../scripts/slurm/submit.sh", "../../scripts/k8s/render.sh"} {
		checkPlanFlagLists(t, script)
	}
}

func checkPlanFlagLists(t *testing.T, script string) {
	data, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	list := func(name string) []string {
		m := regexp.MustCompile(`(?s)\n\s*` + name + `="([^"]*)"`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s has no %s list", script, name)
		}
		f := strings.Fields(string(m[1]))
		slices.Sort(f)
		return f
	}
	var flags, bools []string
	newPlanCommand(&iostreams{}, nil).Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "out" || f.Name == "force" || f.Name == "help" {
			return
		}
		flags = append(flags, f.Name)
		if f.Value.Type() == "bool" {
			bools = append(bools, f.Name)
		}
	})
	slices.Sort(flags)
	slices.Sort(bools)
	if got := list("plan_flags"); !slices.Equal(got, flags) {
		t.Errorf("%s: plan_flags are %v; packer plan takes %v", script, got, flags)
	}
	if got := list("plan_bools"); !slices.Equal(got, bools) {
		t.Errorf("%s: plan_bools are %v; packer plan's boolean flags are %v", script, got, bools)
	}
}

// TestClusterSlurmPrintsTheRepositoryFiles: `packer cluster slurm FILE` prints each script of
// scripts/slurm byte for byte, `-o DIR` writes all of them, executable, and refuses to replace
// them without --force; every script of the folder is among them. (scripts/test-slurm.sh runs
// the written copies on a Slurm cluster.)
func TestClusterSlurmPrintsTheRepositoryFiles(t *testing.T) {
	entries, err := os.ReadDir("../../scripts/slurm")
	if err != nil {
		t.Fatal(err)
	}
	var onDisk, embedded []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") {
			onDisk = append(onDisk, e.Name())
		}
	}
	for _, f := range slurmFiles {
		embedded = append(embedded, f.name)
	}
	slices.Sort(embedded)
	if !slices.Equal(onDisk, embedded) {
		t.Fatalf("scripts/slurm holds %v, packer cluster slurm knows %v", onDisk, embedded)
	}
	dir := filepath.Join(t.TempDir(), "slurm")
	if out, errs, code := run(t, "cluster", "slurm", "-o", dir); code != 0 || !strings.Contains(out, "submit.sh") {
		t.Fatalf("cluster slurm -o: exit %d, %q %q", code, out, errs)
	}
	for _, name := range onDisk {
		want, err := os.ReadFile(filepath.Join("../../scripts/slurm", name))
		if err != nil {
			t.Fatal(err)
		}
		if out := mustRun(t, "cluster", "slurm", name); out != string(want) {
			t.Errorf("packer cluster slurm %s printed %d bytes that differ from scripts/slurm/%s", name, len(out), name)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != string(want) {
			t.Errorf("-o wrote %s: %v, differs from the repository's: %v", name, err, string(got) != string(want))
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v (%v), want 0755", name, fi.Mode().Perm(), err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "merge.sbatch"), []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := run(t, "cluster", "slurm", "-o", dir); code != exitUsage || !strings.Contains(errs, "submit.sh exists (use --force") {
		t.Errorf("-o over existing scripts: exit %d, %q; want a refusal naming the file", code, errs)
	}
	mustRun(t, "cluster", "slurm", "-o", dir, "--force")
	if fi, err := os.Stat(filepath.Join(dir, "merge.sbatch")); err != nil || fi.Mode().Perm() != 0o755 || fi.Size() < 100 {
		t.Errorf("--force did not replace merge.sbatch with the script, mode 0755: %v %v", fi, err)
	}
	for _, args := range [][]string{{"cluster", "slurm"}, {"cluster", "slurm", "nope.sh"}, {"cluster", "slurm", "submit.sh", "-o", dir}} {
		if _, errs, code := run(t, args...); code != exitUsage || !strings.Contains(errs, "submit.sh") && !strings.Contains(errs, "not both") {
			t.Errorf("packer %s: exit %d, %q; want a usage error naming the scripts", strings.Join(args, " "), code, errs)
		}
	}
}

// TestClusterK8sRenders: every placeholder of the templates is filled, the part count is
// written into both completions and PACKER_PARTS, the merge names every part, and what
// render.sh refuses is refused. (scripts/test-k8s.sh compares the output with render.sh's for
// the same values, byte for byte, and runs those manifests.)
func TestClusterK8sRenders(t *testing.T) {
	base := []string{"cluster", "k8s", "--name", "ds", "--image", "reg.example/packer@sha256:00", "--parts", "3"}
	parts := mustRun(t, append(base, "parts", "--src-claim", "source", "--build-args", "--resize 20  --crop 16")...)
	for _, want := range []string{"completions: 3\n", "parallelism: 3\n", "value: \"3\"\n", "name: ds-parts\n",
		`args: [build, /out/ds.plan, -o, /out/ds.parts/part-$(JOB_COMPLETION_INDEX), --part, auto, --force, --resume, --cut-inputs, auto, "--resize", "20", "--crop", "16"]`,
		"claimName: source, readOnly: true", "claimName: packer-out}", "backoffLimitPerIndex: 2\n"} {
		if !strings.Contains(parts, want) {
			t.Errorf("parts manifest lacks %q:\n%s", want, parts)
		}
	}
	// The plan Job takes, of the build args, the flags packer plan takes, each with its value.
	plan := mustRun(t, "cluster", "k8s", "plan", "--name", "ds", "--image", "reg.example/packer@sha256:00", "--src", "/data/train", "--src-claim", "source",
		"--build-args", "--workers 2 --from folder --fast --resize=20 --format shards --crop 16 --exif-orient --shuffle --seed 7 --force")
	for _, want := range []string{"name: ds-plan\n", "claimName: source, readOnly: true",
		`args: [plan, "/data/train", -o, /out/ds.plan, --cut-inputs, auto, "--from", "folder", "--fast", "--resize=20", "--crop", "16", "--exif-orient", "--shuffle", "--seed", "7"]`} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan manifest lacks %q:\n%s", want, plan)
		}
	}
	// --no-plan (render.sh's PACKER_PLAN=0): the parts read the source, each pod listing it, and
	// there is no plan Job.
	noPlan := mustRun(t, append(base, "parts", "--no-plan", "--src", "/data/train", "--src-claim", "source", "--build-args", "--resize 20 --crop 16")...)
	if want := `args: [build, "/data/train", -o, /out/ds.parts/part-$(JOB_COMPLETION_INDEX), --part, auto, --force, --resume, --cut-inputs, auto, "--resize", "20", "--crop", "16"]`; !strings.Contains(noPlan, want) || strings.Contains(noPlan, "build, /out/ds.plan") {
		t.Errorf("parts manifest with --no-plan lacks %q:\n%s", want, noPlan)
	}
	if strings.Replace(noPlan, `"/data/train"`, "/out/ds.plan", 2) != parts {
		t.Errorf("parts manifest with --no-plan differs from the planned one other than in its source:\n%s", noPlan)
	}
	merge := mustRun(t, append(base, "merge", "--merge-memory", "2Gi")...)
	if !strings.Contains(merge, "/out/ds.parts/part-0, /out/ds.parts/part-1, /out/ds.parts/part-2]") || !strings.Contains(merge, "2Gi") {
		t.Errorf("merge manifest does not name the 3 parts or the memory:\n%s", merge)
	}
	pvc := mustRun(t, "cluster", "k8s", "pvc", "--name", "ds", "--storage-class", "nfs", "--out-size", "5Gi")
	for _, m := range []string{plan, parts, merge, pvc} {
		if strings.Contains(m, "@") && k8sPlaceholder.MatchString(m) {
			t.Errorf("a placeholder is left:\n%s", m)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"parts", "--src", "/data/x", "--src-claim", "s", "--parts", "0"}, "--parts 0: want a positive number"},
		{[]string{"plan", "--src", "/elsewhere", "--src-claim", "s"}, "--src /elsewhere: want a path under /data"},
		{[]string{"plan", "--src-claim", "s"}, "set --src"},
		{[]string{"parts", "--no-plan", "--src-claim", "s"}, "set --src"},
		{[]string{"parts", "--no-plan", "--src", "/elsewhere", "--src-claim", "s"}, "--src /elsewhere: want a path under /data"},
		{[]string{"plan", "--no-plan", "--src", "/data/x", "--src-claim", "s"}, "--no-plan: there is no plan Job"},
		{[]string{"parts", "--src", "/data/x"}, "set --src-claim"},
		{[]string{"parts", "--src", "/data/x", "--src-claim", "s", "--build-args", `--classes "a b"`}, "quotes, backslashes"},
		{[]string{"merge", "--cpu", "1&2"}, "--cpu 1&2"},
		{[]string{"job"}, "want pvc, plan, parts or merge"},
	} {
		_, errs, code := run(t, append(base, c.args...)...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("cluster k8s %v: exit %d, %q; want exit 2 and %q", c.args, code, errs, c.want)
		}
	}
	if _, errs, code := run(t, "cluster", "k8s", "pvc", "--name", "ds"); code != exitUsage || !strings.Contains(errs, "set --storage-class") {
		t.Errorf("pvc without a class: exit %d, %q", code, errs)
	}
	// The templates embedded are the folder's, all of them.
	entries, err := os.ReadDir("../../scripts/k8s")
	if err != nil {
		t.Fatal(err)
	}
	var yamls []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") {
			yamls = append(yamls, e.Name())
		}
	}
	var known []string
	for _, tmpl := range k8sTemplates {
		known = append(known, tmpl)
	}
	slices.Sort(known)
	if !slices.Equal(yamls, known) {
		t.Errorf("scripts/k8s holds the templates %v, packer cluster k8s knows %v", yamls, known)
	}
}

// TestMistypedSubcommandWithFlags: a mistyped command of a command group followed by flags
// answers with the unknown command and the suggestion, as for the root's commands.
func TestMistypedSubcommandWithFlags(t *testing.T) {
	for _, args := range [][]string{{"cluster", "slurmm", "-o", "x"}, {"cluster", "slurmm"}, {"cluster", "sulrm", "--force"}} {
		_, errs, code := run(t, args...)
		if code != exitUsage || !strings.Contains(errs, `unknown command "`+args[1]+`" for "packer cluster"`) || !strings.Contains(errs, "did you mean slurm?") {
			t.Errorf("packer %s: exit %d, %q; want the unknown command and the suggestion", strings.Join(args, " "), code, errs)
		}
	}
}
