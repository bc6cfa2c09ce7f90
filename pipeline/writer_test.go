package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// testBuilder is the builder of a build of genSource's 4x3 grey frames (classes a, b, c) with
// the identity transform into the shards output, set up as Build sets it up, with its own
// staging folder: what a recordWriter needs, without the enumerator and the workers.
func testBuilder(t *testing.T, mod func(*Options)) *builder {
	t.Helper()
	opts := Options{Output: shards.Entry, OnError: OnErrorSkip, ShardSize: 64, Inputs: []string{"src"}}
	if mod != nil {
		mod(&opts)
	}
	tspec := transforms.Spec{}.MustCompile()
	src := &genSource{n: 0}
	return &builder{opts: opts, info: src.Info(), tspec: tspec, spec: DatasetSpec(src, tspec), staging: t.TempDir(), started: time.Now()}
}

// feed is a sequence of results as the workers send them: for each input, its records and its
// done marker.
type feed []result

// input appends the n records of the input name (label label) and its done marker with err.
func (f feed) input(name string, label int64, n int, err error) feed {
	for i := 0; i < n; i++ {
		f = append(f, testRecord(name, label, byte(len(f))))
	}
	return append(f, result{name: name, done: true, err: err, count: n, label: label})
}

// testRecord is one 4x3 grey record of the input name, its bytes all fill.
func testRecord(name string, label int64, fill byte) result {
	buf := bytes.Repeat([]byte{fill}, 12)
	return result{name: name, rec: output.Record{Data: buf, Label: label},
		spec: shard.SampleSpec{Shape: []int{3, 4, 1}, DType: shard.Uint8, Layout: "hwc"}, buf: &buf}
}

// take hands the results to w one at a time, as batches of one.
func take(t *testing.T, w *recordWriter, rs []result) {
	t.Helper()
	for _, r := range rs {
		if err := w.take([]result{r}); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
	}
}

// TestRecordWriterAccounting: every input that comes back is packed or skipped exactly once,
// and finish refuses to write a manifest when packed + skipped is not the enumerated count.
func TestRecordWriterAccounting(t *testing.T) {
	var progress []int64
	b := testBuilder(t, func(o *Options) {
		o.Progress = func(items, total, records, bytes int64) { progress = append(progress, items, records) }
	})
	w, err := newRecordWriter(b)
	if err != nil {
		t.Fatal(err)
	}
	defer w.abort()
	rs := feed{}.
		input("a", 0, 1, nil).
		input("b", 1, 0, &source.InputError{Input: "b", Err: errors.New("corrupt input")}).
		input("c", 2, 0, nil). // no record, no error: skipped, never lost
		input("d", 0, 2, &source.InputError{Input: "d", Err: errors.New("damaged")}).
		input("e", 1, 1, nil)
	take(t, w, rs)
	if w.items != 5 || w.packed != 2 || len(w.skipped) != 3 {
		t.Fatalf("items %d, packed %d, skipped %d; want 5, 2, 3", w.items, w.packed, len(w.skipped))
	}
	if want := []int64{1, 1, 2, 1, 3, 1, 4, 3, 5, 4}; fmt.Sprint(progress) != fmt.Sprint(want) {
		t.Errorf("progress (items, records) %v, want %v", progress, want)
	}
	if w.packed+int64(len(w.skipped)) != w.items {
		t.Errorf("packed %d + skipped %d != %d inputs done", w.packed, len(w.skipped), w.items)
	}
	sum, err := w.finish(5)
	if err != nil {
		t.Fatal(err)
	}
	m := sum.Manifest
	if sum.Items != 5 || sum.Skipped != 3 || sum.Records != 4 || m.Inputs != 5 || m.Count != 4 || sum.Bytes != 48 {
		t.Errorf("summary items %d, skipped %d, records %d, bytes %d; manifest inputs %d, count %d", sum.Items, sum.Skipped, sum.Records, sum.Bytes, m.Inputs, m.Count)
	}
	if fmt.Sprint(m.ClassCounts) != "[3 1 0]" {
		t.Errorf("class counts %v, want [3 1 0]", m.ClassCounts)
	}
	want := []shard.Skipped{
		{Input: "b", Reason: "corrupt input"},
		{Input: "c", Reason: noRecords().Error()},
		{Input: "d", Reason: "damaged (after 2 records were packed)"},
	}
	if fmt.Sprint(m.Skipped) != fmt.Sprint(want) {
		t.Errorf("skipped %+v\nwant    %+v", m.Skipped, want)
	}
	if sum.Reasons["corrupt input"] != 1 || sum.Reasons["no records"] != 1 || len(sum.Reasons) != 3 {
		t.Errorf("reasons %v", sum.Reasons)
	}
	got, err := shard.ReadManifest(b.staging)
	if err != nil || got.Count != 4 || got.Inputs != 5 {
		t.Fatalf("the manifest written: %+v, %v", got, err)
	}
}

