package fileutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A failed check leaves the final name untouched (the old file stays), the temporary file in
// place for the caller, and the file closed.
func TestCommitFileCheckFails(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "a.bin")
	if err := os.WriteFile(final, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(final + ".tmp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("new"); err != nil {
		t.Fatal(err)
	}
	bad := errors.New("bad bytes")
	if err := commitFile(f, final, func(*os.File) error { return bad }); !errors.Is(err, bad) {
		t.Fatalf("commitFile = %v, want the check's error", err)
	}
	if got, _ := os.ReadFile(final); string(got) != "old" {
		t.Errorf("final holds %q after a failed check, want the old bytes", got)
	}
	if _, err := os.Stat(final + ".tmp"); err != nil {
		t.Errorf("temporary file: %v", err)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after commitFile = %v, want os.ErrClosed", err)
	}
}

// The check sees the synced, still open file; then it is renamed over the old one.
func TestCommitFileReplaces(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "a.bin")
	if err := os.WriteFile(final, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(final + ".tmp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("new bytes"); err != nil {
		t.Fatal(err)
	}
	var seen int64
	if err := commitFile(f, final, func(f *os.File) error {
		st, err := f.Stat()
		seen = st.Size()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if seen != 9 {
		t.Errorf("check saw %d bytes, want 9", seen)
	}
	if got, _ := os.ReadFile(final); string(got) != "new bytes" {
		t.Errorf("final holds %q", got)
	}
	if _, err := os.Stat(final + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left behind: %v", err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "manifest.json")
	for _, s := range []string{"first", "second"} {
		if err := WriteFileAtomic(path, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != s {
			t.Errorf("%s holds %q, want %q", path, got, s)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d entries in the directory, want only %s", len(ents), path)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Error("WriteFileAtomic into a missing directory succeeded")
	}
}

// A directory that cannot be synced is an error naming it (one writer used to skip the sync
// silently when the directory could not be opened).
func TestSyncDirError(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "gone")
	err := SyncDir(missing)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("SyncDir(%s) = %v, want an error naming it", missing, err)
	}
}

// OpenDirect falls back to a plain open where the file system refuses O_DIRECT and returns
// every other error.
func TestOpenDirect(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, _, err := OpenDirect(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := ClearDirect(f); err != nil {
		t.Errorf("ClearDirect: %v", err)
	}
	if _, err := f.Write([]byte("abc")); err != nil {
		t.Errorf("unaligned write after ClearDirect: %v", err)
	}
	f.Close()
	if _, _, err := OpenDirect(filepath.Join(path, "nope"), os.O_RDONLY, 0); err == nil || DirectUnsupported(err) {
		t.Errorf("OpenDirect of a missing file = %v, want a plain error", err)
	}
}

// TestCreateCommitAbort: Create writes under name.tmp (replacing a stale one), Commit gives
// the file its final name, Abort removes the temporary file and nothing else, and a second
// Commit fails.
func TestCreateCommitAbort(t *testing.T) {
	for _, direct := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a.tmp"), []byte("stale, longer than the new data"), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := Create(dir, "a", direct)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name() != filepath.Join(dir, "a.tmp") {
			t.Fatalf("temporary name %s", p.Name())
		}
		if direct {
			// O_DIRECT needs aligned writes: write through a plain descriptor instead, as a
			// caller does after ClearDirect.
			if err := ClearDirect(p.File()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.File().Write([]byte("new")); err != nil {
			t.Fatal(err)
		}
		if err := p.Commit(func(f *os.File) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(got) != "new" {
			t.Fatalf("committed file = %q, %v", got, err)
		}
		if _, err := os.Stat(p.Name()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temporary file left after Commit: %v", err)
		}
		if err := p.Commit(nil); err == nil {
			t.Error("second Commit succeeded")
		}
		p.Abort() // after Commit: nothing to do, the final file stays
		if _, err := os.Stat(filepath.Join(dir, "a")); err != nil {
			t.Errorf("Abort after Commit removed the final file: %v", err)
		}

		q, err := Create(dir, "b", direct)
		if err != nil {
			t.Fatal(err)
		}
		q.Abort()
		q.Abort()
		for _, name := range []string{"b", "b.tmp"} {
			if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s exists after Abort: %v", name, err)
			}
		}
	}
	if _, err := Create(filepath.Join(t.TempDir(), "missing"), "x", false); err == nil {
		t.Error("Create in a missing directory succeeded")
	}
}
