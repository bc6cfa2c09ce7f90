// Package verify checks a packed dataset directory against its manifest: every file's presence,
// size and SHA-256, files the manifest does not list, and the internal structure and checksums
// of every output format. It reads and reports; it never writes.
//
// It reads through the storage seam: Dir checks a directory of the local file system, Backend
// a dataset in any storage.Backend. On the local file system the files are read with O_DIRECT
// where the file system allows it; a format checker (npy, hdf5 structure) runs only there.
//
// # Reports
//
// Dir reports every fault it finds, not only the first: a damaged shard is still checked block
// by block, and the other files are still checked. Faults inside shards name the record range.
// Files the manifest does not list are warnings, not faults, unless Options.Strict.
package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// Fault kinds.
const (
	KindManifest  = "manifest"  // manifest.json missing, unreadable, or inconsistent
	KindMissing   = "missing"   // a file listed in the manifest does not exist
	KindExtra     = "extra"     // a file exists that the manifest does not list (a warning unless Options.Strict)
	KindSize      = "size"      // a file's size differs from the manifest
	KindSHA256    = "sha256"    // a file's SHA-256 differs from the manifest
	KindStructure = "structure" // a file's internal structure is damaged or inconsistent
	KindChecksum  = "checksum"  // an internal checksum does not match
	KindIO        = "io"        // a file could not be read
)

// Fault is one problem found. First and Count give the damaged record range when known (First
// is -1 otherwise), numbered across the dataset (record 0 is the first record of the first
// file), the numbering of the readers and of the Python verifier; ShardFirst is the same range
// numbered inside File (for npy and HDF5 files, which hold every record, equal to First; -1 when
// First is). Offset is the byte offset inside File when known (-1 otherwise).
type Fault struct {
	File       string `json:"file"`
	Kind       string `json:"kind"`
	First      int64  `json:"first_record"`
	Count      int64  `json:"records"`
	ShardFirst int64  `json:"shard_first_record"`
	Offset     int64  `json:"offset"`
	Message    string `json:"message"`
}

// String formats the fault for the text report: dataset-wide record numbers first, then, for a
// shard, the same range inside the shard ("records 1200-1299 (shard-00003.pks records 200-299)")
// where the two numberings differ (in the first shard they agree, and the range is given once).
func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(f.File)
	if f.First >= 0 {
		b.WriteString(": ")
		b.WriteString(recordRange(f.First, f.Count))
		if strings.HasSuffix(f.File, ".pks") && f.ShardFirst >= 0 && f.ShardFirst != f.First {
			fmt.Fprintf(&b, " (%s %s)", f.File, recordRange(f.ShardFirst, f.Count))
		}
	}
	if f.Offset >= 0 {
		fmt.Fprintf(&b, " at offset %d", f.Offset)
	}
	fmt.Fprintf(&b, ": %s: %s", f.Kind, f.Message)
	return b.String()
}

func recordRange(first, n int64) string {
	if n > 1 {
		return fmt.Sprintf("records %d-%d", first, first+n-1)
	}
	return fmt.Sprintf("record %d", first)
}

// Report is the result of checking one dataset directory. OK means no faults; Warnings are
// findings that do not make the dataset wrong: files the manifest does not list (KindExtra),
// which no reader opens, unless Options.Strict makes them faults.
type Report struct {
	Dir      string  `json:"dir"`
	Format   string  `json:"format"`
	Count    int64   `json:"count"`
	Files    int     `json:"files"`
	Bytes    int64   `json:"bytes"`
	OK       bool    `json:"ok"`
	Faults   []Fault `json:"faults"`
	Warnings []Fault `json:"warnings"`
	Skipped  int     `json:"skipped_inputs"`
	// ShuffleSeed is the seed of a dataset built with --shuffle (its manifest's
	// source.shuffle), nil for one written in source order.
	ShuffleSeed *uint64 `json:"shuffle_seed,omitempty"`
}

