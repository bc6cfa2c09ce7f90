//go:build unix

package storage

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTryLock: a second lock on the same file, through another open file, is refused while the
// first is held.
func TestTryLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	f1, err := OpenLockFile(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f1.Close()
	f2, err := OpenLockFile(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if ok, err := TryLock(f1); !ok || err != nil {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	if ok, err := TryLock(f2); ok || err != nil {
		t.Fatalf("second lock: %v %v, want refused", ok, err)
	}
	if err := os.Symlink(p, p+".link"); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenLockFile(p + ".link"); err == nil {
		f.Close()
		t.Fatal("OpenLockFile followed a symbolic link")
	}
}
