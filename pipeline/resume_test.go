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

	"github.com/packer-dev/packer/source"
)

// TestJournalSealed: a journal written by a checkpoint loads back; one bit changed anywhere in
// it, its checksum member removed, a journal that is a link, or a file larger than a journal can
// be is refused with ErrResume and an error naming the file, before any of it is trusted.
func TestJournalSealed(t *testing.T) {
	dir := t.TempDir()
	b := &builder{info: source.SourceInfo{Classes: []string{"a", "b"}}, opts: Options{Inputs: []string{"src"}}}
	opts, err := b.journalOptions()
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{Packer: Version, Options: opts, Started: time.Now().UnixNano(), Inputs: 3, Packed: 3, Records: 3, Bytes: 30, Counts: []int64{2, 1},
		Output: []byte(`{"files":[]}`)}
	l := newListingHash()
	l.add("a/0.png", 0, nil, nil)
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
	b := &builder{info: source.SourceInfo{Classes: []string{"a"}}, opts: Options{Inputs: []string{list}}}
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

// TestResumeSkipModified: a resumed build's enumerator refuses an input the checkpoint covers
// whose file was modified after the interrupted build started, and the input after the
// checkpoint too when the checkpoint holds some of its records (a clip source); an input past
// the checkpoint may have changed (it is decoded again).
func TestResumeSkipModified(t *testing.T) {
	dir := t.TempDir()
	started := time.Now().Add(-time.Hour)
	items := make([]source.Item, 4)
	l := newListingHash()
	for i := range items {
		p := filepath.Join(dir, fmt.Sprintf("v%d.mp4", i))
		if err := os.WriteFile(p, []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, started.Add(-time.Minute), started.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		items[i] = source.Item{Seq: int64(i), Name: filepath.Base(p), Path: p}
		if i < 2 {
			l.add(items[i].Name, 0, nil, nil)
		}
	}
	run := func(drop int64) error {
		j := &journal{Started: started.UnixNano(), Inputs: 2, Drop: drop, Listing: l.sum()}
		if drop > 0 {
			j.Next = items[2].Name
		}
		rs := newResumeSkip(j, nil)
		for n, it := range items {
			skip, err := rs.skip(int64(n), it)
			if err != nil {
				return err
			}
			if skip != (n < 2) {
				t.Fatalf("input %d: skip %v", n, skip)
			}
		}
		return rs.done(int64(len(items)))
	}
	for _, drop := range []int64{0, 1} {
		if err := run(drop); err != nil {
			t.Fatalf("drop %d, nothing modified: %v", drop, err)
		}
	}
	touch := func(i int) {
		t.Helper()
		now := time.Now()
		if err := os.Chtimes(items[i].Path, now, now); err != nil {
			t.Fatal(err)
		}
	}
	touch(3)
	if err := run(1); err != nil {
		t.Fatalf("an input past the checkpoint modified: %v", err)
	}
	touch(2)
	if err := run(0); err != nil {
		t.Fatalf("the input after the checkpoint modified, none of its records kept: %v", err)
	}
	if err := run(1); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), items[2].Path) {
		t.Fatalf("the input after the checkpoint modified, one of its records kept: %v; want a refusal naming it", err)
	}
	touch(0)
	if err := run(0); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), items[0].Path+") was modified at") {
		t.Fatalf("an input the checkpoint covers modified: %v; want a refusal naming it", err)
	}
}

// TestResumeSkipFrameRewritten: an input read from a folder (a frames video) whose frame file
// was rewritten in place after the interrupted build started is refused, naming the frame:
// writing over an existing file (ffmpeg -y extracting the frames again) leaves the folder's own
// modification time alone, so the folder's time alone does not show it.
func TestResumeSkipFrameRewritten(t *testing.T) {
	started := time.Now().Add(-time.Hour)
	old := started.Add(-time.Minute)
	video := filepath.Join(t.TempDir(), "walk", "v1")
	if err := os.MkdirAll(video, 0o755); err != nil {
		t.Fatal(err)
	}
	frames := []string{filepath.Join(video, "0001.jpg"), filepath.Join(video, "0002.jpg")}
	for _, p := range frames {
		if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(video, old, old); err != nil {
		t.Fatal(err)
	}
	it := source.Item{Name: "walk/v1", Path: video}
	l := newListingHash()
	l.add(it.Name, 0, nil, nil)
	run := func() error {
		rs := newResumeSkip(&journal{Started: started.UnixNano(), Inputs: 1, Listing: l.sum()}, nil)
		if _, err := rs.skip(0, it); err != nil {
			return err
		}
		return rs.done(1)
	}
	if err := run(); err != nil {
		t.Fatalf("nothing modified: %v", err)
	}
	if err := os.WriteFile(frames[1], []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(video, old, old); err != nil { // as a write over an existing file leaves it
		t.Fatal(err)
	}
	if err := run(); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), frames[1]) {
		t.Fatalf("a frame rewritten in place after the build started: %v; want a refusal naming %s", err, frames[1])
	}
}

