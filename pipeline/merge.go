package pipeline

// Merge joins the parts of a build split in parts (Options.Part) into the dataset one build of
// the whole source writes: the records of the parts in part order are written anew through the
// final output format, so shard boundaries, every file and the manifest come out as one build
// would have made them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// MergeOptions configures Merge.
type MergeOptions struct {
	Parts  []string     // the part directories, in any order
	Output output.Entry // the merged dataset's format: the entry the parts name (ReadParts)
	Out    string       // output directory
	Force  bool         // replace an existing OUT atomically
	// Formats are the output format names the caller knows: Force replaces a dataset of one
	// of them (or a part). Empty: Output's name and shards.
	Formats []string
	// Progress is called after each part with the records written so far and the total.
	Progress func(records, total int64)
	// CheckPart checks the part in dir as packer verify does, reading each file the part's
	// manifest lists once, in the manifest's order, and passing every byte it reads, in order,
	// to the writer tee returns for that file (the command wires verify.Dir with Options.Tee);
	// the merge copies the records from those bytes. It returns the faults found, one line
	// each, and an error only when the check itself failed (cancellation). Required.
	CheckPart func(ctx context.Context, dir string, tee func(fe shard.FileEntry) io.Writer) (faults []string, err error)
	// ShardName is the file name of shard k of the merged dataset (output/shards.ShardName):
	// parts built with --cut-inputs are merged by linking their shards into place under it
	// (mergelink.go). Required for such parts.
	ShardName func(k int) string
	// VerifyParts, with parts built with --cut-inputs, checks each part with CheckPart (every
	// byte read, as packer verify does) after the merge's first look at its shards and before
	// they are linked, so that a shard replaced after its check is refused, not linked;
	// without it they are checked as a reader opening them does (checkLinkPart), which reads
	// no record. Parts without the rule are always read whole: the merge copies their records.
	VerifyParts bool
	// Warn, if set, is told of a part built with --cut-inputs whose shards were copied into
	// OUT rather than linked (a file system that makes no hard links there), and why.
	Warn func(msg string)
}

// ErrParts is wrapped by every error about a set of parts that does not make one dataset.
var ErrParts = errors.New("the parts do not make one dataset")

// Parts is a checked, complete set of parts, in part order.
type Parts struct {
	Dirs      []string
	Manifests []*shard.Manifest
}

// Info returns the part record all the parts share (with the first part's index).
func (p *Parts) Info() *shard.PartInfo { return p.Manifests[0].Part }

// ReadParts reads the manifests of a build's parts and checks that they make one dataset: each
// is a part, written by this packer version, one of each index 0..N-1 (a missing or duplicated
// part is named), all of one source listing (its digest and size), one source and transform
// spec, one sample and label spec, one set of merge options, and each covering the inputs that
// follow the previous part's. formats are the output format names the caller knows: a part's
// manifest that names another is invalid (a part is written as shards, and one that names
// another known format is refused as unlike the others; empty: shards only). It does not check
// the parts' data: Merge does, as it reads them.
func ReadParts(dirs []string, formats []string) (*Parts, error) {
	fss := make([]shard.FS, len(dirs))
	for i, d := range dirs {
		fss[i] = shard.DirFS(d)
	}
	return ReadPartsFS(dirs, fss, formats)
}