// Options configures Dir.
type Options struct {
	// Progress, when set, is called with the number of bytes read so far (from several goroutines).
	Progress func(bytes int64)
	// Workers is how many files are checked at once; 0 means 2.
	Workers int
	// Tee, when set, is called for each file the manifest lists, in the manifest's order, just
	// before the file is read, and returns a writer that receives every byte of the file, in
	// order, as the check reads and hashes it (nil for none): a caller that copies the dataset
	// reads it once for both. Files are then checked one at a time, so the bytes of the whole
	// dataset arrive in order. A file that is missing or cannot be read is not passed on whole:
	// the report has a fault for it. Write must not keep the slice and should not fail: a
	// caller that must stop cancels the context.
	Tee func(fe shard.FileEntry) io.Writer
	// Cached reads the files through the page cache rather than with O_DIRECT (for a caller
	// that has just written them, or that reads them again).
	Cached bool
	// Strict reports files the manifest does not list as faults. Without it they are warnings
	// (Report.Warnings): the readers open only the files the manifest lists, so a stray file
	// beside them (an editor's backup, a log, a file copied in by hand) does not make the
	// dataset wrong. Listed files that are missing or damaged are faults either way.
	Strict bool
}

// FormatChecker checks the structure of non-shard formats (npy, hdf5) against the manifest.
// It is set by the command that links those formats, so this package stays free of cgo.
// Dir calls it only when every listed file is present with the size and SHA-256 the manifest
// lists, so it may parse the files without checking their bytes again (a damaged file is
// already reported by its SHA-256, and some parsers, libhdf5 among them, do not survive
// arbitrary damage).
type FormatChecker func(dir string, m *shard.Manifest) []error

// Dir checks the dataset in dir. checkers maps the name of every output format the caller
// knows to its structural checker, nil for a format that has none; shards (shard.FormatShards,
// which verify checks itself) need no entry. A manifest of a format that is neither is a fault
// (an invalid manifest), never a dataset checked by its files' hashes alone. The returned error is for failures of the check itself (cancellation); faults in the data are
// in the report.
func Dir(ctx context.Context, dir string, opts Options, checkers map[string]FormatChecker) (*Report, error) {
	return check(ctx, storage.NewLocal(dir), dir, opts, checkers)
}

// Backend checks the dataset b holds, like Dir; name is the dataset's name in the report. A
// FormatChecker runs only where b is a storage.Local (it parses local files); elsewhere a
// dataset of a format that has one gets a fault saying its structure was not checked.
func Backend(ctx context.Context, b storage.Backend, name string, opts Options, checkers map[string]FormatChecker) (*Report, error) {
	return check(ctx, b, name, opts, checkers)
}

// knownFormats are the format names a check accepts: shards and every format of checkers.
func knownFormats(checkers map[string]FormatChecker) []string {
	names := []string{shard.FormatShards}
	for name := range checkers {
		names = append(names, name)
	}
	return names
}

// store is the dataset's storage as verify reads it.
type store struct {
	b     storage.Backend
	fsys  shard.FS
	local shard.LocalFS // nil where the backend is not the local file system
}

