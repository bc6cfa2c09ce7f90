package pipeline

// Resuming an interrupted build. While it writes, a build whose output can resume (an
// output.Entry with Resume: the shards format, and so every part) records a checkpoint each
// time the output has made its records durable (for shards: each finished shard, synced and
// renamed): a journal in the staging folder with the output's state, where the build stood at
// that record (inputs done, records of the next input already written, records, class counts,
// skipped inputs) and what decides the bytes (packer version, source, transform, format and
// options, part, where the source lies). The journal seals itself: its last member,
// journal_sha256, is the SHA-256 of the rest, so an edited or damaged journal is refused before
// any of it is trusted. Build with Options.Resume keeps an interrupted build's staging folder
// when it holds a journal, refuses it when the journal's options are not this build's, has the
// output reopen and check what it kept (the shards output: each kept shard's SHA-256), skips the
// inputs the checkpoint covers (checking that the source still lists them, by digest), drops
// the records of the next input that were already written, and goes on: the output is the
// bytes an uninterrupted build writes, redoing at most the work since the last checkpoint.

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
)

// JournalName is the resume journal's file name in the staging folder. It never reaches OUT:
// the build removes it before it writes the manifest.
const JournalName = output.EngineFilePrefix + "resume.json"

// maxJournalSize bounds the journal a resumed build reads: the manifest's bound, as the journal
// holds what the manifest will (the shard list, the skipped inputs) and little more.
var maxJournalSize int64 = shard.MaxManifestSize

// checkStaging refuses to resume from a staging folder that is not a folder (a symbolic link to
// one elsewhere): what the build publishes is the folder it created.
func checkStaging(staging string) error {
	st, err := os.Lstat(staging)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %s is not the folder the interrupted build created (a symbolic link?); put the folder itself there, or build without --resume to start over", ErrResume, staging)
	}
	return nil
}

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
	// Started is when the build that wrote the journal started (Unix nanoseconds, this host's
	// clock): an input the checkpoint covers that was modified later may have been packed with
	// its old content (resumeSkip).
	Started int64 `json:"started_unix_ns"`
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
	// BoxesDropped is the manifest's boxes_dropped so far (a dataset with fields).
	BoxesDropped map[string]int64 `json:"boxes_dropped,omitempty"`
	// Listing is the digest (listingHash) of the first Inputs inputs; ListingState the hash's
	// state, to go on from.
	Listing      string          `json:"listing_sha256"`
	ListingState []byte          `json:"listing_state"`
	Output       json.RawMessage `json:"output"` // the output's state (output.Checkpointer)
	// Marks are where the build stood at some of its checkpoints (this one the last), from
	// which CutJournal makes an earlier checkpoint's journal.
	Marks []mark `json:"marks,omitempty"`
}

// mark is where a build stood at a checkpoint: the journal's members then, its lists
// (Skipped, the output's files) by their length.
type mark struct {
	Inputs       int64            `json:"inputs"`
	Drop         int64            `json:"drop"`
	Next         string           `json:"next,omitempty"`
	Packed       int64            `json:"packed"`
	Records      int64            `json:"records"`
	Bytes        int64            `json:"bytes"`
	Counts       []int64          `json:"counts"`
	Skipped      int              `json:"skipped"`
	Reasons      map[string]int   `json:"reasons"`
	BoxesDropped map[string]int64 `json:"boxes_dropped,omitempty"`
	Listing      string           `json:"listing_sha256"`
	ListingState []byte           `json:"listing_state"`
}

// maxMarks bounds the marks a journal keeps: the last half of them are the last checkpoints',
// the older ones thinned out (addMark), so that the journal stays about as small as it was.
const maxMarks = 16

// mark is the journal's mark, with the listing digest l.
func (j *journal) mark(l *listingHash) (mark, error) {
	state, err := l.h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return mark{}, err
	}
	return mark{Inputs: j.Inputs, Drop: j.Drop, Next: j.Next, Packed: j.Packed, Records: j.Records, Bytes: j.Bytes,
		Counts: slices.Clone(j.Counts), Skipped: len(j.Skipped), Reasons: maps.Clone(j.Reasons), BoxesDropped: maps.Clone(j.BoxesDropped),
		Listing: l.sum(), ListingState: state}, nil
}

// addMark appends m to marks and, past maxMarks, drops every other one of the older half but
// the first, so that the older marks thin out as they age (about exponentially), and the list
// changes other than by an append only once in a few checkpoints (the bucket checkpoint's
// segments hold appends for less).
func addMark(marks []mark, m mark) []mark {
	marks = append(slices.Clone(marks), m)
	if len(marks) <= maxMarks {
		return marks
	}
	older := len(marks) - maxMarks/2
	out := marks[:1]
	for i := 1; i < older; i++ {
		if i%2 == 0 {
			out = append(out, marks[i])
		}
	}
	return append(out, marks[older:]...)
}

