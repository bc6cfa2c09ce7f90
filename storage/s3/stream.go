package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// StreamStage is a dataset written to the object store as it is built: the build hands each
// data file over as soon as it is finished (Put: uploaded with a conditional write, its SHA-256
// verified by the store or the object read back and checked, then removed from the local
// folder), so that the local folder holds only the files not handed over yet, and the manifest
// is written last by
// Publish, exactly as Stage's: nothing under the prefix is a dataset before it.
//
// What was uploaded is recorded in the stage's local folder (StreamStateName: the prefix, the
// generation the files go under, and each object's size, SHA-256 and ETag), which a build
// keeps at a place of its own for OUT (the command's), so that a resumed build (resume) finds
// the objects an interrupted one uploaded: they are checked (Keep, Put: size and ETag against
// the record, or without a record the object read back and hashed) and taken over, not sent
// again; a missing or damaged one is uploaded again.
//
// The stage also keeps the build's checkpoint in the bucket (CheckpointName, next to the
// generation the files go under): the build hands each checkpoint's journal to SaveCheckpoint,
// which writes it with the record of the uploads, so that a resume on a machine without this
// local folder (a rescheduled pod, a requeued job on another node) goes on from it. The
// object is written with conditional writes from the moment the stage opens (If-None-Match: *
// for a new build, If-Match: the ETag last seen for a resumed one, and for every later write),
// so that of two builds of one OUT exactly one owns it; the other fails matching ErrTakenOver
// and deletes nothing. It is deleted before the manifest is written, and by a build that
// fails.
type StreamStage struct {
	b       *Backend
	ctx     context.Context
	staging *storage.Staging
	opts    storage.StageOptions
	old     *oldDataset
	// resumed: opened with resume, so that the objects under the names the build writes may
	// be an interrupted build's of this stage, to check and take over; otherwise an object
	// this stage did not upload is another build's, never removed or taken.
	resumed bool

	mu sync.Mutex
	st streamState
	// sending are the names of the uploads in flight: one cancelled after its body was sent
	// may still appear, so a failed build deletes these too (RemoveUploads).
	sending map[string]bool

	owner   owner  // this build, as its checkpoint object names it
	journal []byte // the journal of the bucket's checkpoint, where it is newer than the local one (TakenJournal)

	// The checkpoint in the bucket as this build last wrote it (under mu): its segments, and
	// the record and journal they make, from which the next segment is the change; seq numbers
	// the segments this build writes; oldChain are the segments of the checkpoint the build
	// went on from, deleted once it has written its own.
	chain     []chainSeg
	cpSent    map[string]sentObject
	cpJournal []byte
	seq       int
	oldChain  []string

	busy      int           // Puts running (under mu)
	busySince time.Time     // when busy last went from 0 to 1
	busyTotal time.Duration // the time with a Put running, before busySince
}

// StreamStateName is the file in the stage's local folder that records the uploads.
const StreamStateName = "upload-state.json"

type streamState struct {
	URL string `json:"url"`
	// Gen is the generation sub-prefix the files go under ("" where no dataset is replaced);
	// Replaces the ETag of the manifest of the dataset replaced.
	Gen      string                `json:"generation"`
	Replaces string                `json:"replaces_etag,omitempty"`
	Sent     map[string]sentObject `json:"sent"` // by name below the prefix (with Gen)
	// CheckpointETag is the ETag of the checkpoint object (CheckpointName) as this build last
	// wrote it ("": it has not written one yet), the condition of its next write.
	CheckpointETag string `json:"checkpoint_etag,omitempty"`
	// Segments are the segment objects that checkpoint names (ckptseg.go), in order.
	Segments []string `json:"checkpoint_segments,omitempty"`
}

// bucketCheckpoint is what the checkpoint object holds: its owner and its segments
// (ckptseg.go). A packer before segments wrote the record of the uploads and the journal in
// the object itself (State, Journal), which a resume still reads.
type bucketCheckpoint struct {
	owner
	Segments []segRef     `json:"segments,omitempty"`
	State    *streamState `json:"uploads,omitempty"`
	Journal  []byte       `json:"journal,omitempty"` // the build's resume journal, sealed
}

type sentObject struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	ETag   string `json:"etag"`
}

var _ storage.UploadStage = (*StreamStage)(nil)

