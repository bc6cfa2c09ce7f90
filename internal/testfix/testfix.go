// Package testfix is for tests only: where the test fixtures and the clients that write them
// are found, and FileWriter, which writes one shard file durably for a test's fixture (shard
// itself exports only the streaming Writer).
package testfix

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Root is the repository's root folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Corpus returns the path of a file of transforms/testdata/corpus, the shared image corpus.
func Corpus(name string) string {
	return filepath.Join(Root(), "transforms", "testdata", "corpus", name)
}

// FixturePython is the interpreter of the fixtures venv scripts/setup.sh makes (pyarrow,
// webdataset, tfrecord: the clients that write the record-format sources' fixtures), or
// $PACKER_FIXTURE_PYTHON.
func FixturePython() string {
	if p := os.Getenv("PACKER_FIXTURE_PYTHON"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "packer", "fixtures-venv-1", "bin", "python")
}

// NeedFixturePython returns FixturePython after checking that it imports module. A missing
// module fails the test with what to do; PACKER_NO_FIXTURE_PYTHON=1 skips it, saying so.
func NeedFixturePython(t testing.TB, module string) string {
	t.Helper()
	if os.Getenv("PACKER_NO_FIXTURE_PYTHON") == "1" {
		t.Skipf("PACKER_NO_FIXTURE_PYTHON=1: tests needing the Python module %s skipped", module)
	}
	p := FixturePython()
	if out, err := exec.Command(p, "-c", "import "+module).CombinedOutput(); err != nil {
		t.Fatalf("this test needs the Python module %s: %s: %v\n%s\nrun scripts/setup.sh, or set PACKER_FIXTURE_PYTHON, or PACKER_NO_FIXTURE_PYTHON=1 to skip", module, p, err, out)
	}
	return p
}
