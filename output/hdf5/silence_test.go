package hdf5

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestErrorsNotPrinted opens a file that is not HDF5 from many goroutines, each on its own OS
// thread: libhdf5 is built thread-safe on Debian, with a per-thread error stack whose automatic
// printing the binding's init turns off for one thread only. Nothing may reach stderr.
func TestErrorsNotPrinted(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.h5")
	if err := os.WriteFile(bad, []byte(strings.Repeat("not hdf5 ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	capture, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer capture.Close()
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup2(int(capture.Fd()), 2); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // exits with the goroutine, so each runs on a fresh thread
			_, errs[i] = OpenFile(bad)
		}()
	}
	wg.Wait()
	if err := syscall.Dup2(saved, 2); err != nil {
		t.Fatal(err)
	}
	syscall.Close(saved)
	for _, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "bad.h5") {
			t.Fatalf("OpenFile of a non-HDF5 file: %v", err)
		}
	}
	t.Log(errs[0])
	out, err := os.ReadFile(capture.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 0 {
		t.Fatalf("libhdf5 printed to stderr:\n%s", out)
	}
}
