package shards

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// Entry is the output format entry of --format shards, for the command's table of formats.
// verify checks shard files itself (header, index, footer and checksums), so Check is nil.
var Entry = output.Entry{
	Name:     shard.FormatShards,
	New:      New,
	Version:  Version,
	Resume:   Resume,
	CutState: CutState,
	Open:     output.OpenShardDataset,
	// A shard holds every kind of field (FORMAT.md, "Fields"): only what every format checks
	// (Entry.CheckFields) is refused.
	FieldCheck: func(shard.Field) error { return nil },
}

// DefaultShardSize is the default byte budget of one shard's data section.
const DefaultShardSize = 256 << 20

// ShardName returns the file name of shard k (FORMAT.md, "Dataset").
func ShardName(k int) string { return fmt.Sprintf("shard-%05d.pks", k) }

// Version is the manifest's format_version of a dataset of sample spec spec: the highest shard
// format version among its shards (FORMAT.md, Versioning). Shards of a variable-size spec are
// version 2, all others version 1.
func Version(spec shard.SampleSpec) int { return shard.DatasetVersion(spec, nil) }

// shardOutput writes the native shard format, starting a new shard when the next record would
// take the current shard's data section past the byte budget.
type shardOutput struct {
	cfg   output.Config
	files []shard.FileEntry
	next  int64 // first record of the current shard
	// cut is the chunk and piece of the current (or, between shards, the last) shard of an
	// output with cfg.CutInputs; nil before the first.
	cut *shard.ShardCut

	sink *sink
	w    *shard.Writer
	name string
	err  error
	sync syncer

	checkpoint func(state []byte) error // output.Checkpointer
	every      time.Duration            // the least time between two checkpoints
	last       time.Time                // when the last checkpoint was taken (or SetCheckpoint called)
	kept       int                      // files[:kept] are in the last checkpoint: Abort keeps them

	cached bool // shards opened from now on are written through the page cache (WriteFrom)

	pool     *chunkPool     // the buffers of every sink of this output
	mu       sync.Mutex     // guards sums
	sums     map[int]string // SHA-256 of files[k], set when its sink has hashed every byte
	aborting atomic.Bool    // Abort was called: shards still finishing are removed, not committed

	// stored bounds the finished shards whose Put (cfg.Store) has not returned: the build
	// writer waits for a slot before it finishes a shard, so that local disk holds at most
	// maxStoring finished shards and the one being written.
	stored chan struct{}
}

// maxStoring is how many finished shards may wait for, or be in, their Put at once.
const maxStoring = 2

// maxLagShards bounds how many shards of data the build writer may hand to the sinks ahead of
// their hashing (the chunk pool's size): one shard per 8 cores, at least one, so that on a
// machine with many cores several shards are hashed at once while the build writer goes on.
func maxLagShards() int { return max(1, min(8, runtime.GOMAXPROCS(0)/8)) }

// poolChunks is the number of sinkChunk buffers of an output with shards of shardSize bytes: up
// to maxLagShards shards, at most 2 GiB.
func poolChunks(shardSize int64) int {
	lag := min(int64(maxLagShards())*shardSize, 2<<30)
	return int((lag + sinkChunk - 1) / sinkChunk)
}

// New returns the Output of --format shards (a ShardSize of 0 means DefaultShardSize).
func New(cfg output.Config) (output.Output, error) {
	if cfg.ShardSize <= 0 {
		cfg.ShardSize = DefaultShardSize
	}
	o := &shardOutput{cfg: cfg, pool: newChunkPool(poolChunks(cfg.ShardSize)), sums: map[int]string{}}
	if cfg.Store != nil {
		o.stored = make(chan struct{}, maxStoring)
	}
	return o, nil
}

func (o *shardOutput) open() error {
	k := len(o.files)
	o.name = ShardName(k)
	sk, err := newSinkDirect(o.cfg.Dir, o.name, !o.cached, o.pool)
	if err != nil {
		return err
	}
	o.sink = sk
	o.w, err = shard.NewWriter(sk, shard.WriterOptions{
		Sample: o.cfg.Sample, Label: o.cfg.Label, ShardIndex: k, HasMeta: o.cfg.HasMeta,
		Meta: map[string]any{"dataset": o.cfg.Meta}, Unbuffered: true, BlockTarget: o.cfg.ChecksumBlock,
		Fields: o.cfg.Fields, Cut: o.cut,
	})
	return err
}

