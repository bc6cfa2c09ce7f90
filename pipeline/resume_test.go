package pipeline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestJournalSealed: a journal written by a checkpoint loads back; one bit changed anywhere in
// it, its checksum member removed, a journal that is a link, or a file larger than a journal can
// be is refused with ErrResume and an error naming the file, before any of it is trusted.
func TestJournalSealed(t *testing.T) {
	dir := t.TempDir()
	b := &builder{info: SourceInfo{Classes: []string{"a", "b"}}, opts: Options{Inputs: []string{"src"}}}
	opts, err := b.journalOptions()
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{Packer: Version, Options: opts, Started: time.Now().UnixNano(), Inputs: 3, Packed: 3, Records: 3, Bytes: 30, Counts: []int64{2, 1},
		Output: []byte(`{"files":[]}`)}
	l := newListingHash()
	l.add("a/0.png", 0, nil)
	if err := j.write(dir, &l); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, JournalName)
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`,"journal_sha256":"[0-9a-f]{64}"}$`).Match(good) {
		t.Fatalf("the journal does not end with its checksum:\n%s", good)
	}
	got, err := b.loadJournal(dir)
	if err != nil || got.Records != 3 || got.Listing != l.sum() {
		t.Fatalf("the journal as written: %+v, %v", got, err)
	}
	refused := func(what string, data []byte) {
		t.Helper()
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := b.loadJournal(dir)
		if !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: %v; want a refusal to resume naming %s", what, err, p)
		}
	}
	for i := range good {
		for _, bit := range []byte{0x01, 0x20} {
			data := append([]byte{}, good...)
			data[i] ^= bit
			refused(fmt.Sprintf("byte %d, bit %#x flipped", i, bit), data)
		}
	}
	refused("checksum removed", regexp.MustCompile(`,"journal_sha256":"[0-9a-f]*"`).ReplaceAll(good, nil))
	refused("empty", nil)
	if err := os.WriteFile(p, good, 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(n int64) { maxJournalSize = n }(maxJournalSize)
	maxJournalSize = int64(len(good)) - 1
	if _, err := b.loadJournal(dir); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "more than a journal can hold") {
		t.Fatalf("a journal over the bound: %v", err)
	}
	maxJournalSize = int64(len(good))
	cp := filepath.Join(t.TempDir(), "copy.json")
	if err := os.Rename(p, cp); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cp, p); err != nil {
		t.Fatal(err)
	}
	if _, err := b.loadJournal(dir); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a journal that is a link: %v", err)
	}
}

// TestResumeSourceFileModified: a source given as a file (a list, a plan, an archive) that was
// modified after the interrupted build started refuses the resume, naming it; untouched, the
// checkpoint loads.
func TestResumeSourceFileModified(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(t.TempDir(), "train.txt")
	if err := os.WriteFile(list, []byte("a/0.png 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &builder{info: SourceInfo{Classes: []string{"a"}}, opts: Options{Inputs: []string{list}}}
	opts, err := b.journalOptions()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Hour)
	j := &journal{Packer: Version, Options: opts, Started: started.UnixNano(), Counts: []int64{0}, Output: []byte(`{"files":[]}`)}
	l := newListingHash()
	if err := j.write(dir, &l); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(list, started.Add(-time.Minute), started.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.loadJournal(dir); err != nil {
		t.Fatalf("the untouched source: %v", err)
	}
	if err := os.WriteFile(list, []byte("a/1.png 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.loadJournal(dir); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), list+" was modified at") {
		t.Fatalf("a list rewritten after the build started: %v; want a refusal naming it", err)
	}
}
