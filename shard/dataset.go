package shard

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Dataset is a packed dataset directory: its manifest and its shards, with records numbered
// across shards in manifest order (ORDER.md). A dataset of format FormatNPY (a fixed-size
// images.npy with labels.npy) is read the same way, as one shard holding every record: its
// one "shard" is images.npy (NumShards is 1, ShardPath(0) names images.npy), and ORDER.md
// treats it as one unit, as the Python reader does. npy files carry no checksums, so their
// records are not CRC-checked (packer verify checks the files' SHA-256).
//
// Shards are opened on first use (each open reads the shard's header, footer and index and
// checks them against the manifest, the index against its index_sha256 where the manifest
// has one) and stay open until Close. A dataset on the local file system holds its directory
// open from OpenDataset to Close, and opens every file in that directory: when the dataset is
// replaced while it is read (packer build --force renames a new directory to its path), the
// Dataset goes on serving its own records, or fails where the old files are gone; it never
// serves the new dataset's. A Dataset is safe for concurrent use.
type Dataset struct {
	dir   string
	fsys  FS
	m     *Manifest
	opts  ReaderOptions
	pin   *pinnedFS   // the dataset directory, held open, where the dataset is local; nil otherwise
	names []string    // the shards' names in fsys
	paths []string    // the shards' names in messages: their local paths where fsys is local
	files []FileEntry // the shards' manifest entries
	first []int64     // first[s] is the first record of shard s; first[len] is the count
	npy   bool        // format FormatNPY: one "shard", images.npy

	mu      sync.Mutex
	readers []*Reader
	stats   []os.FileInfo // of each open Reader's file, where local: what other opens must find

	pool ringPool // ring buffers of the default allocator, kept between Loaders
}

// OpenDataset opens the dataset in dir through its manifest.json, which must have format
// FormatShards or FormatNPY. Checksums of the records read are checked (shards have them).
func OpenDataset(dir string) (*Dataset, error) { return OpenDatasetOptions(dir, ReaderOptions{}) }

// OpenDatasetOptions is OpenDataset with options for the shard readers.
func OpenDatasetOptions(dir string, opts ReaderOptions) (*Dataset, error) {
	return openDataset(DirFS(dir), dir, opts)
}

// OpenDatasetFS opens the dataset fsys holds, like OpenDatasetOptions, reading every file
// through fsys. Where fsys is a LocalFS, the Loader reads the shards by path (with O_DIRECT
// when asked); otherwise through fsys.
func OpenDatasetFS(fsys FS, opts ReaderOptions) (*Dataset, error) {
	return openDataset(fsys, fsName(fsys, "."), opts)
}

func openDataset(fsys FS, dir string, opts ReaderOptions) (d *Dataset, err error) {
	var pin *pinnedFS
	if l, ok := fsys.(LocalFS); ok {
		// The manifest and every shard are read in the directory pinned now.
		if pin, err = pinLocal(l); err != nil {
			return nil, err
		}
		fsys = pin
		defer func() {
			if d == nil {
				pin.close()
			}
		}()
	}
	m, err := ReadManifestFS(fsys)
	if err != nil {
		return nil, err
	}
	if m.Format != FormatShards && m.Format != FormatNPY {
		return nil, fmt.Errorf("%s: dataset format %q, want %q or %q", dir, m.Format, FormatShards, FormatNPY)
	}
	if m.FormatVersion < MinVersion || m.FormatVersion > Version {
		return nil, fmt.Errorf("%s: shard format version %d: %w", dir, m.FormatVersion, ErrVersion)
	}
	if len(m.Fields) > 0 {
		if err := ValidateFields(m.Fields, m.Sample); err != nil {
			return nil, fmt.Errorf("%s: manifest: %w", dir, err)
		}
		if m.Format == FormatShards && m.FormatVersion < 3 {
			return nil, fmt.Errorf("%s: the manifest lists fields with format_version %d (fields are version 3)", dir, m.FormatVersion)
		}
	}
	if err := CheckCuts(m); err != nil {
		return nil, fmt.Errorf("%s: manifest: %w", dir, err)
	}
	d = &Dataset{dir: dir, fsys: fsys, pin: pin, m: m, opts: opts, npy: m.Format == FormatNPY}
	for _, f := range m.Files {
		if d.npy && f.Path == npyImages || !d.npy && strings.HasSuffix(f.Path, ".pks") {
			d.names = append(d.names, f.Path)
			d.paths = append(d.paths, fsName(fsys, f.Path))
			d.files = append(d.files, f)
		}
	}
	d.readers = make([]*Reader, len(d.paths))
	d.stats = make([]os.FileInfo, len(d.paths))
	d.first = make([]int64, len(d.paths)+1)
	// Record counts come from the manifest when it has them all; otherwise from the shards.
	var sum int64
	known := true
	for s, f := range shardEntries(m) {
		d.first[s] = sum
		sum += f.Records
		known = known && f.Records > 0
	}
	if d.npy {
		if len(d.paths) != 1 {
			return nil, fmt.Errorf("%s: an npy dataset whose manifest does not list %s", dir, npyImages)
		}
		sum, known = m.Count, true // images.npy holds every record; its header is checked at open
	}
	if !known || sum != m.Count {
		sum = 0
		clear(d.first)
		for s := range d.paths {
			r, err := d.Shard(s)
			if err != nil {
				d.Close()
				return nil, err
			}
			d.first[s] = sum
			sum += int64(r.Len())
		}
	}
	d.first[len(d.paths)] = sum
	if sum != m.Count {
		d.Close()
		return nil, fmt.Errorf("%s: the shards hold %d records, the manifest says %d", dir, sum, m.Count)
	}
	return d, nil
}