// nextCut sets the chunk and piece of the shard the record of input in opens: the next piece
// of the last shard's chunk, or piece 0 of a new chunk.
func (o *shardOutput) nextCut(input int64) {
	c := input / o.cfg.CutInputs
	if o.cut != nil && o.cut.Chunk == c {
		o.cut = &shard.ShardCut{Chunk: c, Piece: o.cut.Piece + 1}
	} else {
		o.cut = &shard.ShardCut{Chunk: c}
	}
}

// finish completes the current shard: index and footer, then, in the background, the rest of
// its hashing and writing, fsync, re-open and check, and rename to the final name. The shard's
// SHA-256 goes into its FileEntry when the background work is done (collect).
func (o *shardOutput) finish() error {
	if err := o.w.Close(); err != nil {
		return err
	}
	// A shard finished earlier that failed in the background (a full disk) stops the build now,
	// not after every other shard is written.
	if err := o.sync.failed(); err != nil {
		return err
	}
	sk, k, name, n, size := o.sink, len(o.files), o.name, o.w.Len(), o.w.Size()
	sk.close()
	fe := shard.FileEntry{Path: name, Size: size, IndexSHA256: o.w.IndexSHA256(), Records: n, FirstRecord: o.next, Shard: o.cut}
	o.files = append(o.files, fe)
	o.next += n
	o.w, o.sink = nil, nil
	if o.stored != nil {
		o.stored <- struct{}{} // released when the shard's Put returns, or it fails before
	}
	o.sync.run(func() error {
		if o.stored != nil {
			defer func() { <-o.stored }()
		}
		sum, err := sk.wait()
		if err == nil && o.aborting.Load() {
			err = errors.New("output aborted")
		}
		if err == nil {
			err = commitShard(sk.p, name, n)
		}
		if err != nil {
			sk.p.Abort()
			return err
		}
		if o.cfg.Store != nil {
			fe.SHA256 = sum
			if err := o.cfg.Store.Put(o.cfg.Dir, fe); err != nil {
				return err
			}
		}
		o.mu.Lock()
		o.sums[k] = sum
		o.mu.Unlock()
		return nil
	})
	return nil
}

// collect waits until every finished shard is hashed, written and committed, and puts their
// SHA-256 into their FileEntries.
func (o *shardOutput) collect() error {
	if err := o.sync.wait(); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.files {
		if o.files[k].SHA256 != "" {
			continue
		}
		sum, ok := o.sums[k]
		if !ok {
			return fmt.Errorf("internal error: shard %s finished without its SHA-256", o.files[k].Path)
		}
		o.files[k].SHA256 = sum
		delete(o.sums, k)
	}
	return nil
}

// testHookCommit, set by tests, runs in a shard's check before it is committed; an error fails
// the commit as a failing disk would.
var testHookCommit func(name string) error

// commitShard syncs a finished shard file, re-reads its header, index and footer, and renames it
// (fileutil.Pending.Commit; Close syncs the directory once for all shards).
func commitShard(p *fileutil.Pending, name string, n int64) error {
	return p.Commit(func(f *os.File) error {
		if testHookCommit != nil {
			if err := testHookCommit(name); err != nil {
				return err
			}
		}
		r, err := shard.Open(f.Name())
		if err != nil {
			return fmt.Errorf("re-read the shard just written: %w", err)
		}
		got := int64(r.Len())
		if err := r.Close(); err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("shard %s: re-read %d records, wrote %d", name, got, n)
		}
		return nil
	})
}

// Format reports the format name and the version of its shards (shard.DatasetVersion: 3 with
// fields).
func (o *shardOutput) Format() (string, int) {
	if o.cfg.CutInputs > 0 {
		return shard.FormatShards, shard.CutVersion // every shard names its chunk and piece
	}
	return shard.FormatShards, shard.DatasetVersion(o.cfg.Sample, o.cfg.Fields)
}