// CutJournal makes the journal of the interrupted build in the staging folder staging that of
// its latest checkpoint (a mark) which holds at most its first records records, and which the
// output's CutState can cut its state to: a resume whose kept files are damaged from record
// records on (the object store's, s3.ErrStoredDamaged) goes on from there, rather than from
// the beginning. It returns what the cut journal keeps; nil where no mark keeps any record (or
// the output cannot cut its state): the caller starts over.
func CutJournal(staging string, entry output.Entry, records int64) (*ResumeInfo, error) {
	p := filepath.Join(staging, JournalName)
	j, err := readJournal(p)
	if err != nil {
		return nil, err
	}
	k := -1
	for i, m := range j.Marks {
		// A mark is where the build stood at one of its checkpoints: never past where the
		// journal stands (a journal sealed again after an edit may say otherwise).
		if m.Records < 0 || m.Records > j.Records || m.Inputs < 0 || m.Inputs > j.Inputs || m.Skipped < 0 || m.Skipped > len(j.Skipped) {
			return nil, fmt.Errorf("%w: its journal %s holds a checkpoint mark (%d inputs, %d records, %d skipped) past where the journal stands (%d inputs, %d records, %d skipped): it was edited (build without --resume to start over)",
				ErrResume, p, m.Inputs, m.Records, m.Skipped, j.Inputs, j.Records, len(j.Skipped))
		}
		if m.Records > 0 && m.Records <= records {
			k = i
		}
	}
	if k < 0 || entry.CutState == nil {
		return nil, nil
	}
	m := j.Marks[k]
	out, err := entry.CutState(j.Output, m.Records)
	if err != nil {
		return nil, nil
	}
	j.Inputs, j.Drop, j.Next, j.Packed, j.Records, j.Bytes = m.Inputs, m.Drop, m.Next, m.Packed, m.Records, m.Bytes
	j.Counts, j.Skipped, j.Reasons, j.BoxesDropped = m.Counts, j.Skipped[:m.Skipped], m.Reasons, m.BoxesDropped
	j.Listing, j.ListingState, j.Output, j.Marks = m.Listing, m.ListingState, out, j.Marks[:k+1]
	data, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	if err := fileutil.WriteFileAtomic(p, sealJournal(data)); err != nil {
		return nil, err
	}
	return &ResumeInfo{Inputs: m.Inputs, Records: m.Records}, nil
}