func check(ctx context.Context, b storage.Backend, dir string, opts Options, checkers map[string]FormatChecker) (*Report, error) {
	st := &store{b: b, fsys: storage.ShardFS(ctx, b)}
	st.local, _ = st.fsys.(shard.LocalFS)
	rep := &Report{Dir: dir, Faults: []Fault{}, Warnings: []Fault{}}
	var mu sync.Mutex
	add := func(f Fault) {
		mu.Lock()
		if f.Kind == KindExtra && !opts.Strict {
			rep.Warnings = append(rep.Warnings, f)
		} else {
			rep.Faults = append(rep.Faults, f)
		}
		mu.Unlock()
	}
	m, err := shard.ReadManifestFormats(st.fsys, knownFormats(checkers))
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		add(Fault{File: shard.ManifestName, Kind: KindManifest, First: -1, Offset: -1, Message: err.Error()})
		rep.finish()
		return rep, nil
	}
	rep.Format, rep.Count, rep.Files, rep.Skipped = m.Format, m.Count, len(m.Files), len(m.Skipped)
	if seed, ok, err := m.BuildShuffle(); ok && err == nil {
		rep.ShuffleSeed = &seed
	}
	for _, f := range m.Files {
		rep.Bytes += f.Size
	}
	checkManifest(m, add)
	checkExtra(ctx, b, m, add)

	workers := opts.Workers
	if workers <= 0 {
		workers = 2
	}
	var done atomic.Int64
	progress := func(n int64) {
		if opts.Progress != nil {
			opts.Progress(done.Add(n))
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	if opts.Tee != nil {
		workers = 1 // files in order (g.Go waits for the previous file)
	}
	g.SetLimit(workers)
	var recordsSeen atomic.Int64
	sh := &shardTally{labels: shard.NewLabelTally(m)}
	for _, fe := range m.Files {
		g.Go(func() error {
			return checkFile(gctx, st, m, fe, opts, add, progress, &recordsSeen, sh)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if m.Format == shard.FormatShards && recordsSeen.Load() >= 0 && len(rep.Faults) == 0 && recordsSeen.Load() != m.Count {
		add(Fault{File: shard.ManifestName, Kind: KindManifest, First: -1, Offset: -1,
			Message: fmt.Sprintf("count is %d but the shards hold %s", m.Count, humanize.Count(recordsSeen.Load(), "record"))})
	}
	if m.Format == shard.FormatShards && !dataDamaged(rep.Faults) {
		// every shard was read whole and intact: the labels and versions are all known
		for _, msg := range sh.labels.Faults(m) {
			add(Fault{File: shard.ManifestName, Kind: KindManifest, First: -1, Offset: -1, Message: msg})
		}
		if sh.maxVersion > 0 && m.FormatVersion != sh.maxVersion {
			add(Fault{File: shard.ManifestName, Kind: KindManifest, First: -1, Offset: -1,
				Message: fmt.Sprintf("format_version is %d but the newest shard is version %d", m.FormatVersion, sh.maxVersion)})
		}
	}
	if c := checkers[m.Format]; c != nil && m.Format != shard.FormatShards && !bytesDamaged(rep.Faults) {
		l, ok := b.(*storage.Local)
		if !ok {
			add(Fault{File: shard.ManifestName, Kind: KindStructure, First: -1, Offset: -1,
				Message: fmt.Sprintf("the structure of a %s dataset is checked only on the local file system; the files' sizes and SHA-256 were checked", m.Format)})
			rep.finish()
			return rep, nil
		}
		for _, err := range c(l.Root(), m) {
			add(Fault{File: faultFile(err), Kind: KindStructure, First: -1, Offset: -1, Message: err.Error()})
		}
	}
	rep.finish()
	return rep, nil
}

// faultFile extracts the file name an error message starts with ("images.npy: ..."), if any.
func faultFile(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return filepath.Base(pe.Path)
	}
	if name, _, ok := strings.Cut(err.Error(), ":"); ok && !strings.ContainsAny(name, " ") {
		return filepath.Base(name)
	}
	return shard.ManifestName
}

// bytesDamaged reports whether a listed file is missing, unreadable or differs from the
// manifest's size or SHA-256.
func bytesDamaged(faults []Fault) bool {
	for _, f := range faults {
		switch f.Kind {
		case KindMissing, KindSize, KindSHA256, KindIO:
			return true
		}
	}
	return false
}

// dataDamaged reports whether a listed file is missing, unreadable, differs from the manifest's
// size or SHA-256, or is damaged inside.
func dataDamaged(faults []Fault) bool {
	for _, f := range faults {
		switch f.Kind {
		case KindMissing, KindSize, KindSHA256, KindIO, KindStructure, KindChecksum:
			return true
		}
	}
	return false
}

func (r *Report) finish() {
	for _, list := range [][]Fault{r.Faults, r.Warnings} {
		for i := range list {
			if f := &list[i]; f.First < 0 {
				f.ShardFirst = -1
			} else if !strings.HasSuffix(f.File, ".pks") {
				f.ShardFirst = f.First
			}
		}
		sort.SliceStable(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if a.File != b.File {
				return a.File < b.File
			}
			return a.First < b.First
		})
	}
	r.OK = len(r.Faults) == 0
}

// checkManifest checks the manifest's internal consistency.
func checkManifest(m *shard.Manifest, add func(Fault)) {
	bad := func(format string, args ...any) {
		add(Fault{File: shard.ManifestName, Kind: KindManifest, First: -1, Offset: -1, Message: fmt.Sprintf(format, args...)})
	}
	if len(m.ClassCounts) != len(m.Classes) {
		bad("class_counts has %d entries for %d classes", len(m.ClassCounts), len(m.Classes))
	} else if len(m.Classes) > 0 {
		var n int64
		for _, c := range m.ClassCounts {
			n += c
		}
		if n > m.Count {
			bad("class_counts add up to %d, more than count %d", n, m.Count)
		}
	}
	names := map[string]int{}
	for i, c := range m.Classes {
		if j, dup := names[c]; dup {
			bad("class names %d and %d are both %q", j, i, c)
		}
		names[c] = i
	}
	for i, c := range m.ClassCounts {
		if c < 0 {
			bad("class_counts[%d] is negative (%d)", i, c)
		}
	}
	if m.Label.DType != "int64" {
		bad("label dtype is %q; packer writes int64 labels", m.Label.DType)
	}
	aux := map[string]bool{}
	for _, a := range m.Label.Aux {
		if a == "" || aux[a] {
			bad("label aux name %q is empty or repeated", a)
		}
		aux[a] = true
	}
	if !knownVersion(m.FormatVersion) {
		bad("format_version %d is not a known shard format version (%v)", m.FormatVersion, knownVersions)
	}
	if len(m.Fields) > 0 {
		if err := shard.ValidateFields(m.Fields, m.Sample); err != nil {
			bad("fields: %v", err)
		}
		if m.Format == shard.FormatShards && m.FormatVersion < 3 {
			bad("fields listed with format_version %d (fields are format version 3)", m.FormatVersion)
		}
	}
	seen := map[string]bool{}
	var next int64
	for _, f := range m.Files {
		if seen[f.Path] {
			bad("file %s is listed twice", f.Path)
		}
		seen[f.Path] = true
		if len(f.SHA256) != 64 {
			bad("file %s: sha256 %q is not 64 hex digits", f.Path, f.SHA256)
		}
		if m.Format != shard.FormatShards && (f.FirstRecord != 0 || f.Records != 0 && f.Records != m.Count) {
			bad("file %s: records %d from %d, but a %s file holds all %d records", f.Path, f.Records, f.FirstRecord, m.Format, m.Count)
		}
		if m.Format == shard.FormatShards {
			if f.FirstRecord != next {
				bad("file %s: first_record is %d, want %d", f.Path, f.FirstRecord, next)
			}
			next += f.Records
		}
	}
	if m.Format == shard.FormatShards && next != m.Count {
		bad("files hold %s but count is %d", humanize.Count(next, "record"), m.Count)
	}
	checkInputs(m, bad)
	if err := shard.CheckCuts(m); err != nil {
		bad("%v", err)
	}
	if _, _, err := m.BuildShuffle(); err != nil {
		bad("%v", err)
	}
}

// checkInputs checks the manifest's input count against what it says was packed and skipped:
// every enumerated input is packed or skipped. Sources of video (video, frames) pack one or
// more records per input; every other source packs exactly one.
func checkInputs(m *shard.Manifest, bad func(string, ...any)) {
	skipped := int64(len(m.Skipped))
	kind, _ := m.Source["kind"].(string)
	switch {
	case m.Inputs < skipped:
		bad("inputs is %d, fewer than the %d skipped", m.Inputs, skipped)
	case kind == "video" || kind == "frames":
		if m.Inputs-skipped > m.Count {
			bad("inputs %d less %d skipped leaves %d packed inputs, more than the %d records", m.Inputs, skipped, m.Inputs-skipped, m.Count)
		}
	case m.Inputs != m.Count+skipped:
		bad("inputs is %d, but %d records and %d skipped inputs account for %d", m.Inputs, m.Count, skipped, m.Count+skipped)
	}
}

// knownVersions are the shard format versions (FORMAT.md) verify accepts.
var knownVersions = []int{1, 2, 3, 4}

func knownVersion(v int) bool { return slices.Contains(knownVersions, v) }

// checkExtra reports files of the dataset that the manifest does not list (add makes them
// warnings unless Options.Strict). A listing that fails is reported as a fault naming the
// folder it could not read.
func checkExtra(ctx context.Context, b storage.Backend, m *shard.Manifest, add func(Fault)) {
	listed := map[string]bool{shard.ManifestName: true}
	for _, f := range m.Files {
		listed[f.Path] = true
	}
	err := b.List(ctx, func(fi storage.FileInfo) error {
		if !listed[fi.Name] {
			add(Fault{File: fi.Name, Kind: KindExtra, First: -1, Offset: -1, Message: "file is not listed in the manifest"})
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		file := ""
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			file = pe.Path
		}
		add(Fault{File: file, Kind: KindIO, First: -1, Offset: -1, Message: err.Error()})
	}
}

// checkFile checks one listed file: size, SHA-256 and, for shards, structure and checksums.
// The file is read once, sequentially, in large O_DIRECT reads where the file system allows
// them (see shard.ScanOptions): a shard's scan hashes the very bytes it checks, other files are
// only hashed.
func checkFile(ctx context.Context, s *store, m *shard.Manifest, fe shard.FileEntry, vopts Options, add func(Fault), progress func(int64), records *atomic.Int64, sh *shardTally) error {
	st, err := s.b.Stat(ctx, fe.Path)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, fs.ErrNotExist) {
		add(Fault{File: fe.Path, Kind: KindMissing, First: -1, Offset: -1, Message: "file listed in the manifest does not exist"})
		return nil
	}
	if err != nil {
		add(Fault{File: fe.Path, Kind: KindIO, First: -1, Offset: -1, Message: err.Error()})
		return nil
	}
	if st.Size != fe.Size {
		add(Fault{File: fe.Path, Kind: KindSize, First: -1, Offset: -1,
			Message: fmt.Sprintf("size is %d bytes, manifest says %d", st.Size, fe.Size)})
	}
	h := &ctxHash{Hash: sha256.New(), ctx: ctx}
	if vopts.Tee != nil {
		h.tee = vopts.Tee(fe)
	}
	opts := shard.ScanOptions{Hash: h, Progress: progress, Direct: !vopts.Cached}
	var complete bool
	if m.Format == shard.FormatShards && strings.HasSuffix(fe.Path, ".pks") {
		complete = scanShard(ctx, s, fe, m, opts, add, records, sh)
	} else {
		err := s.stream(ctx, fe.Path, opts)
		complete = err == nil
		if err != nil && ctx.Err() == nil {
			add(Fault{File: fe.Path, Kind: KindIO, First: -1, Offset: -1, Message: err.Error()})
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !complete {
		return nil // the read failed, reported above; the hash is of part of the file
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != strings.ToLower(fe.SHA256) {
		add(Fault{File: fe.Path, Kind: KindSHA256, First: -1, Offset: -1,
			Message: fmt.Sprintf("SHA-256 is %s, manifest says %s", sum, fe.SHA256)})
	}
	return nil
}

// ctxHash is the hash a scan feeds; once ctx is cancelled its Write fails, which stops the scan.
// Its tee, when set, receives the same bytes after the hash (Options.Tee).
type ctxHash struct {
	hash.Hash
	ctx context.Context
	tee io.Writer
}

func (h *ctxHash) Write(p []byte) (int, error) {
	if err := h.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := h.Hash.Write(p)
	if h.tee != nil && err == nil {
		return h.tee.Write(p)
	}
	return n, err
}

// stream reads the file name once for opts.Hash: by path (O_DIRECT where allowed) on the local
// file system, through the backend elsewhere.
func (s *store) stream(ctx context.Context, name string, opts shard.ScanOptions) error {
	if s.local != nil {
		return shard.StreamFile(s.local.LocalPath(name), opts)
	}
	r, err := s.b.Open(ctx, name)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	defer r.Close()
	return shard.Stream(r, r.Size(), name, opts)
}

// scan scans the shard name like shard.ScanFile, through the backend where it is not local.
func (s *store) scan(ctx context.Context, name string, opts shard.ScanOptions, report func(*shard.CorruptionError)) error {
	if s.local != nil {
		return shard.ScanFile(s.local.LocalPath(name), opts, report)
	}
	r, err := s.b.Open(ctx, name)
	if err != nil {
		return fmt.Errorf("scan shard: %w", err)
	}
	defer r.Close()
	return shard.ScanWith(r, r.Size(), name, opts, report)
}
