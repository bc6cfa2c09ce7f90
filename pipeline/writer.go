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
	)
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
				r.rec.Shape = nil
				if !spec.Fixed() {
					r.rec.Shape = r.spec.Shape
				}
				if out == nil {
					var err error
					if out, err = b.newOutput(spec); err != nil {
						return nil, err
					}
				}
				if err := out.Write(r.rec); err != nil {
					return nil, fmt.Errorf("write %s output: %w", b.opts.Output.Name, err)
				}
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
	var files []shard.FileEntry
	if out == nil {
		var err error
		if out, err = b.newOutput(spec); err != nil {
			return nil, err
		}
	}
	files, err := out.Close()
	finished = true
	if err != nil {
		return nil, fmt.Errorf("finish %s output: %w", b.opts.Output.Name, err)
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
	data, _ := json.Marshal(b.tspec)
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

// newOutput creates the build's Output, when the first record is ready (or at the end of a
// build with no record).
func (b *builder) newOutput(spec shard.SampleSpec) (output.Output, error) {
	out, err := b.opts.Output.New(output.Config{
		Dir: b.staging, Sample: spec,
		Label:     shard.LabelSpec{DType: "int64", Aux: nonNil(b.info.AuxNames)},
		Classes:   b.info.Classes,
		HasMeta:   b.info.HasMeta,
		ShardSize: b.opts.ShardSize,
		Meta:      b.datasetMeta(),
	})
	if err != nil {
		return nil, fmt.Errorf("create %s output: %w", b.opts.Output.Name, err)
	}
	return out, nil
}