// journalOptions are what decides a build's bytes, as the journal records them, and where the
// source lies (source_path: the inputs as absolute paths; the journal never reaches OUT, so it
// may hold them), so that a build of another folder with the same file names, labels and
// options does not take over the checkpoint.
func (b *builder) journalOptions() (map[string]json.RawMessage, error) {
	o := map[string]any{
		"source_path": sourcePaths(b.opts.Inputs),
		"format":      b.opts.Output.Name,
		"shard_size":  b.opts.ShardSize,
		"on_error":    b.opts.OnError,
		"max_errors":  b.opts.MaxErrors,
		"source":      b.info.Spec,
		"transform":   b.transformMap(),
		"classes":     nonNil(b.info.Classes),
		"aux_names":   nonNil(b.info.AuxNames),
		"has_meta":    b.info.HasMeta,
		"sample":      b.spec,
	}
	if b.opts.ChecksumBlock > 0 {
		// Absent at the default, so that a checkpoint of an earlier packer still matches.
		o["checksum_block"] = b.opts.ChecksumBlock
	}
	if len(b.fields) > 0 {
		// Absent without fields, so that a checkpoint of an earlier packer still matches.
		o["fields"] = b.fields
	}
	if b.opts.CutInputs > 0 {
		// Absent without the rule, so that a checkpoint of an earlier packer still matches.
		o["cut_inputs"] = b.opts.CutInputs
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

// sourcePaths returns the inputs as absolute paths (a URL such as s3://bucket/prefix as given).
func sourcePaths(inputs []string) []string {
	out := make([]string, 0, len(inputs))
	for _, in := range inputs {
		if !strings.Contains(in, "://") {
			if abs, err := filepath.Abs(in); err == nil {
				in = abs
			}
		}
		out = append(out, in)
	}
	return out
}

// The journal's own checksum is its last member, spliced in as the bytes journalSumOpen + 64
// lower-case hex digits + journalSumClose at the very end of the file: the SHA-256 of the
// journal's JSON without it (which ends with "}").
const (
	journalSumOpen  = `,"journal_sha256":"`
	journalSumClose = `"}`
)

// sealJournal appends the journal_sha256 member to body, a JSON object.
func sealJournal(body []byte) []byte {
	sum := sha256.Sum256(body)
	out := append([]byte{}, body[:len(body)-1]...)
	out = append(out, journalSumOpen...)
	out = hex.AppendEncode(out, sum[:])
	return append(out, journalSumClose...)
}

// checkJournalSeal returns the journal's JSON without its journal_sha256 member, or an error
// naming the file p when the member is missing or is not the SHA-256 of the rest.
func checkJournalSeal(p string, data []byte) ([]byte, error) {
	n := len(journalSumOpen) + 64 + len(journalSumClose)
	if len(data) < n+2 || !bytes.HasSuffix(data, []byte(journalSumClose)) ||
		!bytes.Equal(data[len(data)-n:len(data)-n+len(journalSumOpen)], []byte(journalSumOpen)) {
		return nil, fmt.Errorf("%w: its journal %s has no checksum (journal_sha256): it was edited, or written by an older packer (build without --resume to start over)", ErrResume, p)
	}
	body := append(append([]byte{}, data[:len(data)-n]...), '}')
	want := data[len(data)-n+len(journalSumOpen) : len(data)-len(journalSumClose)]
	sum := sha256.Sum256(body)
	if got := hex.EncodeToString(sum[:]); got != string(want) {
		return nil, fmt.Errorf("%w: its journal %s fails its checksum (journal_sha256 %s, the SHA-256 of the rest is %s): it was edited or damaged (build without --resume to start over)", ErrResume, p, want, got)
	}
	return body, nil
}

// readJournal reads the journal at p: a regular file of at most maxJournalSize bytes whose
// checksum holds, decoded strictly. A missing journal is an error matching os.ErrNotExist.
func readJournal(p string) (*journal, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: its journal %s is not a regular file (build without --resume to start over)", ErrResume, p)
	}
	if st.Size() > maxJournalSize {
		return nil, fmt.Errorf("%w: its journal %s has %d bytes, more than a journal can hold (%d) (build without --resume to start over)", ErrResume, p, st.Size(), maxJournalSize)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	body, err := checkJournalSeal(p, data)
	if err != nil {
		return nil, err
	}
	var j journal
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("%w: its journal %s is damaged: %v (build without --resume to start over)", ErrResume, p, err)
	}
	return &j, nil
}

// loadJournal reads the journal of an interrupted build in dir, checks its checksum, and checks
// that this build is the same build: packer version, every option that decides the bytes and
// where the source lies. nil, nil: no journal.
func (b *builder) loadJournal(dir string) (*journal, error) {
	p := filepath.Join(dir, JournalName)
	j, err := readJournal(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
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
	if j.Inputs < 0 || j.Drop < 0 || j.Records < 0 || len(j.Counts) != len(b.info.Classes) || (j.Drop > 0 && j.Next == "") || j.Started <= 0 {
		return nil, fmt.Errorf("%w: its journal %s is inconsistent (build without --resume to start over)", ErrResume, p)
	}
	// A source given as a file (a list, a plan, an archive or record file read by the
	// enumerator) must not have changed since the interrupted build started.
	for _, in := range b.opts.Inputs {
		if strings.Contains(in, "://") {
			continue
		}
		if st, err := os.Stat(in); err == nil && st.Mode().IsRegular() {
			if err := modifiedSince(in, st.ModTime(), j.Started); err != nil {
				return nil, err
			}
		}
	}
	if j.Reasons == nil {
		j.Reasons = map[string]int{}
	}
	return j, nil
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

// write records the journal durably in dir, sealed (written whole under a temporary name,
// synced, renamed: a crash leaves the previous checkpoint or this one).
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
	return fileutil.WriteFileAtomic(filepath.Join(dir, JournalName), sealJournal(data))
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

// removeEngineFiles removes from a resumed build's staging folder dir the entries named as the
// engine's files (output.EngineFilePrefix) other than the journal, which the output's Resume
// leaves alone and which would otherwise reach OUT.
func removeEngineFiles(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, output.EngineFilePrefix) && n != JournalName {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("remove %s, which is not in the checkpoint: %w", filepath.Join(dir, n), err)
			}
		}
	}
	return nil
}

// resumeSkip is the enumerator's side of a resumed build: it passes over the inputs the
// checkpoint covers, checking that the source still lists them (their digest).
type resumeSkip struct {
	j    *journal
	list listingHash
	ins  []string // the build's inputs (Options.Inputs)
	// files is Options.Files: the inputs' times are its listing's where it is set.
	files source.Files
	// walked: the files under the input folders were checked (readSourceModified), once, at
	// the first covered input whose bytes the enumerator read.
	walked bool
}

