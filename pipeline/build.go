package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// Version is the packer version recorded in every manifest.
const Version = "0.2.0"

// OnError policies for bad inputs.
const (
	OnErrorSkip = "skip" // list the input in the manifest's skipped and go on
	OnErrorFail = "fail" // stop the build with an error naming the input
)

// StagingSuffix names the directory a build writes into before it is renamed to OUT.
const StagingSuffix = ".packer-partial"

// Options configures a build. The zero value of every optional field is a documented default.
type Options struct {
	Source    source.Source
	Transform transforms.Compiled
	Output    output.Entry                             // the output format (its New creates the Output)
	Out       string                                   // output directory
	Force     bool                                     // replace an existing OUT atomically
	Formats   []string                                 // the output format names the caller knows (Force replaces a dataset of one); empty: Output's name
	Workers   int                                      // decode/transform goroutines; 0 = GOMAXPROCS
	OnError   string                                   // OnErrorSkip (default) or OnErrorFail
	MaxErrors int                                      // abort when more inputs than this are skipped; 0 = no limit
	ShardSize int64                                    // shard byte budget (output.Config.ShardSize); 0 = the format's default
	Progress  func(items, total, records, bytes int64) // called from the writer goroutine after each item
	Device    string                                   // recorded in the summary only
	// Prefetch, when set, is told of each input the build will decode, in order, as soon as it
	// is enumerated (and is the build's: a part's own, not one a resume skips), so that it
	// can start fetching the input's bytes before a worker asks for them (the s3:// sources).
	Prefetch func(source.Item)
	// Files, when set, is what the source reads its inputs through (source.Options.Files: the
	// view of an s3:// source): the stamps of the inputs (size and time, for a part's and a
	// resume's checks and digests) are then its listing's (source.StatStamp), as the view's
	// files may not be made on disk.
	Files source.Files

	// ChecksumBlock is the checksum block byte target of shards (output.Config.ChecksumBlock,
	// shard.WriterOptions.BlockTarget); 0 = the format's default.
	ChecksumBlock int64
	// CutInputs, when > 0, ends a shard at every CutInputs-th input of the source order too
	// (output.Config.CutInputs; the shards format only), and splits a Part at a multiple of
	// it, so that a part's shards are the whole build's and Merge moves them into place
	// instead of writing them anew. 0: shards end at the byte budget only.
	CutInputs int64

	// Resizer, when set, transforms frames in batches (on a GPU) instead of each worker's
	// transforms.Worker; it must produce the same bytes (the gpu package guarantees it).
	Resizer BatchResizer
	// Inputs are the paths the source reads as given on the command line (the source folder
	// or file, a list file): Build refuses, before touching anything, an OUT that is one of
	// them, contains one or lies inside one. Enumerated items (Item.Path) are checked too.
	Inputs []string
	// Part, when set, builds only that part of the source's inputs (see Part and Merge); the
	// Output is then the shards format, whatever Part.Final is.
	Part *Part
	// Resume continues an interrupted build of the same OUT from its last checkpoint (see
	// resume.go) when its staging folder holds one; otherwise the build starts from the
	// beginning (Summary.Resumed is nil).
	Resume bool
	// CheckpointEvery is the least time between two checkpoints (each costs a wait for the
	// last shard's commit and a synced journal write); 0 checkpoints at every shard. An
	// interrupted build redoes at most about this much work, plus one shard.
	CheckpointEvery time.Duration
	// Shuffle, when set, writes the records in a seeded permutation of the inputs (see
	// shuffle.go) and records it in the manifest's source spec; nil writes them in source
	// order.
	Shuffle *Shuffle
	// Store, when set, takes the output's files as they are finished (output.Config.Store:
	// an object-store OUT's uploads); the committed OUT then holds the manifest and the files
	// the output did not hand to it.
	Store output.FileStore
	// SaveCheckpoint, when set, is given each checkpoint's resume journal (sealed, as written
	// to JournalName in the staging folder) once it is written, to keep a copy elsewhere (an
	// object-store OUT keeps it in the bucket, so that a resume on another machine finds it).
	// Its error fails the build.
	SaveCheckpoint func(journal []byte) error
}

