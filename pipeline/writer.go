package pipeline

// The writer side of a build: one goroutine takes records in source order, writes them to the
// Output, accounts for every input and writes the manifest.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// write is the single writer: it takes items in source order and writes their records.
func (b *builder) write(ctx context.Context, ordered <-chan chan []result) (*Summary, error) {
	sum := &Summary{Reasons: map[string]int{}}
	spec := b.spec
	var (
		out      output.Output
		counts   = make([]int64, len(b.info.Classes))
		skipped  []shard.Skipped
		items    int64
		packed   int64 // items that yielded records and were not skipped
		finished bool
		inItem   int64 // records of the current item written (or kept from the checkpoint)
		drop     int64 // records of the first item a resumed build must not write again
		list     = newListingHash()
	)
	if j := b.resume; j != nil {
		items, packed, skipped, sum.Reasons = j.Inputs, j.Packed, j.Skipped, j.Reasons
		counts = append(counts[:0], j.Counts...)
		sum.Records, sum.Bytes, drop = j.Records, j.Bytes, j.Drop
		var err error
		if list, err = j.restoreListing(); err != nil {
			return nil, err
		}
		sum.Resumed = &ResumeInfo{Inputs: j.Inputs, Records: j.Records}
	}
	// checkpoint records the journal; the output calls it from Write before it writes record r
	// (so the state here is the state before r).
	var curName string
	checkpoint := func(state []byte) error {
		j := &journal{Packer: Version, Started: b.started.UnixNano(), Inputs: items, Drop: inItem, Packed: packed, Records: sum.Records, Bytes: sum.Bytes,
			Counts: counts, Skipped: nonNil(skipped), Reasons: sum.Reasons, Output: state}
		if inItem > 0 {
			j.Next = curName
		}
		var err error
		if j.Options, err = b.journalOptions(); err != nil {
			return err
		}
		return j.write(b.staging, &list)
	}
	open := func() error {
		var err error
		if b.resume != nil {
			if b.opts.Output.Resume == nil {
				return fmt.Errorf("%w: --format %s cannot resume", ErrResume, b.opts.Output.Name)
			}
			if err := removeEngineFiles(b.staging); err != nil {
				return err
			}
			out, err = b.opts.Output.Resume(b.outputConfig(spec), b.resume.Output)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrResume, err)
			}
		} else if out, err = b.newOutput(spec); err != nil {
			return err
		}
		if cp, ok := out.(output.Checkpointer); ok && b.opts.Output.Resume != nil {
			cp.SetCheckpoint(b.opts.CheckpointEvery, checkpoint)
		}
		return nil
	}
	if b.resume != nil {
		if err := open(); err != nil {
			return nil, err
		}
	}
	defer func() {
		if out != nil && !finished {
			out.Abort()
		}
	}()
	skip := func(name string, err error) error {
		if isSystemError(err) {
			return fmt.Errorf("%s: %w: %w", name, err, ErrSystem)
		}
		if b.opts.OnError == OnErrorFail {
			return &InputError{Input: name, Err: err}
		}
		reason := err
		if ie, ok := err.(*InputError); ok && ie.Input == name {
			reason = ie.Err // the entry names the input already
		}
		skipped = append(skipped, shard.Skipped{Input: name, Reason: reason.Error()})
		sum.Reasons[reasonKind(err)]++
		if b.opts.MaxErrors > 0 && len(skipped) > b.opts.MaxErrors {
			return fmt.Errorf("%w: %d inputs skipped, more than --max-errors %d; last: %s: %v",
				ErrTooManyErrors, len(skipped), b.opts.MaxErrors, name, err)
		}
		return nil
	}
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
			for _, r := range batch {
				if r.done {
					if drop > 0 {
						return nil, fmt.Errorf("%w: %s now yields fewer records than the %d the checkpoint holds (the source changed); build without --resume to start over",
							ErrResume, r.name, b.resume.Drop)
					}
					list.add(r.name, r.label, r.aux)
					inItem = 0
					if r.err == nil && r.count == 0 {
						r.err = noRecords() // listed, never dropped without a word
					}
					if r.err == nil {
						packed++
					}
					if r.err != nil {
						if r.count > 0 {
							if ie, ok := r.err.(*InputError); ok && ie.Input == r.name {
								r.err = ie.Err
							}
							r.err = fmt.Errorf("%w (after %d records were packed)", r.err, r.count)
						}
						if err := skip(r.name, r.err); err != nil {
							return nil, err
						}
					}
					items++
					if b.opts.Progress != nil {
						b.opts.Progress(items, b.info.Count, sum.Records, sum.Bytes)
					}
					continue
				}
				if !fits(spec, r.spec) {
					// The spec was decided from the source and options; a record that does
					// not fit it is a bug, never a reason to drop an image.
					b.pool.Put(r.buf)
					return nil, fmt.Errorf("internal error: %s: record shape %v %s %s does not fit the dataset's %v %s %s",
						r.name, r.spec.Shape, r.spec.DType, r.spec.Layout, spec.Shape, spec.DType, spec.Layout)
				}
				if drop > 0 {
					// A resumed build: this record is in the checkpoint already.
					if r.name != b.resume.Next {
						b.pool.Put(r.buf)
						return nil, fmt.Errorf("%w: the input after the checkpoint is now %s, was %s (the source changed); build without --resume to start over",
							ErrResume, r.name, b.resume.Next)
					}
					drop--
					inItem++
					b.pool.Put(r.buf)
					continue
				}
				r.rec.Shape = nil
				if !spec.Fixed() {
					r.rec.Shape = r.spec.Shape
				}
				if out == nil {
					if err := open(); err != nil {
						return nil, err
					}
				}
				curName = r.name
				if err := out.Write(r.rec); err != nil {
					return nil, fmt.Errorf("write %s output: %w", b.opts.Output.Name, err)
				}
				inItem++
				if r.rec.Label >= 0 && r.rec.Label < int64(len(counts)) {
					counts[r.rec.Label]++
				}
				sum.Records++
				sum.Bytes += int64(len(r.rec.Data))
				b.pool.Put(r.buf)
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
	if err := checkInputs(b.enumerated.Load(), items, packed, int64(len(skipped))); err != nil {
		return nil, err
	}
	if drop > 0 {
		return nil, fmt.Errorf("%w: the source now ends before %s, whose first %d records the checkpoint holds (the source changed); build without --resume to start over",
			ErrResume, b.resume.Next, b.resume.Drop)
	}
	var files []shard.FileEntry
	if out == nil {
		if err := open(); err != nil {
			return nil, err
		}
	}
	files, err := out.Close()
	finished = true
	if err != nil {
		return nil, fmt.Errorf("finish %s output: %w", b.opts.Output.Name, err)
	}
	// The journal goes before the manifest is written: a dataset never holds it. (Killed in
	// between, the build starts over: the staging folder holds neither.)
	if err := removeJournal(b.staging); err != nil {
		return nil, err
	}
	format, formatVersion := out.Format()
	m := &shard.Manifest{
		Packer:        Version,
		Format:        format,
		FormatVersion: formatVersion,
		Count:         sum.Records,
		Classes:       nonNil(b.info.Classes),
		ClassCounts:   counts,
		Sample:        spec,
		Label:         shard.LabelSpec{DType: "int64", Aux: nonNil(b.info.AuxNames)},
		Source:        b.info.Spec,
		Transform:     b.transformMap(),
		Files:         files,
		Skipped:       nonNil(skipped),
		Inputs:        items,
	}
	if b.part != nil {
		m.Part = b.part.info(b.opts.MaxErrors)
	}
	if err := WriteManifest(b.staging, m); err != nil {
		return nil, err
	}
	for _, f := range files {
		sum.FileBytes += f.Size
	}
	sum.Items = items
	sum.Skipped = int64(len(skipped))
	sum.Manifest = m
	return sum, nil
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
