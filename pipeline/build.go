package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/packer-dev/packer/shard"
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
	Source    Source
	Transform transforms.Spec
	Format    string                                   // "shards", "npy" or "hdf5"
	NewOutput func(cfg OutputConfig) (Output, error)   // creates the output for Format
	Out       string                                   // output directory
	Force     bool                                     // replace an existing OUT atomically
	Workers   int                                      // decode/transform goroutines; 0 = GOMAXPROCS
	OnError   string                                   // OnErrorSkip (default) or OnErrorFail
	MaxErrors int                                      // abort when more inputs than this are skipped; 0 = no limit
	ShardSize int64                                    // shard byte budget; 0 = DefaultShardSize
	Progress  func(items, total, records, bytes int64) // called from the writer goroutine after each item
	Device    string                                   // recorded in the summary only
	// Resizer, when set, transforms frames in batches (on a GPU) instead of each worker's
	// transforms.Worker; it must produce the same bytes (the gpu package guarantees it).
	Resizer BatchResizer
	// Inputs are the paths the source reads as given on the command line (the source folder
	// or file, a list file): Build refuses, before touching anything, an OUT that is one of
	// them, contains one or lies inside one. Enumerated items (Item.Path) are checked too.
	Inputs []string
}

// BatchResizer transforms many frames in one call, with exactly the bytes of
// transforms.Worker.Apply. Run must be safe for concurrent use.
type BatchResizer interface {
	Run(imgs []transforms.Image, dsts [][]byte) error
}

// deviceGroup is how many items a worker decodes before handing their frames to a
// BatchResizer in one call.
const deviceGroup = 16

// DefaultShardSize is the default byte budget of one shard's data section.
const DefaultShardSize = 256 << 20

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
	FileBytes int64 // total size of the data files
}

// InputError is a bad input: it is skipped with --on-error skip and fails the build otherwise.
type InputError struct {
	Input string
	Err   error
}

func (e *InputError) Error() string { return fmt.Sprintf("%s: %v", e.Input, e.Err) }
func (e *InputError) Unwrap() error { return e.Err }

// ErrTooManyErrors is returned when more inputs than Options.MaxErrors were skipped.
var ErrTooManyErrors = errors.New("too many bad inputs")

// ErrOutputExists is returned when OUT exists, is not empty and Force is not set.
var ErrOutputExists = errors.New("output directory exists (use --force to replace it)")

// job is a group of consecutive items handled by one worker; its records and one done marker
// per item go to res in order, in batches (see sender). Small items already read by the enumerator (CIFAR, IDX records)
// are grouped so the per-item cost of channel hand-offs is paid once per group.
type job struct {
	items []Item
	res   chan []result
}

// groupBytes is the raw size up to which enumerated items are grouped into one job.
const groupBytes = 256 << 10

// maxGroup bounds the items of one job.
const maxGroup = 256

// result is one record of an item, or the item's final status (done set).
type result struct {
	rec       Record
	spec      shard.SampleSpec
	buf       *[]byte
	name      string   // the item's name
	frameDsts [][]byte // per-frame slices of buf (batch worker only)
	done      bool
	err       error
	count     int // records produced, with done
}

// Build runs a whole build: enumerate, decode and transform in parallel, write in source order,
// then commit the output directory atomically with its manifest last.
func Build(ctx context.Context, opts Options) (*Summary, error) {
	start := time.Now()
	if opts.Source == nil || opts.NewOutput == nil {
		panic("pipeline: Build needs a Source and NewOutput")
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
	if opts.ShardSize <= 0 {
		opts.ShardSize = DefaultShardSize
	}
	tspec := opts.Transform.Normalized()
	if err := tspec.Validate(); err != nil {
		return nil, err
	}
	// The records' spec is decided here, before anything is decoded; a format that cannot
	// hold it is refused before anything is written.
	spec := DatasetSpec(opts.Source, tspec)
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("sample spec: %w", err)
	}
	if err := CheckFormatSpec(opts.Format, spec); err != nil {
		return nil, err
	}
	paths, err := newOutPaths(opts.Out)
	if err != nil {
		return nil, err
	}
	out, staging := paths.out, paths.staging
	// Nothing beside OUT is created or removed before these checks pass.
	g := newGuard(paths)
	for _, in := range opts.Inputs {
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
	if err := recoverOut(paths); err != nil {
		return nil, err
	}
	if err := checkOut(out, opts.Force); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(staging)
		}
	}()

	info := opts.Source.Info()
	// Enumerated inputs are checked against OUT, the staging folder (now existing) and the
	// old-output name as they come (a link in the source may point into OUT).
	b := &builder{opts: opts, info: info, tspec: tspec, spec: spec, staging: staging, guard: newGuard(paths)}
	sum, err := b.run(ctx)
	if err != nil {
		return nil, err
	}
	if err := emptyTrash(paths); err != nil {
		return nil, fmt.Errorf("remove the leftovers of an earlier build: %w", err)
	}
	swapped, err := commitDir(paths, opts.Force)
	committed = swapped
	if err != nil {
		return nil, err
	}
	sum.Out = out
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// checkOut refuses to overwrite a non-empty output directory without force.
func checkOut(out string, force bool) error {
	st, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: %w (it is a file)", out, ErrOutputExists)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	if len(ents) > 0 && !force {
		return fmt.Errorf("%s: %w", out, ErrOutputExists)
	}
	return nil
}