func shardEntries(m *Manifest) []FileEntry {
	var out []FileEntry
	for _, f := range m.Files {
		if strings.HasSuffix(f.Path, ".pks") {
			out = append(out, f)
		}
	}
	return out
}

// Close closes every open shard and frees the ring buffers kept for the next Loader; buffers
// of Loaders still open are freed when they close.
func (d *Dataset) Close() error {
	err := d.pool.release(true)
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range d.readers {
		if r != nil {
			err = errors.Join(err, r.Close())
			d.readers[i] = nil
		}
	}
	if d.pin != nil {
		err = errors.Join(err, d.pin.close())
	}
	return err
}

// ReleaseBuffers frees the ring buffers that Loaders using the default allocator handed back
// on Close and that the Dataset keeps for the next Loader (see Loader). Loaders still open
// keep theirs.
func (d *Dataset) ReleaseBuffers() error { return d.pool.release(false) }

// Manifest returns the dataset's manifest. The caller must not modify it.
func (d *Dataset) Manifest() *Manifest { return d.m }

// Dir returns the dataset directory (for a dataset opened by OpenDatasetFS, its name in
// messages).
func (d *Dataset) Dir() string { return d.dir }

// Len returns the number of records.
func (d *Dataset) Len() int64 { return d.first[len(d.paths)] }

// NumShards returns the number of shards.
func (d *Dataset) NumShards() int { return len(d.paths) }

// ShardPath returns the file path of shard s (for a dataset opened by OpenDatasetFS over an
// FS that is not local, its name in the FS).
func (d *Dataset) ShardPath(s int) string { return d.paths[s] }

// ShardCounts returns the record count of every shard, the input of EpochOrder.
func (d *Dataset) ShardCounts() []int64 {
	c := make([]int64, len(d.paths))
	for s := range c {
		c[s] = d.first[s+1] - d.first[s]
	}
	return c
}

// Locate returns the shard holding record i and the record's number within it. It panics if i
// is out of range.
func (d *Dataset) Locate(i int64) (shard int, local int) {
	if i < 0 || i >= d.Len() {
		panic(fmt.Sprintf("shard: record %d out of range [0, %d) in %s", i, d.Len(), d.dir))
	}
	s := sort.Search(len(d.paths), func(s int) bool { return d.first[s+1] > i })
	return s, int(i - d.first[s])
}