func (o *shardOutput) Write(r output.Record) error {
	if o.err != nil {
		return o.err
	}
	// A record's bytes are its sample's and its fields' (FORMAT.md, "Fields"), as WriteFrom
	// counts them, so a merge splits shards where the build does.
	n := int64(len(r.Data))
	for _, f := range r.Fields {
		n += int64(len(f))
	}
	// With CutInputs a shard also ends where the record's input starts a new chunk.
	newChunk := o.cfg.CutInputs > 0 && o.cut != nil && r.Input/o.cfg.CutInputs != o.cut.Chunk
	if o.w != nil && o.w.Len() > 0 && (newChunk || o.w.DataSize()+n > o.cfg.ShardSize) {
		if o.err = o.finish(); o.err != nil {
			return o.err
		}
		if o.checkpoint != nil && time.Since(o.last) >= o.every {
			if o.err = o.checkpointNow(); o.err != nil {
				return o.err
			}
		}
	}
	if o.w == nil {
		if o.cfg.CutInputs > 0 {
			o.nextCut(r.Input)
		}
		if o.err = o.open(); o.err != nil {
			return o.err
		}
	}
	if len(o.cfg.Fields) > 0 {
		o.err = o.w.AppendFields(r.Data, r.Shape, r.Label, r.Aux, r.Meta, r.Fields)
	} else {
		o.err = o.w.AppendShape(r.Data, r.Shape, r.Label, r.Aux, r.Meta)
	}
	return o.err
}

// SetCheckpoint registers fn, called when a shard is complete, at most once per interval every
// (output.Checkpointer).
func (o *shardOutput) SetCheckpoint(every time.Duration, fn func(state []byte) error) {
	o.checkpoint, o.every, o.last = fn, every, time.Now()
}

// resumeState is what a checkpoint records: the shards complete, synced and renamed.
type resumeState struct {
	Files []shard.FileEntry `json:"files"`
}

// CutState is the checkpoint state state cut to the shards that hold its first records
// records (output.Entry.CutState).
func CutState(state []byte, records int64) ([]byte, error) {
	var st resumeState
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, fmt.Errorf("resume: the checkpoint's shard list: %w", err)
	}
	var n int64
	for k, fe := range st.Files {
		if n == records {
			st.Files = st.Files[:k]
			return json.Marshal(st)
		}
		n += fe.Records
	}
	if n != records {
		return nil, fmt.Errorf("resume: no shard of the checkpoint ends at record %d", records)
	}
	return json.Marshal(st)
}

// checkpointNow waits until every finished shard is hashed, written and committed and the
// directory synced, then hands their list to the checkpoint function. The wait costs the rest
// of the hashing and the commit of the shards still finishing.
func (o *shardOutput) checkpointNow() error {
	if err := o.collect(); err != nil {
		return err
	}
	if err := fileutil.SyncDir(o.cfg.Dir); err != nil {
		return err
	}
	state, err := json.Marshal(resumeState{Files: o.files})
	if err != nil {
		return err
	}
	if err := o.checkpoint(state); err != nil {
		return err
	}
	o.kept, o.last = len(o.files), time.Now()
	return nil
}