// BatchResizer transforms many frames in one call, with exactly the bytes of
// transforms.Worker.Apply. Run must be safe for concurrent use.
type BatchResizer interface {
	Run(imgs []transforms.Image, dsts [][]byte) error
}

// A WindowResizer is a BatchResizer that also takes region-decoded frames: imgs[i] holds
// wins[i] of its full image, and dsts[i] gets exactly the bytes of
// transforms.Worker.ApplyWindow. With one, Build keeps region decoding on the CPU (the
// DecodePlan asks sources for windows) on the batch path too.
type WindowResizer interface {
	BatchResizer
	RunWindows(imgs []transforms.Image, wins []source.Window, dsts [][]byte) error
}

// A FrameStager is a BatchResizer that provides the memory decoded frames wait in until
// their Run (or RunWindows) call: the batch worker copies each decoded frame or window into a
// Frame (a Source may reuse its buffers after emit), and the resizer reads it from there with
// no further host copy (gpu.Resizer: pinned memory the device uploads from). Frame must not
// block and may hand out ordinary memory. The worker calls release exactly once per frame,
// after the call that reads it has returned, or when it will not be run.
type FrameStager interface {
	BatchResizer
	Frame(n int) (pix []byte, release func())
}

// deviceGroup is how many items a worker decodes before handing their frames to a
// BatchResizer in one call; deviceGroupBytes caps the raw bytes of such a group. The
// resizer merges the calls of concurrent workers into larger device batches.
const (
	deviceGroup      = 16
	deviceGroupBytes = 32 << 20
)

// Summary reports what a build did.
type Summary struct {
	Out       string
	Records   int64
	Items     int64
	Bytes     int64          // record bytes written
	Skipped   int64          // inputs skipped
	Reasons   map[string]int // skipped inputs by reason kind
	Elapsed   time.Duration
	Manifest  *shard.Manifest
	FileBytes int64       // total size of the data files
	Resumed   *ResumeInfo // set when the build went on from an interrupted build's checkpoint
}

// ErrTooManyErrors is returned when more inputs than Options.MaxErrors were skipped.
var ErrTooManyErrors = errors.New("too many bad inputs")

// CheckpointKeptError is the error of an interrupted build that kept its last checkpoint in
// Staging for a run of the same build with --resume; Err is why it stopped.
type CheckpointKeptError struct {
	Err     error
	Staging string
}

func (e *CheckpointKeptError) Error() string {
	return fmt.Sprintf("%v (%s)", e.Err, e.Advice())
}

// Advice says where the checkpoint is and how to go on from it.
func (e *CheckpointKeptError) Advice() string {
	return fmt.Sprintf("its last checkpoint is kept in %s: run the same build with --resume to continue from it", e.Staging)
}

func (e *CheckpointKeptError) Unwrap() error { return e.Err }

// ErrOutputExists is returned when OUT exists, is not empty and Force is not set.
var ErrOutputExists = errors.New("output directory exists (use --force to replace it)")

// ErrOutputNotDataset is returned when OUT is a folder that is not empty and holds no packer
// dataset (nor part): --force replaces only those.
var ErrOutputNotDataset = errors.New("it is not a packer dataset, and --force replaces only a packer dataset (or part) or an empty folder")

// ErrOutputFile is returned when OUT is a file: a dataset is a folder, and no build replaces a
// file, --force or not.
var ErrOutputFile = errors.New("it is a file, not a folder (a dataset is written as a folder, and packer never replaces a file): give another -o")

