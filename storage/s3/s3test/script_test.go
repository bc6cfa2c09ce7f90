package s3test

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serverScript is scripts/s3-server.sh, run from the test's package folder.
var serverScript = filepath.Join("..", "..", "..", "scripts", "s3-server.sh")

// script runs scripts/s3-server.sh with args in the environment env (os.Environ() plus the
// lines given) and returns its standard output.
func script(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("bash", append([]string{serverScript}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("s3-server.sh %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// exports are the NAME=VALUE pairs of the "export NAME=VALUE" lines start printed.
func exports(out string) []string {
	var env []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "export "); ok {
			env = append(env, v)
		}
	}
	return env
}

func lookup(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// answers reports whether a server answers at endpoint (want true) or has stopped answering
// (want false) within 30 s: it returns as soon as it sees what it wants (the stop script sends
// SIGTERM and does not wait for the server to exit; the deadline is a guard for a loaded
// machine, not a timing).
func answers(endpoint string, want bool) bool {
	c := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := c.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
		}
		if (err == nil) == want || time.Now().After(deadline) {
			return err == nil
		}
	}
}

// TestServerScriptInstances: two servers started by scripts/s3-server.sh side by side (two
// jobs of one user, sharing the cache folder) keep their own state: each makes its buckets in
// its own folder, and stopping one leaves the other serving.
func TestServerScriptInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts two servers")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("s3-server.sh needs curl")
	}
	bin := strings.TrimSpace(script(t, nil, "path"))
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no S3 test server at %s (install it with: bash scripts/s3-server.sh install)", bin)
	}
	tmp := t.TempDir()
	base := []string{"TMPDIR=" + tmp, "PACKER_S3_SERVER="}
	var envs [][]string
	t.Cleanup(func() {
		for _, env := range envs {
			script(t, env, "stop")
		}
	})
	for i, name := range []string{"a", "b"} {
		root := filepath.Join(tmp, "root-"+name)
		env := append(base[:len(base):len(base)], exports(script(t, base, "start", root))...)
		envs = append(envs, env)
		script(t, env, "bucket", "bucket-"+name)
		if _, err := os.Stat(filepath.Join(root, "bucket-"+name)); err != nil {
			t.Errorf("server %d: bucket %s not made in its folder: %v", i, "bucket-"+name, err)
		}
		if !answers(lookup(env, "AWS_ENDPOINT_URL"), true) {
			t.Fatalf("server %d at %s does not answer", i, lookup(env, "AWS_ENDPOINT_URL"))
		}
	}
	a, b := lookup(envs[0], "AWS_ENDPOINT_URL"), lookup(envs[1], "AWS_ENDPOINT_URL")
	if a == b {
		t.Fatalf("both servers at %s", a)
	}
	script(t, envs[1], "stop")
	if answers(b, false) {
		t.Errorf("the second server at %s still answers after its stop", b)
	}
	if !answers(a, true) {
		t.Fatalf("the first server at %s stopped with the second", a)
	}
	script(t, envs[0], "stop")
	if answers(a, false) {
		t.Errorf("the first server at %s still answers after its stop", a)
	}
}