// Shard returns the reader of shard s, opening it on first use and checking it against the
// manifest (sample spec, aux columns, shard index, record count).
func (d *Dataset) Shard(s int) (*Reader, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.readers[s]; r != nil {
		return r, nil
	}
	var r *Reader
	var err error
	if d.npy {
		r, err = openNpy(d.fsys, d.m, d.opts)
	} else {
		r, err = OpenFS(d.fsys, d.names[s], d.opts)
	}
	if err != nil {
		return nil, err
	}
	spec, want := r.Spec(), d.m.Sample
	bad := ""
	switch {
	case !slices.Equal(spec.Shape, want.Shape) || spec.DType != want.DType || spec.Layout != want.Layout:
		bad = fmt.Sprintf("sample spec %v %s %s, the manifest says %v %s %s", spec.Shape, spec.DType, spec.Layout, want.Shape, want.DType, want.Layout)
	case !slices.Equal(r.LabelSpec().Aux, d.m.Label.Aux) && len(r.LabelSpec().Aux)+len(d.m.Label.Aux) > 0:
		bad = fmt.Sprintf("aux columns %q, the manifest says %q", r.LabelSpec().Aux, d.m.Label.Aux)
	case !d.npy && !FieldsEqual(r.h.schema, d.m.Fields):
		bad = fmt.Sprintf("fields %s, the manifest says %s (a shard of a dataset with another schema)", FieldsString(r.h.schema), FieldsString(d.m.Fields))
	case r.Version() > d.m.FormatVersion:
		bad = fmt.Sprintf("shard format version %d, the manifest says format_version %d", r.Version(), d.m.FormatVersion)
	case r.Cut() == nil && r.ShardIndex() != s:
		bad = fmt.Sprintf("shard index %d at position %d of the manifest", r.ShardIndex(), s)
	case r.Cut() == nil && d.files[s].Shard != nil:
		bad = fmt.Sprintf("a version-%d shard, where the manifest lists the version-4 shard of chunk %d piece %d", r.Version(), d.files[s].Shard.Chunk, d.files[s].Shard.Piece)
	case r.Cut() != nil && (d.files[s].Shard == nil || *d.files[s].Shard != *r.Cut()):
		bad = fmt.Sprintf("shard of chunk %d piece %d at position %d of the manifest, which lists %s there", r.Cut().Chunk, r.Cut().Piece, s, cutString(d.files[s].Shard))
	case datasetDiff(r, d.m) != "":
		bad = fmt.Sprintf("the shard header's dataset %s differ from the manifest's (a shard of another build, or an edited manifest)", datasetDiff(r, d.m))
	case d.first[s+1] != 0 && int64(r.Len()) != d.first[s+1]-d.first[s]:
		bad = fmt.Sprintf("%d records, the manifest says %d", r.Len(), d.first[s+1]-d.first[s])
	case !d.npy && r.Size() != d.files[s].Size:
		bad = fmt.Sprintf("file is %d bytes, the manifest says %d", r.Size(), d.files[s].Size)
	case !d.npy && d.files[s].IndexSHA256 != "" && r.IndexSHA256() != d.files[s].IndexSHA256:
		bad = fmt.Sprintf("index_sha256 %s, the manifest says %s: a shard of another build (same names and options, other content: "+
			"an rsync of a rebuild?) or a changed file; its records are not this dataset's", r.IndexSHA256(), d.files[s].IndexSHA256)
	}
	if bad != "" {
		r.Close()
		return nil, fmt.Errorf("%s: %s", d.paths[s], bad)
	}
	d.readers[s] = r
	if f, ok := r.file.(*osFile); ok {
		if st, err := f.Stat(); err == nil {
			d.stats[s] = st
		}
	}
	return r, nil
}

