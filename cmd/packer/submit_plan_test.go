package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubmitReusesOnlyItsSourcesPlan: scripts/slurm/submit.sh reuses an existing OUT.parts/plan
// (a retry must build from the plan the other parts were built from), but only for the source
// that plan lists: the same command with another SRC was built from the old plan, and merged
// into OUT as the old source's dataset, with one line on stderr. Now it is refused before
// anything is submitted, naming both; the same SRC (a trailing slash aside) still reuses it.
func TestSubmitReusesOnlyItsSourcesPlan(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs("../../scripts/slurm/submit.sh")
	if err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	bin := filepath.Join(d, "bin")
	calls := filepath.Join(d, "sbatch.calls")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := "#!/bin/sh\necho \"$@\" >>" + calls + "\necho 7\n"
	if err := os.WriteFile(filepath.Join(bin, "sbatch"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	v1, v2 := filepath.Join(d, `v1 & <old> "q" \b`), filepath.Join(d, "v2")
	for _, p := range []string{v1, v2, filepath.Join(d, "out.parts")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The header line of a plan of v1, as json.Marshal writes it (<, > and & escaped).
	src := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "&", `\u0026`, "<", `\u003c`, ">", `\u003e`).Replace(v1)
	header := `{"packer_plan":3,"packer":"x","kind":"folder","source":"` + src + `","options":{},"count":1}` + "\n"
	if err := os.WriteFile(filepath.Join(d, "out.parts", "plan"), []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
	submit := func(src string) (string, int) {
		t.Helper()
		os.Remove(calls)
		cmd := exec.Command("bash", script, src, filepath.Join(d, "out"), "2")
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "PACKER=/bin/false")
		out, _ := cmd.CombinedOutput()
		n := 0
		if data, err := os.ReadFile(calls); err == nil {
			n = strings.Count(string(data), "\n")
		}
		return string(out), n
	}
	out, n := submit(v2)
	if n != 0 || !strings.Contains(out, v1) || !strings.Contains(out, v2) {
		t.Errorf("submit.sh of %s over the plan of %s: %d jobs submitted, %q; want none, and both named", v2, v1, n, out)
	}
	if out, n := submit(v1 + "/"); n != 2 || !strings.Contains(out, "reusing the plan") {
		t.Errorf("submit.sh of the plan's own source: %d jobs submitted, %q; want the plan reused, 2 jobs", n, out)
	}
}