// ErrStoredDamaged is what the error of Keep matches when an object the interrupted build
// uploaded is missing or is not what it uploaded.
var ErrStoredDamaged = errors.New("an object the interrupted build uploaded is missing or changed")

// ErrSentChanged is what the error of Publish matches when an object the build uploaded as it
// went was deleted or overwritten before the manifest was to be written.
var ErrSentChanged = errors.New("an object this build uploaded was deleted or overwritten before its manifest was written")

// StreamStage opens a stage in the local folder opts.Staging makes, which must be the same
// folder for every build of this prefix (it is where the record of the uploads is kept). Without
// resume, the folder is emptied, and the leftovers of an interrupted build of this stage's (the
// objects its record lists) are removed from the prefix; other leftovers, a dataset there and
// objects a build does not write are refused as Stage refuses them (opts.Force: replaced or
// removed). With resume, the record is kept, and so are the leftovers under the names a build
// writes, for Keep and Put to check and take over (their unfinished uploads are aborted); a
// dataset the interrupted build was replacing must still be the same one.
func (b *Backend) StreamStage(ctx context.Context, opts storage.StageOptions, resume bool) (*StreamStage, error) {
	staging, err := opts.Staging()
	if err != nil {
		return nil, err
	}
	s := &StreamStage{b: b, ctx: ctx, staging: staging, opts: opts, sending: map[string]bool{}, resumed: resume}
	if err := s.open(resume); err != nil {
		staging.Remove()
		return nil, err
	}
	return s, nil
}

func (s *StreamStage) open(resume bool) error {
	b := s.b
	var err error
	if s.owner, err = newOwner(); err != nil {
		return err
	}
	var prev streamState
	data, err := os.ReadFile(filepath.Join(s.staging.Dir, StreamStateName))
	valid := err == nil && json.Unmarshal(data, &prev) == nil && prev.URL == b.url.String()
	// The checkpoint in the bucket is this folder's own when it is the one this folder's build
	// last wrote; otherwise another machine's build wrote it (or this folder is new).
	cpETag, err := b.etag(s.ctx, CheckpointName)
	if errors.Is(err, fs.ErrNotExist) {
		cpETag, err = "", nil
	}
	if err != nil {
		return err
	}
	ownCP := cpETag != "" && valid && prev.CheckpointETag == cpETag
	if resume && cpETag != "" && !ownCP {
		if prev, valid, cpETag, err = s.takeCheckpoint(); err != nil {
			return err
		}
	}
	own := leftovers{mine: func(name string) bool {
		if name == CheckpointName {
			return ownCP
		}
		if segmentName(name) {
			// The checkpoint's segments, and those its build wrote and had not deleted yet
			// when it was killed (named with its token, as the listed ones).
			return ownCP && valid && slices.ContainsFunc(prev.Segments, func(listed string) bool { return sameWriter(listed, name) })
		}
		_, ok := prev.Sent[name]
		return ok && valid
	}}
	if resume {
		own = leftovers{mine: func(name string) bool { return name != ClaimName }, keep: true}
	} else if err := s.empty(); err != nil {
		return err
	}
	old, err := b.prepare(s.ctx, s.opts.Force, s.opts.Force, s.opts.Formats, own, s.opts.Command)
	if err != nil {
		return err
	}
	s.old = old
	if resume && valid {
		switch {
		case (old == nil) != (prev.Gen == ""), old != nil && old.etag != prev.Replaces:
			return fmt.Errorf("%s: the dataset there was replaced or removed since the interrupted build started; build again without --resume", b.url)
		}
		s.st = prev
		if ownCP {
			s.oldChain = slices.Clone(prev.Segments)
		}
	} else {
		if resume {
			// No record (another machine's build, or none): the objects there are checked by
			// reading them back.
			if err := s.empty(); err != nil {
				return err
			}
		}
		gen, err := newGeneration(old)
		if err != nil {
			return err
		}
		s.st = streamState{URL: b.url.String(), Gen: gen}
		if old != nil {
			s.st.Replaces = old.etag
		}
	}
	if s.st.Sent == nil {
		s.st.Sent = map[string]sentObject{}
	}
	if err := os.MkdirAll(s.Dir(), 0o755); err != nil {
		return err
	}
	// The build owns OUT from now on: a new build takes the prefix (the checkpoint of an
	// interrupted one was removed with its leftovers, or is refused as one), a resumed one the
	// checkpoint it goes on from, unless this folder's build wrote it last.
	s.st.CheckpointETag = ""
	if resume {
		s.st.CheckpointETag = cpETag
	}
	if !resume || !ownCP {
		if err := s.writeCheckpoint(s.journal); err != nil {
			return err
		}
	}
	// A merge that found the prefix free when this build did has its claim there now: it or
	// this build stops (claimPrefix looks for the checkpoint in turn). A new build's checkpoint
	// goes; a resumed one's is kept, with the journal it goes on from.
	if err := b.otherControl(s.ctx, ClaimName); err != nil {
		err = fmt.Errorf("%s: a merge is writing there: %w", b.url, err)
		if !resume {
			err = errors.Join(err, s.dropCheckpoint(s.ctx))
		}
		return err
	}
	return s.save()
}