// TestResumeSkipReadSourceModified: an input whose bytes the enumerator read from a file
// inside the SRC folder (a CIFAR batch, a WebDataset shard: Item.Raw, no Item.Path) names no
// file to stat, so a batch file rewritten after the interrupted build started was resumed at
// exit 0, the checkpoint's records of its old bytes kept beside records of its new ones. Such a
// resume checks every file under SRC (hidden ones aside), naming the one that changed; a
// checkpoint that covers no input checks nothing.
func TestResumeSkipReadSourceModified(t *testing.T) {
	started := time.Now().Add(-time.Hour)
	old := started.Add(-time.Minute)
	src := t.TempDir()
	batch := filepath.Join(src, "cifar-10-batches-bin", "data_batch_1.bin")
	if err := os.MkdirAll(filepath.Dir(batch), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{batch, filepath.Join(src, ".hidden")} {
		if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	items := []source.Item{{Name: "data_batch_1.bin#0", Raw: []byte{1}}, {Name: "data_batch_1.bin#1", Raw: []byte{2}}}
	l := newListingHash()
	l.add(items[0].Name, 0, nil, nil)
	run := func(inputs int64) error {
		rs := newResumeSkip(&journal{Started: started.UnixNano(), Inputs: inputs, Listing: l.sum()}, []string{src})
		for n, it := range items {
			if _, err := rs.skip(int64(n), it); err != nil {
				return err
			}
		}
		return rs.done(int64(len(items)))
	}
	if err := run(1); err != nil {
		t.Fatalf("nothing modified: %v", err)
	}
	now := time.Now()
	if err := os.Chtimes(filepath.Join(src, ".hidden"), now, now); err != nil {
		t.Fatal(err)
	}
	if err := run(1); err != nil {
		t.Fatalf("a hidden file modified: %v", err)
	}
	if err := os.WriteFile(batch, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(1); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), batch) {
		t.Fatalf("a batch file rewritten after the build started: %v; want a refusal naming %s", err, batch)
	}
	if err := run(0); err != nil {
		t.Fatalf("a checkpoint that covers no input: %v", err)
	}
}

// TestAddMark: a journal keeps at most maxMarks marks, the last half of them the last
// checkpoints', the older ones thinned out but the first one kept, in order, and the list
// changes other than by an append at most once in 4 checkpoints.
func TestAddMark(t *testing.T) {
	var marks []mark
	thinned := 0
	for n := int64(1); n <= 1000; n++ {
		prev := marks
		marks = addMark(marks, mark{Records: n})
		if len(marks) > maxMarks {
			t.Fatalf("%d marks after %d checkpoints; want at most %d", len(marks), n, maxMarks)
		}
		if len(marks) != len(prev)+1 {
			thinned++
		}
	}
	if thinned > 1000/4 {
		t.Errorf("the marks were thinned at %d of 1000 checkpoints; want at most 1 in 4", thinned)
	}
	for i := range marks {
		if i > 0 && marks[i].Records <= marks[i-1].Records {
			t.Fatalf("marks out of order: %v", marks)
		}
		if k := len(marks) - 1 - i; k < maxMarks/2 && marks[i].Records != 1000-int64(k) {
			t.Fatalf("mark %d is of record %d; want the last %d checkpoints kept: %v", i, marks[i].Records, maxMarks/2, marks)
		}
	}
	if marks[0].Records != 1 {
		t.Errorf("the first mark is of record %d; want the first checkpoint's kept", marks[0].Records)
	}
}