// TestRecordWriterFinishUnaccounted: finish with more inputs enumerated than came back fails
// and leaves the output open, so that abort removes it.
func TestRecordWriterFinishUnaccounted(t *testing.T) {
	b := testBuilder(t, nil)
	w, err := newRecordWriter(b)
	if err != nil {
		t.Fatal(err)
	}
	take(t, w, feed{}.input("a", 0, 2, nil))
	if _, err := w.finish(2); !errors.Is(err, ErrInputsUnaccounted) {
		t.Fatalf("2 enumerated, 1 came back: %v, want ErrInputsUnaccounted", err)
	}
	w.abort()
	if ents, _ := os.ReadDir(b.staging); len(ents) != 0 {
		t.Errorf("after abort the staging folder holds %v", ents)
	}
}

// TestRecordWriterSkip: skip lists a bad input, and stops the build for --on-error fail, for
// one skip more than --max-errors, and for a system error whatever the policy.
func TestRecordWriterSkip(t *testing.T) {
	bad := errors.New("corrupt input")
	w, err := newRecordWriter(testBuilder(t, func(o *Options) { o.MaxErrors = 2 }))
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b"} {
		if err := w.skip(name, bad); err != nil {
			t.Fatalf("skip %d of --max-errors 2: %v", i+1, err)
		}
	}
	if err := w.skip("c", bad); !errors.Is(err, ErrTooManyErrors) || !strings.Contains(err.Error(), "c: corrupt input") {
		t.Errorf("skip 3 of --max-errors 2: %v, want ErrTooManyErrors naming c", err)
	}
	if len(w.skipped) != 3 || w.sum.Reasons["corrupt input"] != 3 {
		t.Errorf("skipped %v, reasons %v", w.skipped, w.sum.Reasons)
	}

	w, err = newRecordWriter(testBuilder(t, func(o *Options) { o.OnError = OnErrorFail }))
	if err != nil {
		t.Fatal(err)
	}
	var ie *source.InputError
	if err := w.skip("a", bad); !errors.As(err, &ie) || ie.Input != "a" || len(w.skipped) != 0 {
		t.Errorf("--on-error fail: %v (skipped %v), want an InputError naming a and nothing skipped", err, w.skipped)
	}

	w, err = newRecordWriter(testBuilder(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	sys := &os.PathError{Op: "open", Path: "a.jpg", Err: syscall.EMFILE}
	if err := w.skip("a", sys); !errors.Is(err, ErrSystem) || !errors.Is(err, syscall.EMFILE) || len(w.skipped) != 0 {
		t.Errorf("a system error: %v (skipped %v), want ErrSystem and nothing skipped", err, w.skipped)
	}
}

// TestRecordWriterRecordNotFitting: a record whose shape is not the dataset's is an internal
// error naming the input, never a skip.
func TestRecordWriterRecordNotFitting(t *testing.T) {
	w, err := newRecordWriter(testBuilder(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer w.abort()
	r := testRecord("a", 0, 1)
	r.spec.Shape = []int{3, 5, 1}
	if err := w.record(&r); err == nil || !strings.Contains(err.Error(), "internal error: a: record shape [3 5 1]") {
		t.Errorf("got %v", err)
	}
	if w.sum.Records != 0 || w.out != nil {
		t.Errorf("records %d, output opened %v", w.sum.Records, w.out != nil)
	}
}

// clipFeed is a build of three inputs: a with one record, b with three (clips), c with one.
// With 24-byte shards (two records), the output checkpoints before b's second record (a and b's
// first in the first shard) and before c's record.
func clipFeed() feed {
	return feed{}.input("a", 0, 1, nil).input("b", 1, 3, nil).input("c", 2, 1, nil)
}

func shards24(o *Options) { o.ShardSize = 24 }

// TestRecordWriterCheckpoint: the output checkpoints when a shard is complete, and the journal
// records where the build stood before the record that starts the next shard: the inputs done,
// and the records of the input under way (drop, next) that the checkpoint holds.
func TestRecordWriterCheckpoint(t *testing.T) {
	b := testBuilder(t, shards24)
	w, err := newRecordWriter(b)
	if err != nil {
		t.Fatal(err)
	}
	defer w.abort()
	rs := clipFeed()
	take(t, w, rs[:4]) // a's record and done, b's first record, b's second (the second shard's first)
	j, err := b.loadJournal(b.staging)
	if err != nil || j == nil {
		t.Fatalf("no checkpoint after the first shard: %v, %v", j, err)
	}
	if j.Inputs != 1 || j.Packed != 1 || j.Drop != 1 || j.Next != "b" || j.Records != 2 || j.Bytes != 24 || fmt.Sprint(j.Counts) != "[1 1 0]" {
		t.Errorf("checkpoint inputs %d, packed %d, drop %d, next %q, records %d, bytes %d, counts %v; want 1, 1, 1, b, 2, 24, [1 1 0]",
			j.Inputs, j.Packed, j.Drop, j.Next, j.Records, j.Bytes, j.Counts)
	}
	take(t, w, rs[4:7]) // b's third record and done, c's record: a second checkpoint, at an input boundary
	if j, err = b.loadJournal(b.staging); err != nil || j.Inputs != 2 || j.Drop != 0 || j.Next != "" || j.Records != 4 {
		t.Fatalf("second checkpoint %+v, %v; want 2 inputs, nothing to drop, 4 records", j, err)
	}
	take(t, w, rs[7:])
	if _, err := w.finish(3); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.staging, JournalName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the journal is still there after finish: %v", err)
	}
}

// TestRecordWriterResume: a writer interrupted after its first checkpoint, and a resumed one
// that drops the records the checkpoint holds, write the manifest and shards of an
// uninterrupted writer; a resumed writer refuses a source that changed after the checkpoint.
func TestRecordWriterResume(t *testing.T) {
	rs := clipFeed()
	whole := testBuilder(t, shards24)
	w, err := newRecordWriter(whole)
	if err != nil {
		t.Fatal(err)
	}
	take(t, w, rs)
	want, err := w.finish(3)
	if err != nil {
		t.Fatal(err)
	}

	b := testBuilder(t, shards24)
	interrupted := func() {
		t.Helper()
		w, err := newRecordWriter(b)
		if err != nil {
			t.Fatal(err)
		}
		take(t, w, rs[:5]) // checkpointed before b's second record
		w.abort()          // the shards of the checkpoint stay
	}
	resumed := func() *recordWriter {
		t.Helper()
		j, err := b.loadJournal(b.staging)
		if err != nil || j == nil {
			t.Fatalf("load the journal: %v, %v", j, err)
		}
		b.resume = j
		w, err := newRecordWriter(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.open(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	interrupted()
	w = resumed()
	take(t, w, rs[2:]) // from b's first record, which the checkpoint holds
	got, err := w.finish(3)
	if err != nil {
		t.Fatal(err)
	}
	if got.Resumed == nil || *got.Resumed != (ResumeInfo{Inputs: 1, Records: 2}) {
		t.Errorf("resumed %+v, want 1 input and 2 records taken over", got.Resumed)
	}
	gm, err := got.Manifest.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	wm, err := want.Manifest.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gm, wm) {
		t.Errorf("resumed manifest\n%s\nuninterrupted\n%s", gm, wm)
	}
	for _, pair := range [][2]string{{b.staging, whole.staging}, {whole.staging, b.staging}} {
		if err := sameTree(pair[0], pair[1]); err != nil {
			t.Errorf("resumed and uninterrupted outputs: %v", err)
		}
	}

	for _, c := range []struct {
		what string
		rs   []result
		end  bool // finish after rs
	}{
		{"another input after the checkpoint", append(feed{testRecord("x", 1, 0)}, rs[3:]...), false},
		{"the input after the checkpoint now shorter", feed{}.input("b", 1, 0, nil), false},
		{"the source now ending at the checkpoint", nil, true},
	} {
		b = testBuilder(t, shards24)
		interrupted()
		w := resumed()
		err := w.take(c.rs)
		if c.end {
			_, err = w.finish(1)
		}
		if !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "the source changed") {
			t.Errorf("%s: %v, want a refusal to resume", c.what, err)
		}
		w.abort()
	}
}

// TestRecordWriterSkipCount: the skip reason of an input that failed after one record says so
// in the singular ("after 1 record was packed").
func TestRecordWriterSkipCount(t *testing.T) {
	b := testBuilder(t, nil)
	w, err := newRecordWriter(b)
	if err != nil {
		t.Fatal(err)
	}
	defer w.abort()
	take(t, w, feed{}.input("a", 0, 1, &source.InputError{Input: "a", Err: errors.New("damaged")}))
	if len(w.skipped) != 1 || w.skipped[0].Reason != "damaged (after 1 record was packed)" {
		t.Fatalf("skipped %+v, want a: damaged (after 1 record was packed)", w.skipped)
	}
}