// Build runs a whole build: enumerate, decode and transform in parallel, write in source order,
// then commit the output directory atomically with its manifest last.
func Build(ctx context.Context, opts Options) (*Summary, error) {
	start := time.Now()
	if opts.Source == nil || opts.Output.New == nil {
		panic("pipeline: Build needs a Source and an Output entry")
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.OnError == "" {
		opts.OnError = OnErrorSkip
	}
	if opts.OnError != OnErrorSkip && opts.OnError != OnErrorFail {
		return nil, fmt.Errorf("unknown --on-error policy %q (want skip or fail)", opts.OnError)
	}
	tspec := opts.Transform
	if opts.Shuffle != nil {
		opts.Source = shuffled(opts.Source, *opts.Shuffle)
	}
	if ps, ok := opts.Source.(source.PlannedSource); ok {
		_, direct := opts.Source.(source.DirectSource)
		_, windowed := opts.Resizer.(WindowResizer)
		ps.PlanDecode(source.DecodePlan{Transform: tspec, Windows: (opts.Resizer == nil || windowed) && !direct})
	}
	// The records' spec is decided here, before anything is decoded; a format that cannot
	// hold it is refused before anything is written.
	spec := DatasetSpec(opts.Source, tspec)
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("sample spec: %w", err)
	}
	if err := opts.Output.CheckSpec(spec); err != nil {
		return nil, err
	}
	info0 := opts.Source.Info()
	if len(info0.Fields) > 0 && info0.ClipLen > 0 {
		return nil, ErrFieldsClips
	}
	fields := datasetFields(info0, tspec)
	if opts.CutInputs < 0 || opts.CutInputs > 0 && opts.Output.Name != shard.FormatShards {
		return nil, fmt.Errorf("--cut-inputs %d: %w", opts.CutInputs, ErrCutInputs)
	}
	if p := opts.Part; p != nil {
		if p.Count < 1 || p.Index < 0 || p.Index >= p.Count {
			return nil, fmt.Errorf("part %d/%d: want 0 <= I < N", p.Index, p.Count)
		}
		if p.Final.New == nil {
			panic("pipeline: a Part needs its Final output entry")
		}
		if err := p.Final.CheckSpec(spec); err != nil {
			return nil, err
		}
	}
	sum, err := intoOut(opts.Out, replacing{force: opts.Force, formats: knownFormats(opts.Formats, opts.Output), part: opts.Part}, opts.Inputs, opts.Resume, func(paths outPaths, resuming bool) (*Summary, error) {
		info := opts.Source.Info()
		// Enumerated inputs are checked against OUT, the staging folder (now existing) and the
		// old-output name as they come (a link in the source may point into OUT).
		b := &builder{opts: opts, info: info, tspec: tspec, spec: spec, fields: fields, fplan: newFieldPlan(fields, tspec),
			staging: paths.staging, guard: newGuard(paths), started: start}
		if opts.Part != nil {
			total := info.Count
			if total < 0 {
				// The source does not know its size: a first pass counts the inputs.
				total = 0
				if err := opts.Source.Enumerate(ctx, func(source.Item) error { total++; return nil }); err != nil {
					return nil, err
				}
			}
			b.part = newPartRange(*opts.Part, total, opts.CutInputs)
			b.part.content.files = opts.Files
			if old := recordedPart(paths.out); old != nil {
				// --force over the same part (intoOut checked its index and count).
				if err := b.part.replacing(paths.out, old); err != nil {
					return nil, err
				}
			}
		}
		if resuming {
			j, err := b.loadJournal(paths.staging)
			if err != nil {
				return nil, err
			}
			b.resume = j
		}
		return b.run(ctx)
	})
	if err != nil {
		return nil, err
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// intoOut runs write with a fresh staging folder beside OUT and publishes it as OUT: the output
// directory handling of Build and Merge. Nothing beside OUT is created or removed before OUT is
// checked against inputs (overlap) and the mount check; OUT's lock is held throughout; what an
// interrupted build left is recovered; a non-empty OUT needs force; the staging folder is
// removed unless it was published or the build was interrupted with a resume journal there. With resume, an interrupted
// build's staging folder that holds a journal is kept and write is told so (resuming). The
// summary gets OUT's path.
func intoOut(out string, force replacing, inputs []string, resume bool, write func(paths outPaths, resuming bool) (*Summary, error)) (*Summary, error) {
	paths, err := newOutPaths(out)
	if err != nil {
		return nil, err
	}
	g := newGuard(paths)
	for _, in := range inputs {
		if err := g.checkInput(in); err != nil {
			return nil, err
		}
	}
	if err := checkMount(paths); err != nil {
		return nil, err
	}
	lock, err := lockOut(paths)
	if err != nil {
		return nil, err
	}
	defer lock.release()
	if err := checkStagedPart(paths.staging, force.part); err != nil {
		return nil, err
	}
	resuming := resume && exists(filepath.Join(paths.staging, JournalName))
	if resuming {
		if err := checkStaging(paths.staging); err != nil {
			return nil, err
		}
	}
	if err := recoverOut(paths, resuming); err != nil {
		return nil, err
	}
	if err := checkOut(paths.out, force); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(paths.staging, 0o755); err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	committed, keep := false, false
	defer func() {
		if !committed && !keep {
			os.RemoveAll(paths.staging)
		}
	}()
	sum, err := write(paths, resuming)
	if err != nil {
		// An interrupted build (SIGINT, SIGTERM: a preempted job) keeps its last checkpoint for
		// --resume, as a killed one does; a build that failed is removed whole.
		// A refused resume leaves the checkpoint for the build it belongs to.
		interrupted := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
		if (interrupted || errors.Is(err, ErrResume)) && exists(filepath.Join(paths.staging, JournalName)) {
			keep = true
			if interrupted {
				return nil, &CheckpointKeptError{Err: err, Staging: paths.staging}
			}
		}
		return nil, err
	}
	if err := emptyTrash(paths); err != nil {
		return nil, fmt.Errorf("remove the leftovers of an earlier build: %w", err)
	}
	swapped, err := commitDir(paths, force)
	committed = swapped
	if err != nil {
		return nil, err
	}
	sum.Out = paths.out
	return sum, nil
}

// replacing is what decides whether a build may replace a non-empty OUT: force (--force),
// the format names a packer dataset there may have (the command's table of outputs), and the
// part the build writes (nil: a whole dataset), which alone may replace a part at OUT or its
// checkpoint (partid.go).
type replacing struct {
	force   bool
	formats []string
	part    *Part
}

// knownFormats are the format names a dataset that --force replaces may have: formats, or
// where the caller gave none, the output's own.
func knownFormats(formats []string, out output.Entry) []string {
	if len(formats) == 0 {
		return []string{out.Name}
	}
	return formats
}

// checkOut refuses to overwrite a non-empty output directory without force, and with force
// one that holds no packer dataset; a file is refused either way.
func checkOut(out string, force replacing) error {
	st, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: %w", out, ErrOutputFile)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		return nil
	}
	if !force.force {
		return fmt.Errorf("%s: %w", out, ErrOutputExists)
	}
	if why := notDataset(out, force.formats); why != "" {
		return fmt.Errorf("%s: %w (%s); move or remove it yourself if it is to go", out, ErrOutputNotDataset, why)
	}
	return checkReplacedPart(out, force.part)
}

// notDataset says why the non-empty folder dir does not hold a packer dataset, or "" when it
// does: its manifest.json is a regular file holding a JSON object with packer's own members (a
// packer version, one of the format names formats, a list of files), and every other entry is a file the
// manifest lists or one a build writes (a shard, an npy column, the HDF5 file): --force never
// deletes what packer did not write. The seal and the files' contents are not checked: a
// damaged dataset may be replaced.
func notDataset(dir string, formats []string) string {
	p := filepath.Join(dir, shard.ManifestName)
	st, err := os.Lstat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "it holds no " + shard.ManifestName
	case err != nil:
		return err.Error()
	case !st.Mode().IsRegular():
		return shard.ManifestName + " is not a regular file"
	case st.Size() > shard.MaxManifestSize:
		return shard.ManifestName + " is larger than any manifest packer writes"
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	var m struct {
		Packer *string `json:"packer"`
		Format *string `json:"format"`
		Files  []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if json.Unmarshal(data, &m) != nil || m.Packer == nil || *m.Packer == "" || m.Files == nil || m.Format == nil ||
		!slices.Contains(formats, *m.Format) {
		return "its " + shard.ManifestName + " is not a packer manifest"
	}
	listed := map[string]bool{shard.ManifestName: true}
	for _, f := range m.Files {
		listed[f.Path] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var foreign []string
	for _, e := range ents {
		if e.IsDir() && generationFolder(filepath.Join(dir, e.Name())) {
			continue
		}
		if !e.Type().IsRegular() || !listed[e.Name()] && !datasetFileName(e.Name()) {
			foreign = append(foreign, e.Name())
		}
	}
	switch {
	case len(foreign) > 3:
		return fmt.Sprintf("it holds %s and %d more entries packer did not write", strings.Join(foreign[:3], ", "), len(foreign)-3)
	case len(foreign) > 0:
		return fmt.Sprintf("it holds %s, which packer did not write", strings.Join(foreign, ", "))
	}
	return ""
}

// generationPrefix starts the name of the generation folder of a dataset packer published to
// an object store over an earlier one (s3.GenerationPrefix; a test checks they agree):
// .packer-gen-<16 hex digits>/.
const generationPrefix = ".packer-gen-"

// generationFolder reports whether dir is a generation folder as a copy of an object-store
// dataset's objects has it locally: named so, and holding only regular files with the names
// of a dataset's data files.
func generationFolder(dir string) bool {
	hexs, ok := strings.CutPrefix(filepath.Base(dir), generationPrefix)
	if !ok || len(hexs) != 16 || strings.Trim(hexs, "0123456789abcdefABCDEF") != "" {
		return false
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == shard.ManifestName || !datasetFileName(e.Name()) {
			return false
		}
	}
	return true
}

// datasetFileName reports whether name is one an output format writes at the top of a dataset
// folder (as s3.DatasetFileName, without the object-store generations).
func datasetFileName(name string) bool {
	switch name {
	case "images.npy", "labels.npy", "meta.jsonl", "data.h5":
		return true
	}
	return strings.HasPrefix(name, "shard-") && strings.HasSuffix(name, ".pks") ||
		strings.HasPrefix(name, "aux_") && strings.HasSuffix(name, ".npy")
}

type builder struct {
	opts    Options
	info    source.SourceInfo
	tspec   transforms.Compiled
	spec    shard.SampleSpec // every record's spec, decided before the build (DatasetSpec)
	fields  []shard.Field    // the dataset's fields (datasetFields); nil for none
	fplan   *fieldPlan       // how workers map the fields' values; nil for none
	staging string
	guard   *guard // refuses enumerated inputs inside the output names

	pool  sync.Pool // record buffers (*[]byte)
	rpool sync.Pool // result batches (*[]result)

	direct     source.DirectSource // set when items decode straight into record buffers
	directSpec shard.SampleSpec
	directSize int

	part       *partRange   // the part's range of inputs, for a build in parts
	resume     *journal     // the checkpoint a resumed build goes on from
	started    time.Time    // when this build started (its checkpoints record it)
	enumerated atomic.Int64 // items the source emitted (see checkInputs)
	enumDone   atomic.Bool  // Enumerate returned nil and every item was handed on
}

// windowBytes bounds the record bytes the jobs queued behind the one the writer waits for may
// hold (window).
const windowBytes = 64 << 20

// window is how many jobs may be in flight between the enumerator and the writer: the reorder
// window. With only two per worker, one slow item (a large photo) at the head lets the other
// workers finish the few items behind it and then wait, idle, for the writer to move on; a
// wider window keeps them busy. Each queued job can hold up to 9 result batches (its channel's
// 8 and one being filled) of at least groupBytes, or of one record when records are larger, so
// the window widens only as far as windowBytes allows, and only when every item yields one
// record of a known size: not for video and frame folders, whose items yield many clips.
func (b *builder) window() int {
	n := 2 * b.opts.Workers
	if b.info.ClipLen > 0 || b.info.Kind == "video" || b.info.Kind == "frames" || !b.spec.Fixed() || b.opts.Resizer != nil {
		return n
	}
	per := 9 * max(int64(groupBytes), b.spec.Size())
	return n + int(min(64, windowBytes/per))
}

func (b *builder) run(ctx context.Context) (*Summary, error) {
	g, ctx := errgroup.WithContext(ctx)
	jobs := make(chan job, b.opts.Workers)
	ordered := make(chan chan []result, b.window())
	b.setDirect()

	g.Go(func() error {
		defer close(jobs)
		defer close(ordered)
		var group []source.Item
		var groupSize int
		flush := func() error {
			if len(group) == 0 {
				return nil
			}
			res := make(chan []result, 8)
			select {
			case ordered <- res:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case jobs <- job{items: group, res: res}:
			case <-ctx.Done():
				return ctx.Err()
			}
			group, groupSize = nil, 0
			return nil
		}
		var rs *resumeSkip
		if b.resume != nil {
			rs = newResumeSkip(b.resume, b.opts.Inputs)
			rs.files = b.opts.Files
		}
		enumerate := b.opts.Source.Enumerate
		if pe, ok := b.opts.Source.(partEnumerator); ok && b.part != nil {
			enumerate = func(ctx context.Context, emit func(source.Item) error) error {
				return pe.enumeratePart(ctx, b.part, emit)
			}
		}
		err := enumerate(ctx, func(it source.Item) error {
			if b.part != nil && !b.part.see(it) {
				return nil
			}
			n := b.enumerated.Add(1) - 1
			if it.Path != "" && b.guard != nil {
				if err := b.guard.checkInput(it.Path); err != nil {
					return err
				}
			}
			if rs != nil {
				if skip, err := rs.skip(n, it); skip || err != nil {
					return err
				}
			}
			if b.opts.Prefetch != nil {
				b.opts.Prefetch(it)
			}
			group = append(group, it)
			groupSize += len(it.Raw)
			var full bool
			if b.opts.Resizer != nil {
				// A device group is bounded by its item count (what a worker holds decoded),
				// not by the CPU path's small raw budget, which let 1 to 3 pre-read HD
				// JPEGs make a whole device call.
				full = groupSize >= deviceGroupBytes || len(group) >= deviceGroup
			} else {
				full = groupSize >= groupBytes || len(group) >= maxGroup || it.Raw == nil
			}
			if full {
				return flush()
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := flush(); err != nil {
			return err
		}
		if b.part != nil {
			if err := b.part.done(); err != nil {
				return err
			}
		}
		if rs != nil {
			if err := rs.done(b.enumerated.Load()); err != nil {
				return err
			}
		}
		b.enumDone.Store(true) // before ordered is closed
		return nil
	})
	for w := 0; w < b.opts.Workers; w++ {
		g.Go(func() error { return b.worker(ctx, jobs) })
	}
	var sum *Summary
	g.Go(func() error {
		var err error
		sum, err = b.write(ctx, ordered)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return sum, nil
}

// WriteManifest writes dir/manifest.json through a temporary name, synced, then renamed.
func WriteManifest(dir string, m *shard.Manifest) error {
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	return fileutil.WriteFileAtomic(filepath.Join(dir, shard.ManifestName), data)
}

// SortedKeys returns the keys of m in order (for deterministic summaries).
func SortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