// openLocal opens shard s of a local dataset for the Loader's own reads (with O_DIRECT when
// direct is asked for and allowed), in the pinned directory, and checks that it is the very
// file the shard's Reader checked against the manifest: not one renamed over it since.
func (d *Dataset) openLocal(s int, direct bool) (*os.File, bool, error) {
	f, direct, err := d.pin.openFile(d.names[s], direct)
	if err != nil {
		return nil, false, err
	}
	d.mu.Lock()
	want := d.stats[s]
	d.mu.Unlock()
	st, err := f.Stat()
	if err == nil && want != nil && !os.SameFile(st, want) {
		err = fmt.Errorf("%s: the file was replaced since the dataset opened it; reopen the dataset", d.paths[s])
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return f, direct, nil
}

func (d *Dataset) checkRecord(i int64) error {
	if i < 0 || i >= d.Len() {
		return fmt.Errorf("shard: %s: record %d out of range [0, %d)", d.dir, i, d.Len())
	}
	return nil
}

// Fields returns the dataset's schema from its manifest (FORMAT.md "Fields"), nil for a dataset
// without fields. Every shard's schema is checked against it when the shard is opened. An npy
// dataset keeps its fields in files of their own, which this package does not read: Fields is
// nil for it, and its records are samples only.
func (d *Dataset) Fields() []Field {
	if d.npy {
		return nil
	}
	return slices.Clone(d.m.Fields)
}

// RecordFields returns record i's sample value and its field values in schema order (see
// Reader.SplitFields); fields is nil for a dataset without fields.
func (d *Dataset) RecordFields(i int64) (sample []byte, fields [][]byte, err error) {
	rec, err := d.Record(i)
	if err != nil {
		return nil, nil, err
	}
	s, j := d.Locate(i)
	r, err := d.Shard(s)
	if err != nil {
		return nil, nil, err
	}
	return r.SplitFields(j, rec)
}

// Record returns a new slice holding the bytes of record i (numbered across shards). In a
// dataset with fields the record's field values follow its sample value: see RecordFields.
func (d *Dataset) Record(i int64) ([]byte, error) {
	if err := d.checkRecord(i); err != nil {
		return nil, err
	}
	s, j := d.Locate(i)
	r, err := d.Shard(s)
	if err != nil {
		return nil, err
	}
	if ra, ok := r.r.(RangeReaderAt); ok && d.exactReads(ra) {
		return r.recordExact(j, ra)
	}
	return r.Record(j)
}

// exactReads reports whether records read at random from the dataset, whose files are
// RangeReaderAts like ra, are to be read with exact ranged reads rather than through the
// files' cache: when the dataset holds more than half of the cache, a chunk fetched for one
// record is likely evicted before a neighbour of it is asked for.
func (d *Dataset) exactReads(ra RangeReaderAt) bool {
	if d.pin != nil {
		return false
	}
	var total int64
	for _, f := range d.files {
		total += f.Size
	}
	return total > ra.CacheBytes()/2
}

// Label returns the label of record i.
func (d *Dataset) Label(i int64) (int64, error) {
	if err := d.checkRecord(i); err != nil {
		return 0, err
	}
	s, j := d.Locate(i)
	r, err := d.Shard(s)
	if err != nil {
		return 0, err
	}
	return r.Label(j), nil
}

// RecordShape returns the shape of record i (see Reader.RecordShape): the sample shape for a
// fixed-size dataset, the record's own shape for a variable-size one.
func (d *Dataset) RecordShape(i int64) ([]int, error) {
	if err := d.checkRecord(i); err != nil {
		return nil, err
	}
	if d.m.Sample.Fixed() {
		return slices.Clone(d.m.Sample.Shape), nil
	}
	s, j := d.Locate(i)
	r, err := d.Shard(s)
	if err != nil {
		return nil, err
	}
	return r.RecordShape(j)
}

// datasetDiff names the keys of the shard header's "dataset" description (packer version,
// source, transform, classes) that differ from the manifest's; "" when they agree or the
// header has none.
func datasetDiff(r *Reader, m *Manifest) string {
	ds, ok := r.Meta()["dataset"].(map[string]any)
	if !ok {
		return ""
	}
	return strings.Join(DatasetMetaDiff(ds, m), ", ")
}

// cutString names a manifest entry's chunk and piece, or their absence.
func cutString(c *ShardCut) string {
	if c == nil {
		return "a shard with no chunk and piece (not version 4)"
	}
	return fmt.Sprintf("chunk %d piece %d", c.Chunk, c.Piece)
}

// CheckCuts checks the chunks and pieces of the shards of a dataset cut at fixed input
// positions (cut_inputs, FORMAT.md "Dataset"): every shard entry has one, chunks do not
// decrease, and a chunk's pieces are numbered 0, 1, ... in order. A dataset without cut_inputs
// has none.
func CheckCuts(m *Manifest) error {
	if m.Format != FormatShards {
		return nil
	}
	var prev *ShardCut
	for _, f := range shardEntries(m) {
		c := f.Shard
		switch {
		case m.CutInputs == 0 && c != nil:
			return fmt.Errorf("%s has a chunk and piece, and the manifest no cut_inputs", f.Path)
		case m.CutInputs == 0:
			continue
		case c == nil:
			return fmt.Errorf("cut_inputs %d, and %s has no chunk and piece", m.CutInputs, f.Path)
		case prev == nil && c.Piece != 0,
			prev != nil && c.Chunk == prev.Chunk && c.Piece != prev.Piece+1,
			prev != nil && c.Chunk != prev.Chunk && (c.Chunk < prev.Chunk || c.Piece != 0):
			return fmt.Errorf("%s is chunk %d piece %d, out of order after %s", f.Path, c.Chunk, c.Piece, cutString(prev))
		}
		prev = c
	}
	return nil
}
