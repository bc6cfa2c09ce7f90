package shard

import "fmt"

// MixBatch is one batch of a MixLoader: per record, its bytes (a sample value, followed by its
// field values in a dataset with fields: Dataset.RecordFields splits them), its source, its
// record number in that source and its label. The sources may hold records of different
// shapes: the caller batches them as it sees fit (Dataset.RecordShape gives a record's shape).
type MixBatch struct {
	Records [][]byte
	Sources []int
	Indices []int64
	Labels  []int64
}

// Len returns the number of records in the batch.
func (b *MixBatch) Len() int { return len(b.Sources) }

// MixLoader reads one rank's share of a mixture epoch from the mixture's datasets, a batch at a
// time, each record through Dataset.Record (so its CRC-32C is checked as every read checks
// it). Every rank yields the same number of batches (ORDER.md v2 step 4 over the mixture's
// positions); State after a batch resumes the epoch on any number of ranks. It reads one
// batch at a time, in the caller's goroutine; it is not safe for concurrent use.
type MixLoader struct {
	m     *Mixture
	ds    []*Dataset
	o     MixOrderOptions
	refs  []MixRef
	plan  PlanV2
	next  int   // index in refs of the next batch's first record
	n     int64 // batches handed out
	batch MixBatch
	err   error
}

// NewMixLoader returns a loader of rank's share of the mixture over datasets (one per source,
// in the mixture's order, each with the record count the mixture was made with).
func NewMixLoader(m *Mixture, datasets []*Dataset, o MixOrderOptions) (*MixLoader, error) {
	if len(datasets) != m.Sources() {
		return nil, fmt.Errorf("shard: %d datasets for a mixture of %d sources", len(datasets), m.Sources())
	}
	for k, d := range datasets {
		if d.Len() != m.counts[k] {
			return nil, fmt.Errorf("shard: %s: %d records, the mixture's source %d has %d", d.Dir(), d.Len(), k, m.counts[k])
		}
	}
	refs, plan, err := m.Order(o)
	if err != nil {
		return nil, err
	}
	return &MixLoader{m: m, ds: datasets, o: o, refs: refs, plan: plan}, nil
}

// Batches returns the number of batches the loader yields, the same on every rank.
func (l *MixLoader) Batches() int64 { return l.plan.Batches() }

// Next reads the next batch; it returns false at the end of the epoch's share or on an error
// (Err).
func (l *MixLoader) Next() bool {
	if l.err != nil || l.next >= len(l.refs) {
		return false
	}
	size := min(l.o.BatchSize, len(l.refs)-l.next)
	b := MixBatch{Records: make([][]byte, size), Sources: make([]int, size), Indices: make([]int64, size), Labels: make([]int64, size)}
	for i, r := range l.refs[l.next : l.next+size] {
		d := l.ds[r.Source]
		rec, err := d.Record(r.Record)
		if err == nil {
			b.Labels[i], err = d.Label(r.Record)
		}
		if err != nil {
			l.err = fmt.Errorf("shard: mixture source %d (%s): %w", r.Source, d.Dir(), err)
			return false
		}
		b.Records[i], b.Sources[i], b.Indices[i] = rec, r.Source, r.Record
	}
	l.batch = b
	l.next += size
	l.n++
	return true
}

// Batch returns the batch Next read. Its slices are the caller's.
func (l *MixLoader) Batch() MixBatch { return l.batch }

// Err returns the error that stopped Next, if any.
func (l *MixLoader) Err() error { return l.err }

// State returns the mixture state after the batches handed out so far, the same on every rank:
// saved with a checkpoint once the current batch is processed, Mixture.Restore resumes it on
// any number of ranks.
func (l *MixLoader) State() (MixState, error) {
	return l.m.State(l.o.Epoch, l.plan.StateAfter(l.n))
}