// ReadPartsFS is ReadParts of parts read through fss (fss[i] holds the part named dirs[i]):
// parts in object storage.
func ReadPartsFS(dirs []string, fss []shard.FS, formats []string) (*Parts, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no part given", ErrParts)
	}
	if len(formats) == 0 {
		formats = []string{shard.FormatShards}
	}
	type part struct {
		dir string
		m   *shard.Manifest
	}
	// The manifests are read several at once (in a bucket, a request each), checked in order.
	ms, errs := make([]*shard.Manifest, len(dirs)), make([]error, len(dirs))
	sem := make(chan struct{}, cutCheckParallel)
	var wg sync.WaitGroup
	for i := range dirs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ms[i], errs[i] = shard.ReadManifestFormats(fss[i], formats)
		}()
	}
	wg.Wait()
	parts := make([]part, 0, len(dirs))
	for i, d := range dirs {
		m, err := ms[i], errs[i]
		if err != nil {
			return nil, fmt.Errorf("part %s: %w", d, err)
		}
		if m.Part == nil {
			return nil, fmt.Errorf("%w: %s is a whole dataset, not a part (built without --part)", ErrParts, d)
		}
		if m.Packer != Version {
			return nil, fmt.Errorf("%w: %s was built by packer %s; this is packer %s (build every part with one version)", ErrParts, d, m.Packer, Version)
		}
		parts = append(parts, part{d, m})
	}
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].m.Part.Index < parts[j].m.Part.Index })
	first := parts[0].m
	n := first.Part.Count
	seen := map[int]string{}
	for _, p := range parts {
		pi := p.m.Part
		if prev, dup := seen[pi.Index]; dup {
			return nil, fmt.Errorf("%w: part %d/%d given twice: %s and %s", ErrParts, pi.Index, n, prev, p.dir)
		}
		seen[pi.Index] = p.dir
		if err := sameBuild(first, parts[0].dir, p.m, p.dir); err != nil {
			return nil, err
		}
	}
	var missing []int
	for i := 0; i < n; i++ {
		if _, ok := seen[i]; !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing part(s) %v of %d", ErrParts, missing, n)
	}
	out := &Parts{}
	next := int64(0)
	for _, p := range parts {
		if p.m.Part.FirstInput != next {
			return nil, fmt.Errorf("%w: part %s starts at input %d, the previous part ends at %d", ErrParts, p.dir, p.m.Part.FirstInput, next)
		}
		next += p.m.Inputs
		out.Dirs = append(out.Dirs, p.dir)
		out.Manifests = append(out.Manifests, p.m)
	}
	if next != first.Part.TotalInputs {
		return nil, fmt.Errorf("%w: the parts hold %s, the source %d", ErrParts, humanize.Count(next, "input"), first.Part.TotalInputs)
	}
	return out, nil
}

// sameBuild checks that part b (in dir db) belongs to the build of part a (in da).
func sameBuild(a *shard.Manifest, da string, b *shard.Manifest, db string) error {
	pa, pb := *a.Part, *b.Part
	pa.Index, pb.Index, pa.FirstInput, pb.FirstInput = 0, 0, 0, 0
	// The source's path is not compared (a source may be mounted at other paths on other
	// machines): the content digest tells its inputs apart.
	pa.Source, pb.Source = "", ""
	diff := func(what string) error {
		return fmt.Errorf("%w: %s and %s differ in %s", ErrParts, da, db, what)
	}
	switch {
	case pa.Listing != pb.Listing || pa.TotalInputs != pb.TotalInputs:
		return diff("their source listing (another source, or the source changed between parts)")
	case pa.Content == "" || pb.Content == "":
		d := da
		if pb.Content == "" {
			d = db
		}
		return fmt.Errorf("%w: %s records no content_sha256 (built by an earlier packer): rebuild it", ErrParts, d)
	case pa.Content != pb.Content:
		return fmt.Errorf("%w: %s (content_sha256 %s, source %s) and %s (content_sha256 %s, source %s) list the same names and labels, "+
			"but inputs of other sizes or modification times: another copy of the source, or files that changed between the parts; "+
			"rebuild the parts from one unchanged source (or from one plan)",
			ErrParts, da, pa.Content, sourceOrNone(a.Part.Source), db, pb.Content, sourceOrNone(b.Part.Source))
	case pa.Count != pb.Count:
		return diff("their part count")
	case pa.CutInputs != pb.CutInputs:
		return fmt.Errorf("%w: %s was cut with --cut-inputs %d and %s with %d: build every part with one --cut-inputs", ErrParts, da, pa.CutInputs, db, pb.CutInputs)
	case pa != pb:
		return diff("their merge options (--format, --shard-size, --checksum-block, --max-errors)")
	case !reflect.DeepEqual(a.Source, b.Source):
		return diff("their source options")
	case !reflect.DeepEqual(a.Transform, b.Transform):
		return diff("their transform options")
	case !reflect.DeepEqual(a.Sample, b.Sample) || !reflect.DeepEqual(a.Label, b.Label) || !reflect.DeepEqual(a.Fields, b.Fields):
		return diff("their record spec")
	case !reflect.DeepEqual(a.Classes, b.Classes):
		return diff("their class names")
	case a.Format != shard.FormatShards || b.Format != shard.FormatShards:
		return diff("format (a part is written as shards)")
	}
	return nil
}