// skip reports whether the n-th input of the build (from 0) is covered by the checkpoint,
// checking that the file it is read from was not modified after the interrupted build started
// (for the input after the checkpoint too, when the checkpoint holds some of its records); at
// the last covered one it compares the digests.
func (r *resumeSkip) skip(n int64, it source.Item) (bool, error) {
	if n > r.j.Inputs || (n == r.j.Inputs && r.j.Drop == 0) {
		return false, nil
	}
	if it.Path == "" && it.Raw != nil && !r.walked {
		r.walked = true
		if err := readSourceModified(r.ins, r.j.Started); err != nil {
			return true, err
		}
	}
	if it.Path != "" {
		// A file that is gone changes the listing (below); one that is there must not be newer
		// than the build whose checkpoint holds its records.
		if st, err := source.Stat(r.files, it.Path); err == nil {
			if err := modifiedSince(fmt.Sprintf("%s (%s)", it.Name, it.Path), st.ModTime(), r.j.Started); err != nil {
				return true, err
			}
			if st.IsDir() {
				if err := entriesModifiedSince(it.Name, it.Path, r.j.Started); err != nil {
					return true, err
				}
			}
		}
	}
	if n == r.j.Inputs {
		// The input after the checkpoint, of which the checkpoint holds the first Drop
		// records: decoded again, its records up to Drop dropped (the writer checks its name).
		return false, nil
	}
	r.list.add(it.Name, it.Label, it.Aux, it.Extra)
	if n == r.j.Inputs-1 && r.list.sum() != r.j.Listing {
		return true, fmt.Errorf("%w: the source no longer lists the same first %d inputs as when the build was interrupted (the source changed); build without --resume to start over",
			ErrResume, r.j.Inputs)
	}
	return true, nil
}

// modifiedSince refuses an input (named name) of a resumed build that was modified at mtime,
// after the interrupted build started (started, Unix nanoseconds): the checkpoint may hold
// records of its old content.
func modifiedSince(name string, mtime time.Time, started int64) error {
	if mtime.UnixNano() <= started {
		return nil
	}
	return fmt.Errorf("%w: %s was modified at %s, after the interrupted build started (%s): the checkpoint may hold records of its old content (the source changed); build without --resume to start over",
		ErrResume, name, mtime.UTC().Format(time.RFC3339Nano), time.Unix(0, started).UTC().Format(time.RFC3339Nano))
}

// entriesModifiedSince refuses an input read from the folder dir (a frames video) one of whose
// files was modified after the interrupted build started: a file written over in place (frames
// extracted again) leaves the folder's own modification time alone. One stat per entry.
func entriesModifiedSince(name, dir string, started int64) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil // read again, and reported, when the input is decoded
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue // hidden: never a frame
		}
		p := filepath.Join(dir, e.Name())
		st, err := os.Stat(p)
		if err != nil || st.IsDir() {
			continue
		}
		if err := modifiedSince(fmt.Sprintf("%s (%s)", name, p), st.ModTime(), started); err != nil {
			return err
		}
	}
	return nil
}

// readSourceModified refuses a resume whose input folders hold a file (hidden ones aside)
// modified after the interrupted build started: an input whose bytes the enumerator read (a
// CIFAR batch's record, a WebDataset sample: Item.Raw) names no file of its own, and the
// checkpoint may hold records of the old bytes of any file the source reads. One stat per file.
func readSourceModified(ins []string, started int64) error {
	for _, in := range ins {
		if strings.Contains(in, "://") {
			continue
		}
		if st, err := os.Stat(in); err != nil || !st.IsDir() {
			continue // a file: checked when the journal was loaded
		}
		err := filepath.WalkDir(in, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // what cannot be read here is reported by the source
			}
			if p != in && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			st, err := os.Stat(p)
			if err != nil || !st.Mode().IsRegular() {
				return nil
			}
			return modifiedSince(p, st.ModTime(), started)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// done checks, once the source is enumerated, that it held every input the checkpoint covers.
func (r *resumeSkip) done(n int64) error {
	if n < r.j.Inputs {
		return fmt.Errorf("%w: the source now lists %s, fewer than the %d the checkpoint covers (the source changed); build without --resume to start over",
			ErrResume, humanize.Count(n, "input"), r.j.Inputs)
	}
	return nil
}

// newResumeSkip starts the enumerator's check of a journal, for a build of the inputs ins.
func newResumeSkip(j *journal, ins []string) *resumeSkip {
	return &resumeSkip{j: j, list: newListingHash(), ins: ins}
}
