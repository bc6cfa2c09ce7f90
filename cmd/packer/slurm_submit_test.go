package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// slurmRecorder is a folder with a fake sbatch and a fake packer on PATH, each appending its
// arguments (and sbatch the PACKER_* variables it is given) to a log, for running the Slurm
// scripts without Slurm: what they would submit and run, not a cluster.
type slurmRecorder struct {
	dir, log string
	env      []string
}

func newSlurmRecorder(t *testing.T) *slurmRecorder {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	r := &slurmRecorder{dir: dir, log: filepath.Join(dir, "log")}
	bin := filepath.Join(dir, "bin")
	scripts := map[string]string{
		// sbatch prints a job id, as --parsable does, after logging its words and environment.
		"sbatch": `#!/usr/bin/env bash
echo "sbatch $*" >>"$LOG"
env | grep '^PACKER_' | sort | sed 's/^/env /' >>"$LOG"
echo 4$RANDOM
`,
		// packer plan writes its -o file, as the real one does.
		"packer": `#!/usr/bin/env bash
echo "packer $*" >>"$LOG"
if [ "$1" = plan ]; then
  while [ $# -gt 0 ]; do [ "$1" = -o ] && { echo plan >"$2"; break; }; shift; done
fi
`,
	}
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PACKER_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "SBATCH_OPTS=") {
			env = append(env, kv)
		}
	}
	r.env = append(env, "PATH="+bin+":"+os.Getenv("PATH"), "LOG="+r.log, "PACKER="+filepath.Join(bin, "packer"))
	return r
}

// run runs scripts/slurm/SCRIPT with args and the extra environment in the recorder's folder
// (its working directory), and returns the exit status, its standard error and the log's lines
// written meanwhile.
func (r *slurmRecorder) run(t *testing.T, env []string, script string, args ...string) (int, string, []string) {
	t.Helper()
	if err := os.Remove(r.log); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join("../../scripts/slurm", script))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{abs}, args...)...)
	cmd.Dir = r.dir
	cmd.Env = append(append([]string(nil), r.env...), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(r.log)
	return code, stderr.String(), strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

// lineWith is the first of lines that starts with prefix, or "".
func lineWith(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestSlurmSubmitS3Out: submit.sh with an s3:// OUT keeps OUT and the parts in the bucket
// (s3://.../OUT.parts/part-I), never a local path made of the URL; the plan and the jobs'
// logs go into PACKER_PLAN_DIR, a local folder, which it refuses to go without (exit 2, naming
// it, nothing submitted). merge.sbatch names the parts in the bucket one by one (there is no
// glob of a URL), and a local OUT is submitted as before.
func TestSlurmSubmitS3Out(t *testing.T) {
	r := newSlurmRecorder(t)
	src := filepath.Join(r.dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	noLocalURL := func() {
		t.Helper()
		if _, err := os.Stat(filepath.Join(r.dir, "s3:")); err == nil {
			t.Errorf("submit.sh made a local folder s3: out of the URL")
		}
	}

	code, errs, log := r.run(t, nil, "submit.sh", src, "s3://bucket/in224", "3", "--crop", "16")
	if code != 2 || !strings.Contains(errs, "PACKER_PLAN_DIR") || lineWith(log, "sbatch") != "" || lineWith(log, "packer") != "" {
		t.Errorf("s3:// OUT without PACKER_PLAN_DIR: exit %d, %q, ran %q; want exit 2 naming PACKER_PLAN_DIR, nothing run", code, errs, log)
	}
	noLocalURL()

	plans := filepath.Join(r.dir, "plans")
	code, errs, log = r.run(t, []string{"PACKER_PLAN_DIR=plans"}, "submit.sh", src, "s3://bucket/in224", "3", "--crop", "16", "--workers", "2")
	if code != 0 {
		t.Fatalf("s3:// OUT with PACKER_PLAN_DIR: exit %d, %s", code, errs)
	}
	plan := filepath.Join(plans, "plan")
	if want := "packer plan " + src + " -o " + plan + " --cut-inputs auto --crop 16"; lineWith(log, "packer plan") != want {
		t.Errorf("the plan: %q, want %q", lineWith(log, "packer plan"), want)
	}
	for _, want := range []string{"env PACKER_OUT=s3://bucket/in224", "env PACKER_PARTS_DIR=s3://bucket/in224.parts",
		"env PACKER_SRC=" + plan, "env PACKER_PARTS=3", "sbatch --parsable --chdir=" + plans + " --array=0-2 "} {
		if lineWith(log, want) == "" {
			t.Errorf("submit.sh with an s3:// OUT: no %q in\n%s", want, strings.Join(log, "\n"))
		}
	}
	noLocalURL()

	// The jobs, as Slurm would run them with that environment.
	env := []string{"PACKER_SRC=" + plan, "PACKER_PARTS_DIR=s3://bucket/in224.parts", "PACKER_OUT=s3://bucket/in224", "PACKER_PARTS=3", "PACKER_ARGS=--crop 16"}
	code, errs, log = r.run(t, append(env, "SLURM_ARRAY_TASK_ID=1"), "build-parts.sbatch")
	if want := "packer build " + plan + " -o s3://bucket/in224.parts/part-1 --part auto --parts 3 --force --resume --cut-inputs auto --crop 16"; code != 0 || lineWith(log, "packer") != want {
		t.Errorf("build-parts.sbatch task 1: exit %d, %q, ran %q; want %q", code, errs, log, want)
	}
	code, errs, log = r.run(t, env, "merge.sbatch")
	if want := "packer merge -o s3://bucket/in224 s3://bucket/in224.parts/part-0 s3://bucket/in224.parts/part-1 s3://bucket/in224.parts/part-2"; code != 0 || lineWith(log, "packer") != want {
		t.Errorf("merge.sbatch of parts in a bucket: exit %d, %q, ran %q; want %q", code, errs, log, want)
	}
	code, errs, _ = r.run(t, env[:3], "merge.sbatch")
	if code == 0 || !strings.Contains(errs, "PACKER_PARTS") {
		t.Errorf("merge.sbatch of parts in a bucket without PACKER_PARTS: exit %d, %q; want a refusal naming it", code, errs)
	}

	// A local OUT: the plan and the logs in OUT.parts, as before.
	out := filepath.Join(r.dir, "local", "in224")
	code, errs, log = r.run(t, nil, "submit.sh", src, "local/in224", "2")
	if code != 0 {
		t.Fatalf("local OUT: exit %d, %s", code, errs)
	}
	for _, want := range []string{"packer plan " + src + " -o " + out + ".parts/plan ", "env PACKER_OUT=" + out, "env PACKER_PARTS_DIR=" + out + ".parts",
		"sbatch --parsable --chdir=" + out + ".parts --array=0-1 "} {
		if lineWith(log, want) == "" {
			t.Errorf("submit.sh with a local OUT: no %q in\n%s", want, strings.Join(log, "\n"))
		}
	}
}