type builder struct {
	opts    Options
	info    SourceInfo
	tspec   transforms.Spec
	spec    shard.SampleSpec // every record's spec, decided before the build (DatasetSpec)
	staging string
	guard   *guard // refuses enumerated inputs inside the output names

	pool  sync.Pool // record buffers (*[]byte)
	rpool sync.Pool // result batches (*[]result)

	direct     DirectSource // set when items decode straight into record buffers
	directSpec shard.SampleSpec
	directSize int

	enumerated atomic.Int64 // items the source emitted (see checkInputs)
	enumDone   atomic.Bool  // Enumerate returned nil and every item was handed on
}

func (b *builder) run(ctx context.Context) (*Summary, error) {
	g, ctx := errgroup.WithContext(ctx)
	jobs := make(chan job, b.opts.Workers)
	ordered := make(chan chan []result, 2*b.opts.Workers)
	b.setDirect()
	if ws, ok := b.opts.Source.(WindowSource); ok && b.opts.Resizer == nil && b.direct == nil {
		ws.EnableWindows()
	}

	g.Go(func() error {
		defer close(jobs)
		defer close(ordered)
		var group []Item
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
		err := b.opts.Source.Enumerate(ctx, func(it Item) error {
			b.enumerated.Add(1)
			if it.Path != "" && b.guard != nil {
				if err := b.guard.checkInput(it.Path); err != nil {
					return err
				}
			}
			group = append(group, it)
			groupSize += len(it.Raw)
			full := groupSize >= groupBytes || len(group) >= maxGroup
			if b.opts.Resizer != nil {
				full = full || len(group) >= deviceGroup
			} else {
				full = full || it.Raw == nil
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

func (b *builder) getBuf(n int) *[]byte {
	if p, ok := b.pool.Get().(*[]byte); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]byte, n)
	return &s
}

func (b *builder) worker(ctx context.Context, jobs <-chan job) error {
	if b.opts.Resizer != nil {
		return b.batchWorker(ctx, jobs)
	}
	tw := b.tspec.NewWorker()
	for j := range jobs {
		snd := sender{b: b, res: j.res}
		for _, it := range j.items {
			if b.direct != nil {
				if err := b.decodeDirect(ctx, &snd, it); err != nil {
					return err
				}
				continue
			}
			n := 0
			err := b.opts.Source.Decode(ctx, it, func(c Clip) error {
				r, err := b.transform(tw, c)
				if err != nil {
					return err
				}
				r.name = it.Name
				n++
				return snd.send(ctx, r)
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := snd.send(ctx, result{name: it.Name, done: true, err: err, count: n}); err != nil {
				return err
			}
		}
		if err := snd.flush(ctx); err != nil {
			return err
		}
		close(j.res)
	}
	return nil
}

// setDirect enables the direct path when the source can decode straight into record buffers
// and the transform is the identity, so Worker.Apply would only copy (DirectSource). It checks
// once, with Apply on a blank frame, that Apply accepts the source's frames as the direct path
// does not call it.
func (b *builder) setDirect() {
	ds, ok := b.opts.Source.(DirectSource)
	if !ok || b.opts.Resizer != nil || b.info.ClipLen > 0 || !b.tspec.Identity() {
		return
	}
	w, h, c := ds.FrameShape()
	fs := b.tspec.OutputSpec(w, h, c)
	if fs.Validate() != nil || int64(w)*int64(h)*int64(c) != fs.Size() {
		return
	}
	img := transforms.Image{W: w, H: h, C: c, Pix: make([]byte, w*h*c)}
	if b.tspec.NewWorker().Apply(img, make([]byte, fs.Size())) != nil {
		return
	}
	b.direct, b.directSpec, b.directSize = ds, fs, int(fs.Size())
}

// decodeDirect decodes one item of a DirectSource into a pooled record buffer and sends the
// record and the item's done marker.
func (b *builder) decodeDirect(ctx context.Context, snd *sender, it Item) error {
	buf := b.getBuf(b.directSize)
	c, err := b.direct.DecodeTo(ctx, it, *buf)
	if ctx.Err() != nil {
		b.pool.Put(buf)
		return ctx.Err()
	}
	n := 0
	if err != nil {
		b.pool.Put(buf)
	} else {
		n = 1
		r := result{rec: Record{Data: *buf, Label: c.Label, Aux: c.Aux, Meta: c.Meta}, spec: b.directSpec, buf: buf, name: it.Name}
		if err := snd.send(ctx, r); err != nil {
			return err
		}
	}
	return snd.send(ctx, result{name: it.Name, done: true, err: err, count: n})
}

// sender batches a job's results (records and done markers, in order) so the writer takes them
// in a few channel hand-offs instead of two per item. A batch is sent once it holds
// groupBytes of record data, so memory stays bounded as before.
type sender struct {
	b     *builder
	res   chan []result
	batch []result
	bytes int
}

func (s *sender) send(ctx context.Context, r result) error {
	if s.batch == nil {
		s.batch = s.b.getResults()
	}
	s.batch = append(s.batch, r)
	s.bytes += len(r.rec.Data)
	if s.bytes >= groupBytes || len(s.batch) >= 2*maxGroup {
		return s.flush(ctx)
	}
	return nil
}

func (s *sender) flush(ctx context.Context) error {
	if len(s.batch) == 0 {
		return nil
	}
	select {
	case s.res <- s.batch:
	case <-ctx.Done():
		for _, r := range s.batch {
			if r.buf != nil {
				s.b.pool.Put(r.buf)
			}
		}
		return ctx.Err()
	}
	s.batch, s.bytes = nil, 0
	return nil
}

// getResults returns an empty result slice from the pool; putResults returns one.
func (b *builder) getResults() []result {
	if p, ok := b.rpool.Get().(*[]result); ok {
		return (*p)[:0]
	}
	return make([]result, 0, 64)
}

func (b *builder) putResults(rs []result) {
	clear(rs)
	rs = rs[:0]
	b.rpool.Put(&rs)
}

// transform applies the transform spec to every frame of a clip, into one pooled buffer.
func (b *builder) transform(tw *transforms.Worker, c Clip) (result, error) {
	r, err := b.layout(c)
	if err != nil {
		return result{}, err
	}
	for i, f := range c.Frames {
		var err error
		if c.Windows != nil {
			w := c.Windows[i]
			err = tw.ApplyWindow(f, w.X, w.Y, w.FullW, w.FullH, r.frameDsts[i])
		} else {
			err = tw.Apply(f, r.frameDsts[i])
		}
		if err != nil {
			b.pool.Put(r.buf)
			return result{}, err
		}
	}
	r.frameDsts = nil
	return r, nil
}

// write is the single writer: it takes items in source order and writes their records.
func (b *builder) write(ctx context.Context, ordered <-chan chan []result) (*Summary, error) {
	sum := &Summary{Reasons: map[string]int{}}
	spec := b.spec
	var (
		out      Output
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
					out, err = b.opts.NewOutput(OutputConfig{
						Dir: b.staging, Sample: spec,
						Label:     shard.LabelSpec{DType: "int64", Aux: nonNil(b.info.AuxNames)},
						Classes:   b.info.Classes,
						HasMeta:   b.info.HasMeta,
						ShardSize: b.opts.ShardSize,
						Meta:      b.datasetMeta(),
					})
					if err != nil {
						return nil, fmt.Errorf("create %s output: %w", b.opts.Format, err)
					}
				}
				if err := out.Write(r.rec); err != nil {
					return nil, fmt.Errorf("write %s output: %w", b.opts.Format, err)
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
		out, err = b.opts.NewOutput(OutputConfig{Dir: b.staging, Sample: spec,
			Label: shard.LabelSpec{DType: "int64", Aux: nonNil(b.info.AuxNames)}, Classes: b.info.Classes,
			HasMeta: b.info.HasMeta, ShardSize: b.opts.ShardSize, Meta: b.datasetMeta()})
		if err != nil {
			return nil, fmt.Errorf("create %s output: %w", b.opts.Format, err)
		}
	}
	files, err := out.Close()
	finished = true
	if err != nil {
		return nil, fmt.Errorf("finish %s output: %w", b.opts.Format, err)
	}
	m := &shard.Manifest{
		Packer:        Version,
		Format:        b.opts.Format,
		FormatVersion: formatVersion(spec),
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

// WriteManifest writes dir/manifest.json through a temporary name, synced, then renamed.
func WriteManifest(dir string, m *shard.Manifest) error {
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	return shard.WriteFileAtomic(filepath.Join(dir, shard.ManifestName), data)
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