// takeCheckpoint reads the checkpoint in the bucket, written by a build on another machine (or
// by this folder's build, whose folder was lost): its record of the uploads, whether the record
// is this OUT's, and its ETag; its journal is kept for TakenJournal. The local folder's own
// record and journal, older, are removed.
func (s *StreamStage) takeCheckpoint() (streamState, bool, string, error) {
	data, etag, err := s.b.readControl(s.ctx, CheckpointName)
	if err != nil || data == nil {
		return streamState{}, false, etag, err
	}
	st, journal, names, err := s.readCheckpoint(data)
	if err != nil {
		return streamState{}, false, "", err
	}
	if err := s.empty(); err != nil {
		return streamState{}, false, "", err
	}
	// The segments of the checkpoint taken over go once this build has written its own.
	s.oldChain = names
	if st.URL != s.b.url.String() {
		return streamState{}, false, etag, nil // not this OUT's: taken over, but not gone on from
	}
	s.journal = journal
	st.CheckpointETag, st.Segments = "", nil
	return st, true, etag, nil
}

// TakenJournal is the resume journal of the checkpoint a resumed build took from the bucket
// (the local folder had none, or an older one): the caller puts it where the build reads its
// journal. nil: the local folder's journal, if any, is the one to go on from.
func (s *StreamStage) TakenJournal() []byte { return s.journal }

// SaveCheckpoint keeps a checkpoint of the build in the bucket: its resume journal and the
// record of the uploads, written on the condition that the object is still the one this build
// last wrote (an error matching ErrTakenOver otherwise: another build owns OUT now).
func (s *StreamStage) SaveCheckpoint(journal []byte) error {
	if err := s.writeCheckpoint(journal); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.save()
}

// writeCheckpoint writes the checkpoint (ckptseg.go): a segment object with what changed since
// the last checkpoint (merged with the last segments while their levels are equal), then the
// checkpoint object naming the segments, on the condition s.st.CheckpointETag; it records the
// new ETag, and deletes the segments the new one replaces (and, at a build's first checkpoint,
// those of the checkpoint it went on from).
func (s *StreamStage) writeCheckpoint(journal []byte) error {
	s.mu.Lock()
	st := s.st
	st.Sent = maps.Clone(s.st.Sent)
	chain, cpSent, cpJournal := s.chain, s.cpSent, s.cpJournal
	s.seq++
	name := fmt.Sprintf("%s%s-%d.json", segmentPrefix, s.owner.Token[:16], s.seq)
	s.mu.Unlock()
	seg := newSegment(cpSent, cpJournal, st, journal)
	level := 0
	var gone []string
	for n := len(chain); n > 0 && chain[n-1].ref.Level == level; n = len(chain) {
		var err error
		if seg, err = composeSegments(chain[n-1].seg, seg); err != nil {
			return fmt.Errorf("%s: merge the checkpoint's segments: %w", s.b.url, err)
		}
		gone = append(gone, chain[n-1].ref.Name)
		chain, level = chain[:n-1], level+1
	}
	data, ref, err := encodeSegment(seg, name, level)
	if err != nil {
		return err
	}
	if _, err := s.b.putControl(s.ctx, name, data, ""); err != nil {
		return fmt.Errorf("%s: keep the build's checkpoint: %w", s.b.url, err)
	}
	chain = append(slices.Clone(chain), chainSeg{ref: ref, seg: seg})
	refs := make([]segRef, len(chain))
	for i, c := range chain {
		refs[i] = c.ref
	}
	data, err = json.Marshal(bucketCheckpoint{owner: s.owner, Segments: refs})
	if err != nil {
		return err
	}
	etag, err := s.b.putControl(s.ctx, CheckpointName, data, st.CheckpointETag)
	if err != nil {
		// The segment is this build's, and no checkpoint names it.
		s.b.removeAll([]string{s.b.url.keyPrefix() + name})
		return fmt.Errorf("%s: keep the build's checkpoint: %w", s.b.url, err)
	}
	s.mu.Lock()
	s.st.CheckpointETag = etag
	s.chain, s.cpSent, s.cpJournal = chain, st.Sent, journal
	s.st.Segments = make([]string, len(chain))
	for i, c := range chain {
		s.st.Segments[i] = c.ref.Name
	}
	gone = append(gone, s.oldChain...)
	s.oldChain = nil
	s.mu.Unlock()
	return s.deleteSegments(s.ctx, gone)
}