func sourceOrNone(s string) string {
	if s == "" {
		return "not recorded"
	}
	return s
}

// LockParts takes the lock of every part directory (the one a build of that part takes), so
// that no part is rebuilt while a merge checks and reads it; release gives them back. A part
// being built is refused (ErrOutputLocked names the build's pid).
func LockParts(dirs []string) (release func(), err error) {
	var locks []*outLock
	release = func() {
		for _, l := range locks {
			l.release()
		}
	}
	held := map[string]bool{}
	for _, d := range dirs {
		p, err := newOutPaths(d)
		if err != nil {
			release()
			return nil, fmt.Errorf("part %s: %w", d, err)
		}
		if held[p.lock] {
			continue // a part given twice: ReadParts names it
		}
		held[p.lock] = true
		l, err := lockOut(p)
		if err != nil {
			release()
			return nil, fmt.Errorf("part %s: %w", d, err)
		}
		locks = append(locks, l)
	}
	return release, nil
}

// Merge writes the dataset of a complete, checked set of parts (ReadParts) into OUT, with the
// output directory handling of Build (lock, staging, manifest last, atomic commit). It checks
// each part as packer verify does while it reads it, in one sequential pass (copyPart): a
// damaged part fails the merge with a *PartError, and nothing is published.
func Merge(ctx context.Context, parts *Parts, opts MergeOptions) (*Summary, error) {
	start := time.Now()
	info := parts.Info()
	if opts.Output.New == nil || opts.CheckPart == nil || info.CutInputs > 0 && opts.ShardName == nil {
		panic("pipeline: Merge needs an Output entry and CheckPart, and ShardName for parts built with CutInputs")
	}
	if opts.Output.Name != info.Format {
		return nil, fmt.Errorf("%w: the parts were built for --format %s, not %s", ErrParts, info.Format, opts.Output.Name)
	}
	var skipped int
	for _, m := range parts.Manifests {
		skipped += len(m.Skipped)
	}
	if info.MaxErrors > 0 && skipped > info.MaxErrors {
		return nil, fmt.Errorf("%w: %d inputs skipped over all parts, more than --max-errors %d", ErrTooManyErrors, skipped, info.MaxErrors)
	}
	// OUT may be none of the parts, nor the source they were built from, nor lie in or
	// around one: --force would replace it.
	if paths, err := newOutPaths(opts.Out); err == nil {
		g := newGuard(paths)
		for k, d := range parts.Dirs {
			if err := g.checkInput(d); err != nil {
				return nil, fmt.Errorf("part %s: %w", d, err)
			}
			if s := parts.Manifests[k].Part.Source; filepath.IsAbs(s) {
				if err := g.checkInput(s); err != nil {
					return nil, fmt.Errorf("%s, the source part %s was built from: %w", s, d, err)
				}
			}
		}
	}
	formats := opts.Formats
	if len(formats) == 0 {
		formats = []string{opts.Output.Name, shard.FormatShards}
	}
	sum, err := intoOut(opts.Out, replacing{force: opts.Force, formats: formats}, parts.Dirs, false, func(paths outPaths, _ bool) (*Summary, error) {
		if info.CutInputs > 0 {
			return linkInto(ctx, parts, paths.staging, opts)
		}
		return mergeInto(ctx, parts, paths.staging, opts)
	})
	if err != nil {
		return nil, err
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// mergeInto writes the parts' records and the manifest into dir.
func mergeInto(ctx context.Context, parts *Parts, dir string, opts MergeOptions) (*Summary, error) {
	first := parts.Manifests[0]
	var total int64
	for _, m := range parts.Manifests {
		total += m.Count
	}
	hasMeta := false
	for _, d := range parts.Dirs {
		ds, err := shard.OpenDataset(d)
		if err != nil {
			return nil, fmt.Errorf("part %s: %w", d, err)
		}
		if ds.NumShards() > 0 {
			r, err := ds.Shard(0)
			if err != nil {
				ds.Close()
				return nil, fmt.Errorf("part %s: %w", d, err)
			}
			hasMeta = r.HasRecordMeta()
		}
		ds.Close()
		if ds.NumShards() > 0 {
			break
		}
	}
	out, err := opts.Output.New(output.Config{
		Dir: dir, Sample: first.Sample, Label: first.Label, Classes: first.Classes, HasMeta: hasMeta,
		ShardSize: parts.Info().ShardSize, ChecksumBlock: parts.Info().ChecksumBlock, Fields: first.Fields,
		Meta: map[string]any{
			"packer": first.Packer, "source": first.Source, "transform": first.Transform, "classes": nonNil(first.Classes),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create %s output: %w", opts.Output.Name, err)
	}
	finished := false
	defer func() {
		if !finished {
			out.Abort()
		}
	}()
	sum := &Summary{Reasons: map[string]int{}}
	counts := make([]int64, len(first.Classes))
	var skipped []shard.Skipped
	var inputs int64
	var dropped map[string]int64
	for k, d := range parts.Dirs {
		if err := copyPart(ctx, d, first.Sample.Fixed(), out, counts, sum, opts.CheckPart); err != nil {
			return nil, err
		}
		m := parts.Manifests[k]
		skipped = append(skipped, m.Skipped...)
		inputs += m.Inputs
		for name, n := range m.BoxesDropped {
			if dropped == nil {
				dropped = map[string]int64{}
			}
			dropped[name] += n
		}
		if opts.Progress != nil {
			opts.Progress(sum.Records, total)
		}
	}
	if sum.Records != total {
		return nil, fmt.Errorf("%w: the parts' manifests count %s, their shards hold %d", ErrParts, humanize.Count(total, "record"), sum.Records)
	}
	files, err := out.Close()
	finished = true
	if err != nil {
		return nil, fmt.Errorf("finish %s output: %w", opts.Output.Name, err)
	}
	format, formatVersion := out.Format()
	m := &shard.Manifest{
		Packer: first.Packer, Format: format, FormatVersion: formatVersion,
		Count: sum.Records, Classes: nonNil(first.Classes), ClassCounts: counts,
		Sample: first.Sample, Label: first.Label, Source: first.Source, Transform: first.Transform,
		Files: files, Skipped: nonNil(skipped), Inputs: inputs,
		Fields: first.Fields, BoxesDropped: dropped,
	}
	if err := WriteManifest(dir, m); err != nil {
		return nil, err
	}
	for _, f := range files {
		sum.FileBytes += f.Size
	}
	for _, s := range skipped {
		sum.Reasons[ShortReason(s.Reason)]++
	}
	sum.Items, sum.Skipped, sum.Manifest = inputs, int64(len(skipped)), m
	return sum, nil
}

// PartError is Merge's error for a part whose files do not match its manifest (a damaged or
// changed part): Faults are what the check of the part found (MergeOptions.CheckPart), one
// line each.
type PartError struct {
	Dir    string
	Faults []string
}

func (e *PartError) Error() string {
	return fmt.Sprintf("part %s: %s; rebuild that part", e.Dir, humanize.Count(len(e.Faults), "fault"))
}

// runWriter is the bulk path of an Output that can copy runs of a shard's records as they are
// (output/shards).
type runWriter interface {
	WriteFrom(src *shard.Reader, i, j int, data []byte) error
}

// copyPart writes every record of the part in dir to out, in order, reading each file of the
// part once: the check (packer verify's: size, SHA-256, structure and checksums of every shard,
// the manifest against the shards) reads it, sequentially, and passes its bytes on to the
// copy as it goes. A part that fails the check is a *PartError; the records already written
// from it go with the output, which the caller aborts.
func copyPart(ctx context.Context, dir string, fixed bool, out output.Output, counts []int64, sum *Summary,
	check func(context.Context, string, func(shard.FileEntry) io.Writer) ([]string, error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &partCopy{dir: dir, fixed: fixed, out: out, counts: counts, sum: sum, cancel: cancel}
	c.runs, _ = out.(runWriter)
	faults, err := check(ctx, dir, c.file)
	c.endFile()
	switch {
	case c.err != nil:
		return c.err
	case err != nil:
		return fmt.Errorf("verify part %s: %w", dir, err)
	case len(faults) > 0:
		return &PartError{Dir: dir, Faults: faults}
	case c.bad != nil:
		// Not seen by the check (the file changed between its reads): a fault all the same.
		return &PartError{Dir: dir, Faults: []string{c.badFile + ": " + c.bad.Error()}}
	}
	return nil
}

// partCopy takes the bytes of a part's shards as the check reads them and writes their records
// to the output. The index of each shard is read first (shard.Open: the records' labels, aux
// values, metadata and sizes are needed with their bytes, which come before the index in the
// file); the copy of the index that then streams by must be the same bytes, so the index the
// records were written with is the one the check hashed.
type partCopy struct {
	dir    string
	fixed  bool
	out    output.Output
	runs   runWriter
	counts []int64
	sum    *Summary
	cancel context.CancelFunc

	err     error // writing the output failed: the check is cancelled
	bad     error // a shard could not be read as a shard: the check reports why
	badFile string

	name  string
	r     *shard.Reader // nil when the shard is not being copied
	pos   int64         // file offset of the next byte
	next  int           // the next record to write
	carry []byte        // the first bytes of record next, when it spans pieces
}

// file starts the copy of the part's file fe (the tee of MergeOptions.CheckPart).
func (c *partCopy) file(fe shard.FileEntry) io.Writer {
	c.endFile()
	c.name, c.pos, c.next, c.carry = fe.Path, 0, 0, c.carry[:0]
	if c.err != nil || c.bad != nil {
		return nil
	}
	r, err := shard.Open(filepath.Join(c.dir, fe.Path))
	if err != nil {
		c.fail(err)
		return nil
	}
	c.r = r
	return c
}

// fail records that the shard being copied cannot be read as one; the check reports the fault.
func (c *partCopy) fail(err error) {
	if c.bad == nil {
		c.bad, c.badFile = err, c.name
	}
	if c.r != nil {
		c.r.Close()
		c.r = nil
	}
}

// failOut records an output error and cancels the check.
func (c *partCopy) failOut(err error) {
	if c.err == nil {
		c.err = fmt.Errorf("write %s: %w", c.dir, err)
		c.cancel()
	}
	if c.r != nil {
		c.r.Close()
		c.r = nil
	}
}

// endFile finishes the current shard: records of no bytes at its end, and the check that every
// record was written.
func (c *partCopy) endFile() {
	r := c.r
	if r == nil {
		return
	}
	for c.r != nil && c.next < r.Len() && len(c.carry) == 0 && r.RecordLen(c.next) == 0 {
		c.emit(c.next, c.next+1, nil)
	}
	if c.r != nil && c.next != r.Len() {
		c.fail(fmt.Errorf("%s: %d of its %d records were read (a short file)", c.name, c.next, r.Len()))
	}
	if c.r != nil {
		r.Close()
		c.r = nil
	}
}

// Write takes the file's next bytes.
func (c *partCopy) Write(p []byte) (int, error) {
	r := c.r
	if r == nil {
		return len(p), nil
	}
	off := c.pos
	c.pos += int64(len(p))
	if q := clip(p, off, r.DataOffset(), r.DataOffset()+r.DataSize()); len(q) > 0 {
		c.data(q)
	}
	if c.r == nil {
		return len(p), nil
	}
	idx, at := r.Index(), r.IndexOffset()
	if lo, hi := max(off, at), min(c.pos, at+int64(len(idx))); lo < hi {
		if !bytes.Equal(p[lo-off:hi-off], idx[lo-at:hi-at]) {
			c.fail(fmt.Errorf("%s: the index changed while the part was read", c.name))
		}
	}
	return len(p), nil
}

// clip returns the bytes of p (the file's bytes from off) inside [a, b).
func clip(p []byte, off, a, b int64) []byte {
	lo, hi := max(a, off), min(b, off+int64(len(p)))
	if lo >= hi {
		return nil
	}
	return p[lo-off : hi-off]
}

// data takes the next bytes of the data section and writes the records they complete.
func (c *partCopy) data(q []byte) {
	r := c.r
	for len(q) > 0 && c.r != nil && c.next < r.Len() {
		if len(c.carry) > 0 || r.RecordLen(c.next) > int64(len(q)) {
			need := r.RecordLen(c.next) - int64(len(c.carry))
			take := min(need, int64(len(q)))
			c.carry = append(c.carry, q[:take]...)
			q = q[take:]
			if take == need {
				c.emit(c.next, c.next+1, c.carry)
				c.carry = c.carry[:0]
			}
			continue
		}
		// Whole records from q, in one run.
		k, n := c.next, int64(0)
		if !r.VarSize() {
			m := int64(len(q)) / r.RecordSize()
			k, n = c.next+int(m), m*r.RecordSize()
		} else {
			for k < r.Len() && n+r.RecordLen(k) <= int64(len(q)) {
				n += r.RecordLen(k)
				k++
			}
		}
		c.emit(c.next, k, q[:n])
		q = q[n:]
	}
	if len(q) > 0 && c.r != nil {
		c.fail(fmt.Errorf("%s: data past its last record", c.name))
	}
}

// emit writes records [i, j) of the current shard, whose bytes are data.
func (c *partCopy) emit(i, j int, data []byte) {
	r := c.r
	if c.runs != nil {
		if err := c.runs.WriteFrom(r, i, j, data); err != nil {
			c.failOut(err)
			return
		}
	} else {
		base, _ := r.DataRange(i, j)
		for k := i; k < j; k++ {
			off, n := r.DataRange(k, k+1)
			// A record of a shard with fields is its sample's bytes and then its fields'.
			sample, fields, err := r.SplitFields(k, data[off-base:off-base+n])
			if err != nil {
				c.fail(fmt.Errorf("%s record %d: %w", c.name, k, err))
				return
			}
			rec := output.Record{Data: sample, Label: r.Label(k), Aux: r.Aux(k), Meta: r.RecordMeta(k), Fields: fields}
			if !c.fixed {
				shape, err := r.RecordShape(k)
				if err != nil {
					c.fail(fmt.Errorf("%s record %d: %w", c.name, k, err))
					return
				}
				rec.Shape = shape
			}
			if err := c.out.Write(rec); err != nil {
				c.failOut(err)
				return
			}
		}
	}
	for k := i; k < j; k++ {
		if l := r.Label(k); l >= 0 && l < int64(len(c.counts)) {
			c.counts[l]++
		}
	}
	c.sum.Records += int64(j - i)
	c.sum.Bytes += int64(len(data))
	c.next = j
}

// SameBuild checks that part b (named db) belongs to the build of part a (named da), as the
// merge checks its parts: the check a part built in place makes of the part records already
// at its OUT before it writes anything.
func SameBuild(a *shard.Manifest, da string, b *shard.Manifest, db string) error {
	return sameBuild(a, da, b, db)
}
