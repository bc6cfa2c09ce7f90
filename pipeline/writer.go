package pipeline

// The writer side of a build: one goroutine takes records in source order, writes them to the
// Output, accounts for every input and writes the manifest.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
)

// write is the single writer: it takes items in source order and hands their records and done
// markers to a recordWriter, which writes, accounts and finishes the output.
func (b *builder) write(ctx context.Context, ordered <-chan chan []result) (*Summary, error) {
	w, err := newRecordWriter(b)
	if err != nil {
		return nil, err
	}
	if b.resume != nil {
		// A resumed build reopens its output at once: the output checks what the checkpoint
		// kept before anything is decoded again.
		if err := w.open(); err != nil {
			return nil, err
		}
	}
	defer w.abort()
	for res := range ordered {
		for {
			var batch []result
			var ok bool
			select {
			case batch, ok = <-res:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if !ok {
				break
			}
			if err := w.take(batch); err != nil {
				return nil, err
			}
			b.putResults(batch)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// ordered is closed once Enumerate has returned, so the count is final. When it failed, its
	// error (which cancels ctx) is the build's, not the count.
	if !b.enumDone.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return w.finish(b.enumerated.Load())
}

// A recordWriter is the writer side of one build, on the writer goroutine only: it creates the
// Output (at the first record, at the end of a build with none, or at once when resuming: open),
// writes each record in order (record), accounts for each input when its done marker comes
// (inputDone: packed, or skipped), records a checkpoint when the output asks for one
// (checkpoint), and finishes the output and writes the manifest (finish). A resumed build's
// writer starts from the checkpoint's state and drops the records the checkpoint holds already.
// Call order: open? (take | record | inputDone | skip)* finish?, then abort, which removes the
// output unless finish closed it.
type recordWriter struct {
	b       *builder
	out     output.Output // nil until open
	sum     *Summary      // Records, Bytes and Reasons as they grow
	counts  []int64       // records per class
	dropped []int64       // boxes dropped per field (the manifest's boxes_dropped); nil without fields
	skipped []shard.Skipped
	items   int64 // inputs done (packed or skipped)
	packed  int64 // inputs that yielded records and were not skipped
	inItem  int64 // records of the current input written (or kept from the checkpoint)
	drop    int64 // records of the first input a resumed build must not write again
	curName string
	list    listingHash // digest of the inputs done, for the journal
	closed  bool        // Close was called: abort leaves the output alone
	marks   []mark      // where the build stood at its last checkpoints (the journal's marks)
}

// newRecordWriter returns the writer of b's build: empty, or a resumed build's at its
// checkpoint (b.resume).
func newRecordWriter(b *builder) (*recordWriter, error) {
	w := &recordWriter{b: b, sum: &Summary{Reasons: map[string]int{}}, counts: make([]int64, len(b.info.Classes)), list: newListingHash()}
	if len(b.fields) > 0 {
		w.dropped = make([]int64, len(b.fields))
	}
	j := b.resume
	if j == nil {
		return w, nil
	}
	for name, n := range j.BoxesDropped {
		k := slices.IndexFunc(b.fields, func(f shard.Field) bool { return f.Name == name })
		if k < 0 || n < 0 {
			return nil, fmt.Errorf("%w: the journal counts boxes dropped in %s, not a boxes field of this build (build without --resume to start over)", ErrResume, name)
		}
		w.dropped[k] = n
	}
	w.items, w.packed, w.skipped, w.sum.Reasons = j.Inputs, j.Packed, j.Skipped, j.Reasons
	w.counts = append(w.counts[:0], j.Counts...)
	w.sum.Records, w.sum.Bytes, w.drop = j.Records, j.Bytes, j.Drop
	var err error
	if w.list, err = j.restoreListing(); err != nil {
		return nil, err
	}
	w.sum.Resumed = &ResumeInfo{Inputs: j.Inputs, Records: j.Records}
	w.marks = j.Marks
	return w, nil
}

// open creates the build's Output, or for a resumed build reopens it from the checkpoint's
// state, and registers the checkpoint with an output that can resume.
func (w *recordWriter) open() error {
	b := w.b
	var out output.Output
	if b.resume != nil {
		if b.opts.Output.Resume == nil {
			return fmt.Errorf("%w: --format %s cannot resume", ErrResume, b.opts.Output.Name)
		}
		if err := removeEngineFiles(b.staging); err != nil {
			return err
		}
		var err error
		if out, err = b.opts.Output.Resume(b.outputConfig(b.spec), b.resume.Output); err != nil {
			return fmt.Errorf("%w: %w", ErrResume, err)
		}
	} else {
		var err error
		if out, err = b.newOutput(b.spec); err != nil {
			return err
		}
	}
	w.out = out
	if cp, ok := out.(output.Checkpointer); ok && b.opts.Output.Resume != nil {
		cp.SetCheckpoint(b.opts.CheckpointEvery, w.checkpoint)
	}
	return nil
}

// abort removes what the output wrote, unless finish closed it.
func (w *recordWriter) abort() {
	if w.out != nil && !w.closed {
		w.out.Abort()
	}
}

// take handles one batch of results in order: records and done markers.
func (w *recordWriter) take(batch []result) error {
	for i := range batch {
		r := &batch[i]
		var err error
		if r.done {
			err = w.inputDone(r)
		} else {
			err = w.record(r)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// record writes one record (or, in a resumed build, drops one the checkpoint holds) and returns
// its buffer to the pool.
func (w *recordWriter) record(r *result) error {
	b, spec := w.b, w.b.spec
	if !fits(spec, r.spec) {
		// The spec was decided from the source and options; a record that does not fit it is
		// a bug, never a reason to drop an image.
		b.pool.Put(r.buf)
		return fmt.Errorf("internal error: %s: record shape %v %s %s does not fit the dataset's %v %s %s",
			r.name, r.spec.Shape, r.spec.DType, r.spec.Layout, spec.Shape, spec.DType, spec.Layout)
	}
	if w.drop > 0 {
		// A resumed build: this record is in the checkpoint already.
		b.pool.Put(r.buf)
		if r.name != b.resume.Next {
			return fmt.Errorf("%w: the input after the checkpoint is now %s, was %s (the source changed); build without --resume to start over",
				ErrResume, r.name, b.resume.Next)
		}
		w.drop--
		w.inItem++
		return nil
	}
	r.rec.Shape = nil
	if !spec.Fixed() {
		r.rec.Shape = r.spec.Shape
	}
	if w.out == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	w.curName = r.name
	r.rec.Input = w.items
	if b.part != nil {
		r.rec.Input += b.part.lo
	}
	if err := w.out.Write(r.rec); err != nil {
		return fmt.Errorf("write %s output: %w", b.opts.Output.Name, err)
	}
	w.inItem++
	for k, n := range r.dropped {
		w.dropped[k] += n
	}
	if r.rec.Label >= 0 && r.rec.Label < int64(len(w.counts)) {
		w.counts[r.rec.Label]++
	}
	w.sum.Records++
	w.sum.Bytes += int64(len(r.rec.Data))
	for _, f := range r.rec.Fields {
		w.sum.Bytes += int64(len(f))
	}
	b.pool.Put(r.buf)
	return nil
}

// inputDone accounts for an input whose records have all come (its done marker r): it is packed,
// or skipped with its error (an input that yielded no record and no error is skipped too).
func (w *recordWriter) inputDone(r *result) error {
	b := w.b
	if w.drop > 0 {
		return fmt.Errorf("%w: %s now yields fewer records than the %d the checkpoint holds (the source changed); build without --resume to start over",
			ErrResume, r.name, b.resume.Drop)
	}
	w.list.add(r.name, r.label, r.aux, r.extra)
	w.inItem = 0
	err := r.err
	if err == nil && r.count == 0 {
		err = noRecords() // listed, never dropped without a word
	}
	if err == nil {
		w.packed++
	} else {
		if r.count > 0 {
			if ie, ok := err.(*source.InputError); ok && ie.Input == r.name {
				err = ie.Err
			}
			verb := "were"
			if r.count == 1 {
				verb = "was"
			}
			err = fmt.Errorf("%w (after %s %s packed)", err, humanize.Count(r.count, "record"), verb)
		}
		if err := w.skip(r.name, err); err != nil {
			return err
		}
	}
	w.items++
	if b.opts.Progress != nil {
		b.opts.Progress(w.items, b.info.Count, w.sum.Records, w.sum.Bytes)
	}
	return nil
}

// skip lists the input name in the skipped inputs with its error, or returns the error that
// stops the build: a system error (a full disk is no bad input), any error with --on-error
// fail, or one skip more than --max-errors allows.
func (w *recordWriter) skip(name string, err error) error {
	opts := &w.b.opts
	if isSystemError(err) {
		return fmt.Errorf("%s: %w: %w", name, err, ErrSystem)
	}
	if opts.OnError == OnErrorFail {
		return &source.InputError{Input: name, Err: err}
	}
	reason := err
	if ie, ok := err.(*source.InputError); ok && ie.Input == name {
		reason = ie.Err // the entry names the input already
	}
	w.skipped = append(w.skipped, shard.Skipped{Input: name, Reason: reason.Error()})
	w.sum.Reasons[reasonKind(err)]++
	if opts.MaxErrors > 0 && len(w.skipped) > opts.MaxErrors {
		return fmt.Errorf("%w: %d inputs skipped, more than --max-errors %d; last: %s: %v",
			ErrTooManyErrors, len(w.skipped), opts.MaxErrors, name, err)
	}
	return nil
}

// checkpoint records the resume journal with the output's state. The output calls it from Write
// before it writes a record, so the state here is the state before that record.
func (w *recordWriter) checkpoint(state []byte) error {
	b := w.b
	j := &journal{Packer: Version, Started: b.started.UnixNano(), Inputs: w.items, Drop: w.inItem, Packed: w.packed, Records: w.sum.Records, Bytes: w.sum.Bytes,
		Counts: w.counts, Skipped: nonNil(w.skipped), Reasons: w.sum.Reasons, BoxesDropped: w.boxesDropped(), Output: state}
	if w.inItem > 0 {
		j.Next = w.curName
	}
	var err error
	if j.Options, err = b.journalOptions(); err != nil {
		return err
	}
	m, err := j.mark(&w.list)
	if err != nil {
		return err
	}
	w.marks = addMark(w.marks, m)
	j.Marks = w.marks
	if err := j.write(b.staging, &w.list); err != nil {
		return err
	}
	if b.opts.SaveCheckpoint == nil {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(b.staging, JournalName))
	if err != nil {
		return err
	}
	return b.opts.SaveCheckpoint(data)
}

// finish checks that every one of the enumerated inputs was packed or skipped, closes the
// output, removes the journal and writes the manifest.
func (w *recordWriter) finish(enumerated int64) (*Summary, error) {
	b := w.b
	if err := checkInputs(enumerated, w.items, w.packed, int64(len(w.skipped))); err != nil {
		return nil, err
	}
	if w.drop > 0 {
		return nil, fmt.Errorf("%w: the source now ends before %s, whose first %d records the checkpoint holds (the source changed); build without --resume to start over",
			ErrResume, b.resume.Next, b.resume.Drop)
	}
	if w.out == nil {
		if err := w.open(); err != nil {
			return nil, err
		}
	}
	files, err := w.out.Close()
	w.closed = true
	if err != nil {
		return nil, fmt.Errorf("finish %s output: %w", b.opts.Output.Name, err)
	}
	// The journal goes before the manifest is written: a dataset never holds it. (Killed in
	// between, the build starts over: the staging folder holds neither.)
	if err := removeJournal(b.staging); err != nil {
		return nil, err
	}
	m := w.manifest(files)
	if err := WriteManifest(b.staging, m); err != nil {
		return nil, err
	}
	sum := w.sum
	for _, f := range files {
		sum.FileBytes += f.Size
	}
	sum.Items = w.items
	sum.Skipped = int64(len(w.skipped))
	sum.Manifest = m
	return sum, nil
}

// manifest is the dataset's manifest, once the output closed with these files.
func (w *recordWriter) manifest(files []shard.FileEntry) *shard.Manifest {
	b := w.b
	format, formatVersion := w.out.Format()
	m := &shard.Manifest{
		Packer:        Version,
		Format:        format,
		FormatVersion: formatVersion,
		Count:         w.sum.Records,
		Classes:       nonNil(b.info.Classes),
		ClassCounts:   w.counts,
		Sample:        b.spec,
		Label:         shard.LabelSpec{DType: "int64", Aux: nonNil(b.info.AuxNames)},
		Source:        b.info.Spec,
		Transform:     b.transformMap(),
		Files:         files,
		Skipped:       nonNil(w.skipped),
		Inputs:        w.items,
		Fields:        b.fields,
		BoxesDropped:  w.boxesDropped(),
		CutInputs:     b.opts.CutInputs,
	}
	if b.part != nil {
		m.Part = b.part.info(b.opts.MaxErrors)
		m.Part.ChecksumBlock = b.opts.ChecksumBlock
	}
	return m
}

// boxesDropped is the manifest's boxes_dropped: the boxes dropped so far by field name, the
// fields that dropped none left out; nil when none was dropped.
func (w *recordWriter) boxesDropped() map[string]int64 {
	var m map[string]int64
	for k, n := range w.dropped {
		if n > 0 {
			if m == nil {
				m = map[string]int64{}
			}
			m[w.b.fields[k].Name] = n
		}
	}
	return m
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// reasonKind groups skip reasons for the summary: the innermost error's type or first words.
func reasonKind(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			break
		}
		err = u
	}
	return ShortReason(err.Error())
}

func (b *builder) transformMap() map[string]any {
	data, _ := json.Marshal(b.tspec.Spec())
	m := map[string]any{}
	_ = json.Unmarshal(data, &m)
	return m
}

// datasetMeta is stored in each output file: what the dataset is and how it was made.
func (b *builder) datasetMeta() map[string]any {
	return map[string]any{
		"packer":    Version,
		"source":    b.info.Spec,
		"transform": b.transformMap(),
		"classes":   nonNil(b.info.Classes),
	}
}

// outputConfig is the configuration of the build's Output.
func (b *builder) outputConfig(spec shard.SampleSpec) output.Config {
	return output.Config{
		Dir: b.staging, Sample: spec,
		Label:     shard.LabelSpec{DType: "int64", Aux: nonNil(b.info.AuxNames)},
		Classes:   b.info.Classes,
		HasMeta:   b.info.HasMeta,
		ShardSize: b.opts.ShardSize,
		Meta:      b.datasetMeta(),

		ChecksumBlock: b.opts.ChecksumBlock,
		Fields:        b.fields,
		CutInputs:     b.opts.CutInputs,
		Store:         b.opts.Store,
	}
}

// newOutput creates the build's Output, when the first record is ready (or at the end of a
// build with no record).
func (b *builder) newOutput(spec shard.SampleSpec) (output.Output, error) {
	out, err := b.opts.Output.New(b.outputConfig(spec))
	if err != nil {
		return nil, fmt.Errorf("create %s output: %w", b.opts.Output.Name, err)
	}
	return out, nil
}
