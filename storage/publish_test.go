package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func writeTag(t *testing.T, dir, tag string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(tag), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tagOf(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return ""
	}
	return string(b)
}

func missing(p string) bool {
	_, err := os.Lstat(p)
	return errors.Is(err, os.ErrNotExist)
}

func newStage(t *testing.T) *LocalStage {
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	return &LocalStage{Dir: out + ".partial", Out: out, Old: out + ".old"}
}

// TestLocalStagePublish publishes a new dataset, then replaces it, with the atomic exchange
// and with the two renames a file system without it takes: each time OUT holds the new
// dataset whole and nothing is left beside it.
func TestLocalStagePublish(t *testing.T) {
	for _, noExchange := range []bool{false, true} {
		s := newStage(t)
		if noExchange {
			saved := exchangeDirs
			exchangeDirs = func(a, b string) error { return errNoExchange }
			t.Cleanup(func() { exchangeDirs = saved })
		}
		writeTag(t, s.Dir, "first")
		if err := s.Publish(context.Background()); err != nil || !s.Swapped() {
			t.Fatalf("first publish: %v, swapped %v", err, s.Swapped())
		}
		if err := s.Discard(); err != nil || tagOf(s.Out) != "first" {
			t.Fatalf("Discard after Publish: %v, OUT holds %q", err, tagOf(s.Out))
		}
		s2 := &LocalStage{Dir: s.Dir, Out: s.Out, Old: s.Old}
		if err := writeThrough(s2.Backend(), "manifest.json", "second"); err != nil {
			t.Fatal(err)
		}
		if err := s2.Publish(context.Background()); err != nil || !s2.Swapped() {
			t.Fatalf("replacing publish (no exchange %v): %v", noExchange, err)
		}
		if tagOf(s.Out) != "second" || !missing(s.Dir) || !missing(s.Old) {
			t.Fatalf("no exchange %v: OUT holds %q; staging missing %v, old missing %v", noExchange, tagOf(s.Out), missing(s.Dir), missing(s.Old))
		}
	}
}

// writeThrough writes one file through a backend.
func writeThrough(b Backend, name, data string) error {
	w, err := b.Create(context.Background(), name)
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(data)); err != nil {
		w.Abort()
		return err
	}
	return w.Commit(context.Background())
}

// TestLocalStagePutBack: on the two-rename path, a second rename that fails puts the old OUT
// back at once, and the stage is not swapped (Discard removes what is left of it).
func TestLocalStagePutBack(t *testing.T) {
	saved := exchangeDirs
	exchangeDirs = func(a, b string) error { return errNoExchange }
	t.Cleanup(func() { exchangeDirs = saved })
	s := newStage(t)
	writeTag(t, s.Out, "old")
	// The staging directory is missing, so renaming it to OUT fails.
	if err := s.Publish(context.Background()); err == nil || s.Swapped() {
		t.Fatalf("publish of a missing stage: %v, swapped %v", err, s.Swapped())
	}
	if tagOf(s.Out) != "old" || !missing(s.Old) {
		t.Fatalf("the old OUT was not put back: OUT holds %q, old missing %v", tagOf(s.Out), missing(s.Old))
	}
}

// TestLocalStageDiscard: a stage that was never published is removed by Discard; a cancelled
// context stops Publish before it renames anything.
func TestLocalStageDiscard(t *testing.T) {
	s := newStage(t)
	writeTag(t, s.Dir, "new")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Publish(ctx); !errors.Is(err, context.Canceled) || s.Swapped() || !missing(s.Out) {
		t.Fatalf("cancelled publish: %v", err)
	}
	if err := s.Discard(); err != nil || !missing(s.Dir) {
		t.Fatalf("Discard: %v, staging missing %v", err, missing(s.Dir))
	}
}

// TestRenameNoReplace refuses to replace an existing name.
func TestRenameNoReplace(t *testing.T) {
	d := t.TempDir()
	a, b := filepath.Join(d, "a"), filepath.Join(d, "b")
	writeTag(t, a, "a")
	writeTag(t, b, "b")
	if err := RenameNoReplace(a, b); !errors.Is(err, os.ErrExist) || tagOf(b) != "b" {
		t.Fatalf("RenameNoReplace onto an existing name: %v, b holds %q", err, tagOf(b))
	}
	if err := os.RemoveAll(b); err != nil {
		t.Fatal(err)
	}
	if err := RenameNoReplace(a, b); err != nil || tagOf(b) != "a" || !missing(a) {
		t.Fatalf("RenameNoReplace: %v", err)
	}
}
