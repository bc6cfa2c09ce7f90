package hdf5

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingLibrary runs this test binary again with PACKER_LIBHDF5 naming a file that does not
// exist (libhdf5 loads once per process, so the missing case needs a process of its own): every
// HDF5 operation must fail with ErrNoLibrary and the package to install, and none may crash.
func TestMissingLibrary(t *testing.T) {
	if os.Getenv("PACKER_TEST_NO_HDF5") == "1" {
		missingLibraryChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingLibrary$", "-test.v")
	cmd.Env = append(os.Environ(), "PACKER_TEST_NO_HDF5=1", LibraryEnv+"=/nonexistent/libhdf5.so")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestMissingLibrary") {
		t.Fatalf("child did not run the test:\n%s", out)
	}
}

func missingLibraryChild(t *testing.T) {
	err := Load()
	if !errors.Is(err, ErrNoLibrary) {
		t.Fatalf("Load: %v, want ErrNoLibrary", err)
	}
	for _, want := range []string{"apt-get install libhdf5-103-1", LibraryEnv, "/nonexistent/libhdf5.so"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Load's error %q does not mention %q", err, want)
		}
	}
	t.Log(err)
	dir := t.TempDir()
	if _, err := OpenFile(filepath.Join(dir, DataFile)); !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), filepath.Join(dir, DataFile)) {
		t.Errorf("OpenFile: %v, want ErrNoLibrary naming the file", err)
	}
	if a, b, c := LibraryVersion(); a != 0 || b != 0 || c != 0 {
		t.Errorf("LibraryVersion: %d.%d.%d without a library", a, b, c)
	}
	if errs := checkFile(filepath.Join(dir, DataFile), expect{}); len(errs) != 1 || !errors.Is(errs[0], ErrNoLibrary) {
		t.Errorf("checkFile: %v, want one ErrNoLibrary fault", errs)
	}
}

// TestLoaded: the library the tests use loads, and is 1.10 or later.
func TestLoaded(t *testing.T) {
	if err := Load(); err != nil {
		t.Fatal(err)
	}
	if a, b, _ := LibraryVersion(); a != 1 || b < 10 {
		t.Fatalf("libhdf5 %d.%d", a, b)
	}
}