// Resume reopens the shards output of an interrupted build from a checkpoint's state
// (output.Entry.Resume): each shard the state lists must be a regular file in cfg.Dir with the
// size, record count and SHA-256 the checkpoint recorded when it was written (every kept byte is
// read once, the shards hashed in parallel), or the resume is refused naming the file (with a
// cfg.Store, the shards are the store's, and its Keep checks them instead); any other
// entry there (a shard finished after the checkpoint, a temporary file, anything else), except
// the engine's own files (output.EngineFilePrefix), is removed, and writing continues with the
// next shard.
func Resume(cfg output.Config, state []byte) (output.Output, error) {
	var st resumeState
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, fmt.Errorf("resume: the checkpoint's shard list: %w", err)
	}
	out, err := New(cfg)
	if err != nil {
		return nil, err
	}
	o := out.(*shardOutput)
	keep := map[string]bool{}
	for k, fe := range st.Files {
		if fe.Path != ShardName(k) || fe.FirstRecord != o.next || fe.Records < 0 {
			return nil, fmt.Errorf("resume: the checkpoint lists %s as shard %d from record %d; want %s from record %d",
				fe.Path, k, fe.FirstRecord, ShardName(k), o.next)
		}
		keep[fe.Path] = true
		o.next += fe.Records
	}
	check := func() error { return checkKeptAll(cfg.Dir, st.Files) }
	if cfg.Store != nil {
		// The kept shards are in the store, not in cfg.Dir.
		check = func() error { return cfg.Store.Keep(st.Files) }
	}
	if err := check(); err != nil {
		return nil, err
	}
	o.files, o.kept = st.Files, len(st.Files)
	if n := len(o.files); cfg.CutInputs > 0 && n > 0 {
		if o.cut = o.files[n-1].Shard; o.cut == nil {
			return nil, fmt.Errorf("resume: the checkpoint lists %s without its chunk and piece, and the build cuts at every %d inputs (build without --resume to start over)", o.files[n-1].Path, cfg.CutInputs)
		}
	}
	ents, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		n := e.Name()
		if keep[n] || strings.HasPrefix(n, output.EngineFilePrefix) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(cfg.Dir, n)); err != nil {
			return nil, fmt.Errorf("resume: remove %s, which is not in the checkpoint: %w", filepath.Join(cfg.Dir, n), err)
		}
	}
	if err := fileutil.SyncDir(cfg.Dir); err != nil {
		return nil, err
	}
	return o, nil
}

// checkKeptAll checks every shard a checkpoint lists (checkKept), several at once, and reports
// the first in order that fails, with how many others fail too.
func checkKeptAll(dir string, files []shard.FileEntry) error {
	errs := make([]error, len(files))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(files), runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(files) {
					return
				}
				errs[k] = checkKept(filepath.Join(dir, files[k].Path), files[k])
			}
		}()
	}
	wg.Wait()
	var first error
	others := 0
	for _, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		} else {
			others++
		}
	}
	if first != nil && others > 0 {
		return fmt.Errorf("%w (and %d more of the %d kept shards fail their check)", first, others, len(files))
	}
	return first
}

// checkKept checks a shard a checkpoint lists: a regular file, its size, what opening it checks
// (header, index, footer), its record count, and the SHA-256 of all its bytes.
func checkKept(p string, fe shard.FileEntry) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		what := "a special file"
		switch {
		case st.Mode()&os.ModeSymlink != 0:
			what = "a symbolic link"
		case st.IsDir():
			what = "a folder"
		}
		return fmt.Errorf("%s is %s, not a regular file: the checkpoint's shards are files the build wrote (build without --resume to start over)", p, what)
	}
	if st.Size() != fe.Size {
		return fmt.Errorf("%s: %d bytes, the checkpoint recorded %d (build without --resume to start over)", p, st.Size(), fe.Size)
	}
	r, err := shard.Open(p)
	if err != nil {
		return err
	}
	n := int64(r.Len())
	if err := r.Close(); err != nil {
		return err
	}
	if n != fe.Records {
		return fmt.Errorf("%s: %d records, the checkpoint recorded %d (build without --resume to start over)", p, n, fe.Records)
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	got, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if got != fe.Size {
		return fmt.Errorf("%s: read %d bytes, the checkpoint recorded %d", p, got, fe.Size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != fe.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s, the checkpoint recorded %s when the shard was written: the file was changed or damaged since (build without --resume to start over)", p, sum, fe.SHA256)
	}
	return nil
}

func (o *shardOutput) Close() ([]shard.FileEntry, error) {
	if o.err != nil {
		return nil, o.err
	}
	if o.w != nil {
		if o.err = o.finish(); o.err != nil {
			return nil, o.err
		}
	}
	if o.err = o.collect(); o.err != nil {
		return nil, o.err
	}
	if err := fileutil.SyncDir(o.cfg.Dir); err != nil {
		return nil, err
	}
	if o.files == nil {
		o.files = []shard.FileEntry{}
	}
	return o.files, nil
}

func (o *shardOutput) Abort() {
	o.aborting.Store(true)
	if o.sink != nil {
		o.sink.abort()
	}
	_ = o.sync.wait()
	// The shards of the last checkpoint stay for a resumed build to keep.
	for _, fe := range o.files[o.kept:] {
		os.Remove(filepath.Join(o.cfg.Dir, fe.Path))
	}
	o.err = errors.New("output aborted")
}
