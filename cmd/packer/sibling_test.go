package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// writeSiblingFolder writes an ImageFolder tree (two classes, n tiny PNGs each) under root
// whose pixels depend on seed: trees of different seeds have the same names, sizes and labels.
func writeSiblingFolder(t *testing.T, root string, n int, seed byte) {
	t.Helper()
	for _, cls := range []string{"cat", "dog"} {
		dir := filepath.Join(root, cls)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			writeTinyPNG(t, filepath.Join(dir, fmt.Sprintf("%03d.png", i)), seed+byte(i*37+len(cls)))
		}
	}
}

// TestSiblingShardRealBuild: packer builds two folders with the same names and options (other
// pixels), and a shard of the second is copied into the first, as an rsync of a rebuild would.
// The Go reader and the Python reader refuse that shard before serving a record of it, and
// both verifiers name why (index_sha256), not only the whole file's SHA-256.
func TestSiblingShardRealBuild(t *testing.T) {
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a", "train"), filepath.Join(tmp, "b", "train")
	writeSiblingFolder(t, a, 12, 1)
	writeSiblingFolder(t, b, 12, 2)
	outA, outB := filepath.Join(tmp, "outA"), filepath.Join(tmp, "outB")
	mustRun(t, "build", a, "-o", outA, "--shard-size", "200B")
	mustRun(t, "build", b, "-o", outB, "--shard-size", "200B")
	m, err := shard.ReadManifest(outA)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) < 3 {
		t.Fatalf("%d shards, want several", len(m.Files))
	}
	for _, fe := range m.Files {
		if len(fe.IndexSHA256) != 64 {
			t.Fatalf("%s: index_sha256 %q in the manifest packer wrote", fe.Path, fe.IndexSHA256)
		}
	}
	name := "shard-00001.pks"
	data, err := os.ReadFile(filepath.Join(outB, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outA, name), data, 0o644); err != nil {
		t.Fatal(err)
	}

	// The Go reader.
	d, err := shard.OpenDataset(outA)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var readErr error
	for i := range d.Len() {
		if _, readErr = d.Record(i); readErr != nil {
			break
		}
	}
	if readErr == nil || !strings.Contains(readErr.Error(), name) || !strings.Contains(readErr.Error(), "index_sha256") {
		t.Errorf("Go reader: %v, want an error naming %s and index_sha256", readErr, name)
	}

	// packer verify.
	out, _, code := run(t, "verify", outA)
	if code != 3 || !strings.Contains(out, name) || !strings.Contains(out, "index_sha256") {
		t.Errorf("packer verify: exit %d, output:\n%s\nwant exit 3 naming %s and index_sha256", code, out, name)
	}

	// The Python reader and verifier.
	py := verifierPython(t)
	script := `
import sys
import packer_reader
try:
    packer_reader.open(sys.argv[1], verify_crc=False)
except packer_reader.FormatError as e:
    print("refused:", e)
else:
    print("opened")
`
	cmd := exec.Command(py, "-c", script, outA)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDir(t))
	got, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(got), "refused:") || !strings.Contains(string(got), name) || !strings.Contains(string(got), "index_sha256") {
		t.Errorf("Python reader: %v\n%s\nwant a FormatError naming %s and index_sha256", err, got, name)
	}
	rep := pyVerifyMany(t, py, []string{outA})[0]
	found := false
	for _, f := range rep.Faults {
		found = found || strings.HasSuffix(f.File, name) && strings.Contains(f.Message, "index_sha256")
	}
	if rep.OK || !found {
		t.Errorf("Python verify: %+v, want a fault for %s naming index_sha256", rep, name)
	}
}