// chainSeg is a segment of the build's checkpoint, as written.
type chainSeg struct {
	ref segRef
	seg segment
}

// deleteSegments deletes the segment objects names.
func (s *StreamStage) deleteSegments(ctx context.Context, names []string) error {
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = s.b.url.keyPrefix() + n
	}
	if err := s.b.deleteKeys(ctx, keys); err != nil {
		return fmt.Errorf("%s: delete the checkpoint's old segments: %w", s.b.url, err)
	}
	return nil
}

// readCheckpoint is the record of the uploads and the journal that the checkpoint object data
// names: in its segments (each read back and checked against its size and SHA-256, then
// applied in order), or, in a checkpoint written by a packer before segments, in the object
// itself. It also returns the segments' names.
func (s *StreamStage) readCheckpoint(data []byte) (streamState, []byte, []string, error) {
	cpURL := s.b.objURL(s.b.url.keyPrefix() + CheckpointName)
	var cp bucketCheckpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return streamState{}, nil, nil, fmt.Errorf("%s: %w; build again with --force (without --resume) to start over", cpURL, err)
	}
	if cp.Segments == nil {
		if cp.State == nil {
			return streamState{}, nil, nil, fmt.Errorf("%s: it names no segments and holds no record of the uploads: not a checkpoint packer wrote; build again with --force (without --resume) to start over", cpURL)
		}
		return *cp.State, cp.Journal, nil, nil
	}
	var st streamState
	var journal []byte
	var names []string
	for _, ref := range cp.Segments {
		if !segmentName(ref.Name) {
			return streamState{}, nil, nil, fmt.Errorf("%s: it names %q, not a checkpoint segment; build again with --force (without --resume) to start over", cpURL, ref.Name)
		}
		segURL := s.b.objURL(s.b.url.keyPrefix() + ref.Name)
		raw, _, err := s.b.readControl(s.ctx, ref.Name)
		if err != nil {
			return streamState{}, nil, nil, err
		}
		if raw == nil {
			return streamState{}, nil, nil, fmt.Errorf("%s: the checkpoint %s names it, and it is gone (the build that wrote it checkpointed again meanwhile?); try again, or build again with --force (without --resume) to start over", segURL, cpURL)
		}
		sum := sha256.Sum256(raw)
		if got := hex.EncodeToString(sum[:]); int64(len(raw)) != ref.Size || got != ref.SHA256 {
			return streamState{}, nil, nil, fmt.Errorf("%s: %d bytes of SHA-256 %s, the checkpoint %s recorded %d bytes of SHA-256 %s: it was edited or damaged; build again with --force (without --resume) to start over", segURL, len(raw), got, cpURL, ref.Size, ref.SHA256)
		}
		var seg segment
		err = json.Unmarshal(raw, &seg)
		if err == nil {
			journal, err = seg.apply(&st, journal)
		}
		if err != nil {
			return streamState{}, nil, nil, fmt.Errorf("%s: %w; build again with --force (without --resume) to start over", segURL, err)
		}
		names = append(names, ref.Name)
	}
	return st, journal, names, nil
}

