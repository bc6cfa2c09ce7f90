package pipeline

// Resuming an interrupted build. While it writes, a build whose output can resume (an
// output.Entry with Resume: the shards format, and so every part) records a checkpoint each
// time the output has made its records durable (for shards: each finished shard, synced and
// renamed): a journal in the staging folder with the output's state, where the build stood at
// that record (inputs done, records of the next input already written, records, class counts,
// skipped inputs) and what decides the bytes (packer version, source, transform, format and
// options, part). Build with Options.Resume keeps an interrupted build's staging folder when it
// holds a journal, refuses it when the journal's options are not this build's, skips the
// inputs the checkpoint covers (checking that the source still lists them, by digest), drops
// the records of the next input that were already written, and goes on: the output is the
// bytes an uninterrupted build writes, redoing at most the work since the last checkpoint.

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/packer-dev/packer/shard"
)

// JournalName is the resume journal's file name in the staging folder. It never reaches OUT:
// the build removes it before it writes the manifest.
const JournalName = "packer-resume.json"

// ErrResume is wrapped by every refusal to resume an interrupted build.
var ErrResume = errors.New("cannot resume the interrupted build")

// ResumeInfo reports what a resumed build took over from its checkpoint.
type ResumeInfo struct {
	Inputs  int64 `json:"inputs"`  // inputs the checkpoint covered (not decoded again)
	Records int64 `json:"records"` // records kept
}

// journal is the resume journal (JournalName).
type journal struct {
	Packer  string                     `json:"packer"`
	Options map[string]json.RawMessage `json:"options"` // what decides the bytes (journalOptions)
	// Inputs is the number of inputs whose records are all in the checkpoint (or that were
	// skipped); Drop records of the next input, Next, are in it too.
	Inputs  int64           `json:"inputs"`
	Drop    int64           `json:"drop"`
	Next    string          `json:"next,omitempty"`
	Packed  int64           `json:"packed"`
	Records int64           `json:"records"`
	Bytes   int64           `json:"bytes"`
	Counts  []int64         `json:"counts"`
	Skipped []shard.Skipped `json:"skipped"`
	Reasons map[string]int  `json:"reasons"`
	// Listing is the digest (listingHash) of the first Inputs inputs; ListingState the hash's
	// state, to go on from.
	Listing      string          `json:"listing_sha256"`
	ListingState []byte          `json:"listing_state"`
	Output       json.RawMessage `json:"output"` // the output's state (output.Checkpointer)
}

// journalOptions are what decides a build's bytes, as the journal records them.
func (b *builder) journalOptions() (map[string]json.RawMessage, error) {
	o := map[string]any{
		"format":     b.opts.Output.Name,
		"shard_size": b.opts.ShardSize,
		"on_error":   b.opts.OnError,
		"max_errors": b.opts.MaxErrors,
		"source":     b.info.Spec,
		"transform":  b.transformMap(),
		"classes":    nonNil(b.info.Classes),
		"aux_names":  nonNil(b.info.AuxNames),
		"has_meta":   b.info.HasMeta,
		"sample":     b.spec,
	}
	if p := b.part; p != nil {
		o["part"] = map[string]any{"index": p.p.Index, "count": p.p.Count, "final": p.p.Final.Name,
			"final_shard_size": p.p.FinalShardSize, "first_input": p.lo, "end_input": p.hi, "total_inputs": p.total}
	}
	raw := make(map[string]json.RawMessage, len(o))
	for k, v := range o {
		data, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		raw[k] = data
	}
	return raw, nil
}

// loadJournal reads the journal of an interrupted build in dir and checks that this build is
// the same build: packer version and every option that decides the bytes. nil, nil: no journal.
func (b *builder) loadJournal(dir string) (*journal, error) {
	p := filepath.Join(dir, JournalName)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%w: its journal %s is damaged: %v (build without --resume to start over)", ErrResume, p, err)
	}
	if j.Packer != Version {
		return nil, fmt.Errorf("%w: it was made by packer %s, this is packer %s (build without --resume to start over)", ErrResume, j.Packer, Version)
	}
	mine, err := b.journalOptions()
	if err != nil {
		return nil, err
	}
	var diff []string
	for k, v := range mine {
		if !bytes.Equal(v, j.Options[k]) {
			diff = append(diff, fmt.Sprintf("%s: was %s, now %s", k, orNone(j.Options[k]), v))
		}
	}
	for k, v := range j.Options {
		if _, ok := mine[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: was %s, now none", k, v))
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		return nil, fmt.Errorf("%w: it was made with other options or from another source (%s); build without --resume to start over",
			ErrResume, strings.Join(diff, "; "))
	}
	if j.Inputs < 0 || j.Drop < 0 || j.Records < 0 || len(j.Counts) != len(b.info.Classes) || (j.Drop > 0 && j.Next == "") {
		return nil, fmt.Errorf("%w: its journal %s is inconsistent (build without --resume to start over)", ErrResume, p)
	}
	if j.Reasons == nil {
		j.Reasons = map[string]int{}
	}
	return &j, nil
}

func orNone(v json.RawMessage) string {
	if v == nil {
		return "none"
	}
	return string(v)
}

// restoreListing returns the listing digest of the checkpoint's inputs, to go on from.
func (j *journal) restoreListing() (listingHash, error) {
	l := newListingHash()
	if err := l.h.(encoding.BinaryUnmarshaler).UnmarshalBinary(j.ListingState); err != nil {
		return l, fmt.Errorf("%w: the journal's listing digest: %v", ErrResume, err)
	}
	l.n = j.Inputs
	if l.sum() != j.Listing {
		return l, fmt.Errorf("%w: the journal's listing digest does not match its state", ErrResume)
	}
	return l, nil
}

// write records the journal durably in dir (written whole under a temporary name, synced,
// renamed: a crash leaves the previous checkpoint or this one).
func (j *journal) write(dir string, l *listingHash) error {
	state, err := l.h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return err
	}
	j.Listing, j.ListingState = l.sum(), state
	data, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return shard.WriteFileAtomic(filepath.Join(dir, JournalName), data)
}

// removeJournal removes the journal from dir, with the temporary file a write of it killed
// half-way left.
func removeJournal(dir string) error {
	for _, n := range []string{JournalName, JournalName + ".tmp"} {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// resumeSkip is the enumerator's side of a resumed build: it passes over the inputs the
// checkpoint covers, checking that the source still lists them (their digest).
type resumeSkip struct {
	j    *journal
	list listingHash
}

// skip reports whether the n-th input of the build (from 0) is covered by the checkpoint; at
// the last covered one it compares the digests.
func (r *resumeSkip) skip(n int64, it Item) (bool, error) {
	if n >= r.j.Inputs {
		return false, nil
	}
	r.list.add(it.Name, it.Label, it.Aux)
	if n == r.j.Inputs-1 && r.list.sum() != r.j.Listing {
		return true, fmt.Errorf("%w: the source no longer lists the same first %d inputs as when the build was interrupted (the source changed); build without --resume to start over",
			ErrResume, r.j.Inputs)
	}
	return true, nil
}

// done checks, once the source is enumerated, that it held every input the checkpoint covers.
func (r *resumeSkip) done(n int64) error {
	if n < r.j.Inputs {
		return fmt.Errorf("%w: the source now lists %d inputs, fewer than the %d the checkpoint covers (the source changed); build without --resume to start over",
			ErrResume, n, r.j.Inputs)
	}
	return nil
}

// newResumeSkip starts the enumerator's check of a journal.
func newResumeSkip(j *journal) *resumeSkip {
	return &resumeSkip{j: j, list: newListingHash()}
}