// dropCheckpoint deletes the checkpoint object if this build wrote it last, then every
// checkpoint segment under the prefix: its own, those of the checkpoints it went on from, and
// any a killed or superseded build left unnamed (no checkpoint names them now).
func (s *StreamStage) dropCheckpoint(ctx context.Context) error {
	s.mu.Lock()
	etag := s.st.CheckpointETag
	s.mu.Unlock()
	if etag == "" {
		return nil
	}
	if err := s.b.dropControl(ctx, CheckpointName, etag); err != nil {
		return err
	}
	s.mu.Lock()
	s.st.CheckpointETag = ""
	s.chain, s.cpSent, s.cpJournal, s.st.Segments, s.oldChain = nil, nil, nil, nil, nil
	s.mu.Unlock()
	var names []string
	err := s.b.List(ctx, func(fi storage.FileInfo) error {
		if segmentName(fi.Name) {
			names = append(names, fi.Name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.deleteSegments(ctx, names)
}

// empty removes everything in the stage's folder but its lock.
func (s *StreamStage) empty() error {
	ents, err := os.ReadDir(s.staging.Dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == storage.StagingLockName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.staging.Dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// save writes the record durably (under the lock s.mu, or before any Put).
func (s *StreamStage) save() error {
	data, err := json.Marshal(s.st)
	if err != nil {
		return err
	}
	return fileutil.WriteFileAtomic(filepath.Join(s.staging.Dir, StreamStateName), data)
}

// Dir is the local folder the dataset is built in.
func (s *StreamStage) Dir() string { return filepath.Join(s.staging.Dir, "dataset") }

// Backend is the local folder's backend.
func (s *StreamStage) Backend() storage.Backend { return storage.NewLocal(s.Dir()) }

// Put uploads the finished file fe of dir under the stage's generation, has the store verify
// its SHA-256 or reads it back and checks it (as Publish does), records it and removes the
// local file. An object already there under that name
// (an interrupted build's) is taken as it is when it is the file (its size and ETag as recorded,
// or without a record its bytes' SHA-256), and otherwise deleted and uploaded again.
func (s *StreamStage) Put(dir string, fe shard.FileEntry) error {
	s.mu.Lock()
	if s.busy++; s.busy == 1 {
		s.busySince = time.Now()
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.busy--; s.busy == 0 {
			s.busyTotal += time.Since(s.busySince)
		}
		s.mu.Unlock()
	}()
	name := s.st.Gen + fe.Path
	s.mu.Lock()
	_, recorded := s.st.Sent[name]
	s.mu.Unlock()
	// Only an object this stage uploaded, or a resumed build's leftover, is checked and taken
	// over, or removed; under any other name the conditional upload refuses another build's.
	mine := recorded || s.resumed
	ok, exists := false, false
	if mine {
		var err error
		if ok, exists, err = s.stored(name, fe); err != nil {
			return err
		}
	}
	if !ok {
		// This build's object under the name, not the file, is removed first; where there is
		// none, no request is spent on it.
		if mine && exists {
			// Unless another build has taken OUT over: the object is then its upload.
			if err := s.Owned(s.ctx); err != nil {
				return err
			}
			if err := s.b.Remove(s.ctx, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		s.mu.Lock()
		s.sending[name] = true
		s.mu.Unlock()
		opts := PublishOptions{PartSent: s.opts.PartSent}
		w, err := s.b.upload(s.ctx, dir, fe, name, opts, func(int64) {})
		if errors.Is(err, fs.ErrExist) {
			s.mu.Lock()
			delete(s.sending, name) // another build's object: never removed by this one
			s.mu.Unlock()
		}
		if err != nil {
			return err
		}
		// The ETag recorded is the one the commit answered, or else a HEAD's; the bytes are
		// checked by the store (verified) or read back.
		etag := w.etag
		if etag == "" {
			etag, err = s.b.etag(s.ctx, name)
		}
		if err == nil && !s.b.verified(s.ctx, w) {
			err = s.b.checkObject(s.ctx, name, fe.Size, fe.SHA256)
		}
		if err == nil {
			err = s.record(name, sentObject{Size: fe.Size, SHA256: fe.SHA256, ETag: etag})
		}
		if err != nil {
			s.b.removeAll([]string{w.key}) // not recorded: no build would know it is this one's
			return err
		}
	}
	return os.Remove(filepath.Join(dir, filepath.FromSlash(fe.Path)))
}

// Busy is the time during which at least one Put was running: the uploads' share of the
// build's time (they overlap the writing of the next shards).
func (s *StreamStage) Busy() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy > 0 {
		return s.busyTotal + time.Since(s.busySince)
	}
	return s.busyTotal
}

// record adds an upload to the record and saves it.
func (s *StreamStage) record(name string, o sentObject) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sending, name)
	s.st.Sent[name] = o
	return s.save()
}

// stored reports whether the object name is the file fe, uploaded before: its size and ETag as
// recorded with fe's SHA-256, or, where nothing is recorded, its bytes read back; and whether
// there is an object of that name at all (no object: false, false).
func (s *StreamStage) stored(name string, fe shard.FileEntry) (match, exists bool, err error) {
	s.mu.Lock()
	rec, ok := s.st.Sent[name]
	s.mu.Unlock()
	etag, err := s.b.etag(s.ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	if ok {
		return rec.Size == fe.Size && strings.EqualFold(rec.SHA256, fe.SHA256) && rec.ETag == etag, true, nil
	}
	if s.b.checkObject(s.ctx, name, fe.Size, fe.SHA256) != nil {
		return false, true, nil
	}
	return true, true, s.record(name, sentObject{Size: fe.Size, SHA256: fe.SHA256, ETag: etag})
}

// StoredDamagedError is the error of Keep where a file of the checkpoint is missing from the
// store or is not what was uploaded; it matches ErrStoredDamaged.
type StoredDamagedError struct {
	Err error
	// Records is how many records the checkpoint's files before it hold: a resume may go on
	// from an earlier checkpoint that holds no more (pipeline.CutJournal).
	Records int64
}

func (e *StoredDamagedError) Error() string { return e.Err.Error() }
func (e *StoredDamagedError) Unwrap() error { return e.Err }

// Keep checks that every file of files (a resumed build's checkpoint) is in the store as it
// was uploaded (stored), or fails with a StoredDamagedError naming the first that is not, and
// removes the other objects of this build under the stage's generation (uploaded after the
// checkpoint), so that the resumed build writes them anew; where another build has taken OUT
// over meanwhile, it deletes nothing and fails matching ErrTakenOver.
func (s *StreamStage) Keep(files []shard.FileEntry) error {
	keep := map[string]bool{}
	var records int64
	for _, fe := range files {
		name := s.st.Gen + fe.Path
		ok, _, err := s.stored(name, fe)
		if err != nil {
			return err
		}
		if !ok {
			return &StoredDamagedError{Records: records, Err: fmt.Errorf("%s: %w (the checkpoint recorded %d bytes, SHA-256 %s)", s.b.objURL(s.b.url.keyPrefix()+name), ErrStoredDamaged, fe.Size, fe.SHA256)}
		}
		keep[name] = true
		records += fe.Records
	}
	// Reading the kept files back takes a while: a resume elsewhere may have taken OUT over
	// meanwhile, and the objects past the checkpoint are then its uploads, not to be deleted.
	if err := s.Owned(s.ctx); err != nil {
		return err
	}
	var others []string
	err := s.b.List(s.ctx, func(fi storage.FileInfo) error {
		if keep[fi.Name] || !DatasetFileName(fi.Name) || !strings.HasPrefix(fi.Name, s.st.Gen) {
			return nil
		}
		if rest := strings.TrimPrefix(fi.Name, s.st.Gen); strings.Contains(rest, "/") || rest == shard.ManifestName {
			return nil // another generation's, or the manifest of the dataset replaced
		}
		others = append(others, s.b.url.keyPrefix()+fi.Name)
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.b.deleteKeys(s.ctx, others); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.st.Sent {
		if !keep[name] {
			delete(s.st.Sent, name)
		}
	}
	return s.save()
}

// Publish uploads the files of the dataset in Dir that were not handed to Put (none, for the
// shards format) and the manifest last, as Stage's Publish does, replacing a dataset there
// where the stage was opened with Force.
func (s *StreamStage) Publish(ctx context.Context) error {
	m, err := shard.ReadManifest(s.Dir())
	if err != nil {
		return err
	}
	manifest, err := os.ReadFile(filepath.Join(s.Dir(), shard.ManifestName))
	if err != nil {
		return err
	}
	if err := s.checkSent(ctx, m.Files); err != nil {
		return err
	}
	opts := PublishOptions{Replace: s.old != nil, Formats: s.opts.Formats, Warn: s.opts.Warn, Progress: s.opts.Progress, PartSent: s.opts.PartSent, Command: s.opts.Command}
	// The checkpoint goes before the manifest: no published dataset has one beside it.
	opts.beforeManifest = s.dropCheckpoint
	return s.b.publish(ctx, s.Dir(), m, manifest, opts, s.old, s.st.Gen, func(fe shard.FileEntry) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		rec, ok := s.st.Sent[s.st.Gen+fe.Path]
		return ok && rec.Size == fe.Size && strings.EqualFold(rec.SHA256, fe.SHA256)
	})
}

// checkSent checks, just before the manifest is written, that each of files uploaded as the
// build went is still the object it uploaded (a HEAD: the ETag recorded), opts.Parallel at a
// time: the objects wait below the prefix without a manifest for as long as the build runs, and
// what happens to them meanwhile (a build of the same OUT elsewhere with --force clears them as
// leftovers; someone deletes or overwrites one) must not be published as the dataset. A
// missing or changed object fails the publish, matching ErrSentChanged and naming it.
func (s *StreamStage) checkSent(ctx context.Context, files []shard.FileEntry) error {
	var names []string
	var recs []sentObject
	s.mu.Lock()
	for _, fe := range files {
		if rec, ok := s.st.Sent[s.st.Gen+fe.Path]; ok { // else uploaded by the publish, and read back there
			names, recs = append(names, s.st.Gen+fe.Path), append(recs, rec)
		}
	}
	s.mu.Unlock()
	errs := make([]error, len(names))
	sem := make(chan struct{}, s.b.opts.Parallel)
	var wg sync.WaitGroup
	for i, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			etag, err := s.b.etag(ctx, name)
			switch {
			case err != nil && !errors.Is(err, fs.ErrNotExist):
				errs[i] = err
			case err != nil || etag != recs[i].ETag:
				what := "it is gone"
				if err == nil {
					what = fmt.Sprintf("its ETag is %s, the upload's was %s", etag, recs[i].ETag)
				}
				errs[i] = fmt.Errorf("%s: %w (%s): nothing is published; was another build of this OUT run, or the prefix cleared, while this one ran?", s.b.objURL(s.b.url.keyPrefix()+name), ErrSentChanged, what)
			}
		})
	}
	wg.Wait()
	var first error
	n := 0
	for _, err := range errs {
		if err != nil {
			if n++; first == nil {
				first = err
			}
		}
	}
	if n > 1 {
		return fmt.Errorf("%w (and %d more objects changed)", first, n-1)
	}
	return first
}

// RemoveUploads deletes the build's checkpoint and then the objects Put uploaded or was
// uploading (a build that failed), on a context of its own, and forgets them. Where the
// checkpoint cannot be deleted as this build's (another build took the prefix over: the
// objects under these names are the other one's now, maybe its published dataset's; or it
// cannot be read) nothing is deleted.
func (s *StreamStage) RemoveUploads() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if s.dropCheckpoint(ctx) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for name := range s.st.Sent {
		keys = append(keys, s.b.url.keyPrefix()+name)
	}
	for name := range s.sending {
		keys = append(keys, s.b.url.keyPrefix()+name)
	}
	s.sending = map[string]bool{}
	s.b.removeAll(keys)
	s.st.Sent = map[string]sentObject{}
	s.save()
}

// Owned is nil while this build owns the prefix (the checkpoint there is the one it last
// wrote, or it deleted its own before the manifest), and otherwise an error matching
// ErrTakenOver naming the owner now.
func (s *StreamStage) Owned(ctx context.Context) error {
	s.mu.Lock()
	etag := s.st.CheckpointETag
	s.mu.Unlock()
	if etag == "" {
		return nil
	}
	data, now, err := s.b.readControl(ctx, CheckpointName)
	if err != nil {
		return err
	}
	if now != etag {
		return fmt.Errorf("%s: %w: %s", s.b.objURL(s.b.url.keyPrefix()+CheckpointName), ErrTakenOver, s.b.controlOwner(data))
	}
	return nil
}

// Release releases the local folder's lock and leaves it, record included, for a resumed build.
func (s *StreamStage) Release() { s.staging.Release() }

// Discard removes the local folder, record included, and releases its lock.
func (s *StreamStage) Discard() error { return s.staging.Remove() }
