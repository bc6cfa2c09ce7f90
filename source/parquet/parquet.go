package parquet

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/source/internal/memdecode"
	"github.com/packer-dev/packer/transforms"
)

// Kind is the source kind's --from name.
const Kind = "parquet"

// DefaultLabelColumn is the label column's default name.
const DefaultLabelColumn = "label"

// Limits on string labels, which become the dataset's class names (read from every file at
// open, held, and written to the manifest): a column past them does not hold class names.
const (
	MaxClasses   = 1 << 16 // distinct string labels
	MaxClassName = 4096    // bytes of one string label
)

// Errors a skipped row's reason wraps.
var (
	ErrNullImage = errors.New("null image")
	ErrNullLabel = errors.New("null label")
	ErrLabel     = errors.New("bad label")
	ErrFile      = errors.New("file unreadable from here on")
)

// Options configure a Source.
type Options struct {
	// Decode is passed to transforms.DecodeBytes (pixel cap, EXIF orientation); with --fast
	// the build's transform sets Decode.Draft (PlanDecode).
	Decode transforms.DecodeOptions
	// ImageColumn and LabelColumn name the columns; "" means the defaults.
	ImageColumn, LabelColumn string
	// Classes names the labels (--classes): label i is Classes[i].
	Classes []string
	// Fields names further columns to carry as fields (--fields); see fields.go.
	Fields []string
	// Files, when set, serves the bytes of the files below the source's path, which is then a
	// view of an object store's listing (source.Options.Files): each file is read by ranged
	// reads, never copied.
	Files source.Files
}

// Source is a source.Source over Parquet files.
type Source struct {
	root       string
	files      []string
	opts       Options
	imagePath  []string // leaf path of the image bytes
	labelPath  []string
	strLabels  bool             // the label column holds strings
	index      map[string]int64 // string label -> class index
	classes    []string
	dec        memdecode.Decoder
	pqFields   []pqField // the requested fields (Options.Fields)
	labelGiven bool      // --label-column was given (so it must exist)
}

var _ source.PlannedSource = (*Source)(nil)

// Open opens one Parquet file or a folder of them, checks their columns, and for string labels
// reads every file's label column to list the classes.
func Open(p string, opts Options) (*Source, error) {
	labelGiven := opts.LabelColumn != ""
	if opts.LabelColumn == "" {
		opts.LabelColumn = DefaultLabelColumn
	}
	if err := fsentry.CheckClasses(opts.Classes); err != nil {
		return nil, fmt.Errorf("parquet: --classes: %w", err)
	}
	s := &Source{opts: opts, dec: memdecode.Decoder{Opts: opts.Decode}, labelGiven: labelGiven}
	// A folder of a view in memory is listed through Options.Files (source.Lister).
	fi, err := source.Stat(opts.Files, p)
	if err != nil && strings.ContainsAny(filepath.Base(p), "*?[") && !strings.ContainsAny(filepath.Dir(p), "*?[") {
		// A glob in the file name: its matches, sorted.
		matches, gerr := glob(opts.Files, p)
		if gerr != nil {
			return nil, fmt.Errorf("parquet: %s: %w", p, gerr)
		}
		for _, m := range matches {
			if st, err := source.Stat(opts.Files, m); err == nil && st.Mode().IsRegular() {
				s.files = append(s.files, filepath.Base(m))
			}
		}
		if len(s.files) == 0 {
			return nil, fmt.Errorf("parquet: %s matches no file", p)
		}
		sort.Strings(s.files)
		s.root = filepath.Dir(p)
		if err := fsentry.SameFiles(s.root, s.files); err != nil {
			return nil, fmt.Errorf("parquet: %s: %w", p, err)
		}
		if err := s.inspectSafely(p); err != nil {
			return nil, err
		}
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	if !fi.IsDir() {
		s.root, s.files = filepath.Dir(p), []string{filepath.Base(p)}
	} else {
		ents, err := source.ReadDir(opts.Files, p)
		if err != nil {
			return nil, fmt.Errorf("parquet: %w", err)
		}
		for _, e := range ents {
			if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(strings.ToLower(e.Name()), ".parquet") {
				s.files = append(s.files, e.Name())
			}
		}
		if len(s.files) == 0 {
			return nil, fmt.Errorf("parquet: %s: no .parquet file", p)
		}
		sort.Strings(s.files)
		s.root = p
		if err := fsentry.SameFiles(p, s.files); err != nil {
			return nil, fmt.Errorf("parquet: %s: %w", p, err)
		}
	}
	if err := s.inspectSafely(p); err != nil {
		return nil, err
	}
	return s, nil
}

// inspectSafely runs inspect, turning a panic of the Parquet reader into an error naming p
// (a file, a folder or a glob).
func (s *Source) inspectSafely(p string) error {
	if err := noPanic(s.inspect); err != nil {
		if errors.Is(err, errPanic) {
			return fmt.Errorf("parquet: %s: %w", p, err)
		}
		return err
	}
	return nil
}

// errPanic is what noPanic makes of a panic of the Parquet reader.
var errPanic = errors.New("the Parquet reader failed on damaged data")

// noPanic runs fn, which reads Parquet data through parquet-go, and turns a panic of the reader
// on damaged data (for example a page header whose negative size it passes to make, found by
// FuzzParquet) into an error: a hostile file is a bad input, never a crash.
func noPanic(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %w (%v)", ErrFile, errPanic, r)
		}
	}()
	return fn()
}

// glob is filepath.Glob of a pattern in the file name only, matched against the names of a
// view's folder through files where it is a source.Lister (sorted, as ReadDir lists them).
func glob(files source.Files, pattern string) ([]string, error) {
	l := source.ListerOf(files)
	if l == nil {
		return filepath.Glob(pattern)
	}
	dir, base := filepath.Split(pattern)
	if _, err := filepath.Match(base, ""); err != nil {
		return nil, err
	}
	ents, err := l.ReadDir(filepath.Clean(dir))
	if err != nil {
		return nil, nil // as Glob, which ignores I/O errors
	}
	var out []string
	for _, e := range ents {
		if ok, _ := filepath.Match(base, e.Name()); ok {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// open opens one file of the source: from the file system, or by ranged reads through
// Options.Files, pinned to st (or nil: to the listing).
func (s *Source) open(name string, st *source.Stamp) (*pq.File, source.ReadAtCloser, error) {
	var f source.ReadAtCloser
	var size int64
	if s.opts.Files != nil {
		var err error
		if f, size, err = s.opts.Files.OpenAt(context.Background(), filepath.Join(s.root, name), st); err != nil {
			return nil, nil, err
		}
	} else {
		lf, err := fsentry.Open(filepath.Join(s.root, name))
		if err != nil {
			return nil, nil, err
		}
		st, err := lf.Stat()
		if err != nil {
			lf.Close()
			return nil, nil, err
		}
		f, size = lf, st.Size()
	}
	if s.opts.Files != nil {
		f = &windowed{ReadAtCloser: f, size: size, group: -1}
	}
	if err := checkFooter(f, size); err != nil {
		f.Close()
		return nil, nil, err
	}
	opts := []pq.FileOption{pq.SkipPageIndex(true), pq.SkipBloomFilters(true)}
	if s.opts.Files != nil {
		// Read from a store, each read one request: a page header is read with the pages
		// after it, up to the end of its column chunk, rather than 4 KiB at a time. (The
		// reader also reads this much of the file's end at once for its footer.)
		opts = append(opts, pq.ReadBufferSize(readBufferSize))
	}
	pf, err := pq.OpenFile(f, size, opts...)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return pf, f, nil
}

// windowed is a file read through Options.Files whose column chunks of the row group being read
// are held in memory, each fetched once with one ranged read (up to maxWindows bytes in all):
// checkChunk reads a chunk whole before parquet-go reads it again, and without them the
// store would be asked for its bytes twice. Reads outside them go to the store.
type windowed struct {
	source.ReadAtCloser
	size  int64
	group int // the row group whose chunks wins holds
	wins  []window
	held  int64
}

type window struct {
	off  int64
	data []byte
}

// maxWindows bounds the bytes of the column chunks a windowed file holds: the chunks of a
// larger row group are read from the store for the check and again for their values.
const maxWindows = 256 << 20

// hold fetches the column chunk meta of row group group into memory, dropping those of
// another row group, where it fits in the file and the budget.
func (w *windowed) hold(group int, meta *format.ColumnMetaData) error {
	if group != w.group {
		w.group, w.wins, w.held = group, nil, 0
	}
	start := meta.DataPageOffset
	if meta.DictionaryPageOffset != 0 {
		start = meta.DictionaryPageOffset
	}
	n := meta.TotalCompressedSize
	if start < 4 || n <= 0 || start > w.size || n > w.size-start || w.held+n > maxWindows {
		return nil // checkChunk refuses a chunk outside the file; a large one is read twice
	}
	for _, win := range w.wins {
		if win.off == start && int64(len(win.data)) == n {
			return nil
		}
	}
	data := make([]byte, n)
	if _, err := w.ReadAtCloser.ReadAt(data, start); err != nil {
		return err
	}
	w.wins, w.held = append(w.wins, window{start, data}), w.held+n
	return nil
}

func (w *windowed) ReadAt(p []byte, off int64) (int, error) {
	for _, win := range w.wins {
		if off >= win.off && off+int64(len(p)) <= win.off+int64(len(win.data)) {
			return copy(p, win.data[off-win.off:]), nil
		}
	}
	return w.ReadAtCloser.ReadAt(p, off)
}

// readBufferSize is the Parquet reader's buffer of a file read through Options.Files.
const readBufferSize = 64 << 10

// checkFooter refuses a file whose footer length (the 4 bytes before the closing "PAR1") does not
// fit in the file. parquet-go allocates a buffer of the length the file claims before it reads
// the footer, so a damaged 100-byte file could otherwise make a build allocate up to 4 GiB (the
// fuzzer found it: a few such inputs took a process to 7 GB).
func checkFooter(f io.ReaderAt, size int64) error {
	const magic = "PAR1"
	if size < 12 {
		return fmt.Errorf("not a Parquet file: %d bytes, too short for the header and footer", size)
	}
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("reading the Parquet footer: %w", err)
	}
	if string(tail[4:]) != magic {
		return fmt.Errorf("not a Parquet file: it does not end with %q", magic)
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-12 {
		return fmt.Errorf("damaged Parquet file: its footer claims %d bytes, but the file has %d", n, size)
	}
	return nil
}

// inspect reads the first file's schema and metadata (columns, class names) and, for string
// labels, the label column of every file.
func (s *Source) inspect() error {
	pf, f, err := s.open(s.files[0], nil)
	if err != nil {
		return fmt.Errorf("parquet: %s: %w", s.files[0], err)
	}
	defer f.Close()
	schema := pf.Schema()
	var leaves []string
	for _, path := range schema.Columns() {
		leaves = append(leaves, strings.Join(path, "."))
	}
	img := []string{s.opts.ImageColumn}
	if s.opts.ImageColumn == "" {
		img = []string{"image", "img"}
	}
	for _, c := range img {
		if err := once(schema, []string{c, "bytes"}); err != nil {
			return fmt.Errorf("parquet: %s: %w", s.files[0], err)
		}
		for _, path := range [][]string{{c, "bytes"}, {c}} {
			if leaf, ok := schema.Lookup(path...); ok && leaf.Node.Type().Kind() == pq.ByteArray {
				s.imagePath = path
				break
			}
		}
		if s.imagePath != nil {
			break
		}
	}
	if s.imagePath == nil {
		return fmt.Errorf("parquet: %s: no image column %s (binary, or a struct with a binary \"bytes\" field); the columns are %s; name it with --image-column",
			s.files[0], strings.Join(img, " or "), strings.Join(leaves, ", "))
	}
	if err := once(schema, []string{s.opts.LabelColumn}); err != nil {
		return fmt.Errorf("parquet: %s: %w", s.files[0], err)
	}
	leaf, ok := schema.Lookup(s.opts.LabelColumn)
	if !ok && len(s.opts.Fields) > 0 && !s.labelGiven {
		// A dataset of captions or boxes has no class column: every label is -1.
		if err := s.resolveFields(schema); err != nil {
			return err
		}
		s.classes = s.opts.Classes
		return nil
	}
	if !ok {
		return fmt.Errorf("parquet: %s: no label column %q; the columns are %s; name it with --label-column", s.files[0], s.opts.LabelColumn, strings.Join(leaves, ", "))
	}
	s.labelPath = []string{s.opts.LabelColumn}
	switch leaf.Node.Type().Kind() {
	case pq.Int32, pq.Int64:
	case pq.ByteArray:
		s.strLabels = true
	default:
		return fmt.Errorf("parquet: %s: label column %q is %s, want an integer or a string", s.files[0], s.opts.LabelColumn, leaf.Node.Type())
	}
	if len(s.opts.Fields) > 0 {
		if err := s.resolveFields(schema); err != nil {
			return err
		}
	}
	s.classes = s.opts.Classes
	if s.strLabels {
		if len(s.opts.Classes) > 0 {
			return fmt.Errorf("parquet: --classes: the label column %q holds class names already", s.opts.LabelColumn)
		}
		return s.stringClasses()
	}
	if len(s.classes) == 0 {
		s.classes = hfNames(pf, s.opts.LabelColumn)
	}
	return nil
}

// hfNames returns the class names of a Hugging Face ClassLabel feature, if the file says.
func hfNames(pf *pq.File, column string) []string {
	v, ok := pf.Lookup("huggingface")
	if !ok {
		return nil
	}
	var meta struct {
		Info struct {
			Features map[string]struct {
				Type  string   `json:"_type"`
				Names []string `json:"names"`
			} `json:"features"`
		} `json:"info"`
	}
	if json.Unmarshal([]byte(v), &meta) != nil {
		return nil
	}
	if f, ok := meta.Info.Features[column]; ok && f.Type == "ClassLabel" && fsentry.CheckClasses(f.Names) == nil {
		return f.Names
	}
	return nil
}

// stringClasses reads every file's label column and makes the sorted classes.
func (s *Source) stringClasses() error {
	seen := map[string]bool{}
	for _, name := range s.files {
		pf, f, err := s.open(name, nil)
		if err != nil {
			return fmt.Errorf("parquet: %s: %w", name, err)
		}
		err = s.eachRowGroup(pf, func(i int, rg pq.RowGroup) error {
			col, err := s.column(pf, f, i, rg, s.labelPath)
			if err != nil {
				return err
			}
			return readValues(col, func(v pq.Value) error {
				if v.IsNull() {
					return nil
				}
				b := v.ByteArray()
				if len(b) > MaxClassName {
					return fmt.Errorf("a label of %d bytes, the limit for a class name is %d", len(b), MaxClassName)
				}
				if !seen[string(b)] {
					if len(seen) == MaxClasses {
						return fmt.Errorf("more than %d distinct labels: the label column %q does not hold class names", MaxClasses, s.opts.LabelColumn)
					}
					seen[string(b)] = true
				}
				return nil
			})
		})
		f.Close()
		if err != nil {
			return fmt.Errorf("parquet: %s: labels: %w", name, err)
		}
	}
	for c := range seen {
		s.classes = append(s.classes, c)
	}
	sort.Strings(s.classes)
	s.index = make(map[string]int64, len(s.classes))
	for i, c := range s.classes {
		s.index[c] = int64(i)
	}
	return nil
}

func (s *Source) eachRowGroup(pf *pq.File, fn func(int, pq.RowGroup) error) error {
	for i, rg := range pf.RowGroups() {
		if err := fn(i, rg); err != nil {
			return err
		}
	}
	return nil
}

// once refuses a schema in which a name along path (a column, a struct's field) names two
// fields: pyarrow writes such files, and readers disagree on which of the two a name means.
func once(n pq.Node, path []string) error {
	for i, name := range path {
		var next pq.Node
		k := 0
		for _, f := range n.Fields() {
			if f.Name() == name {
				next, k = f, k+1
			}
		}
		if k > 1 {
			return fmt.Errorf("two columns named %q: which one the name means is ambiguous", strings.Join(path[:i+1], "."))
		}
		if next == nil || next.Leaf() {
			return nil
		}
		n = next
	}
	return nil
}

// column returns the pages of the leaf at path in rg, the row group i of pf (read from f),
// once checkChunk has found that none of them is over MaxPageSize.
func (s *Source) column(pf *pq.File, f io.ReaderAt, i int, rg pq.RowGroup, path []string) (pq.Pages, error) {
	if err := once(pf.Schema(), path); err != nil {
		return nil, err
	}
	leaf, ok := pf.Schema().Lookup(path...)
	if !ok {
		return nil, fmt.Errorf("no column %s", strings.Join(path, "."))
	}
	groups := pf.Metadata().RowGroups
	c := leaf.ColumnIndex
	if i >= len(groups) || c >= len(groups[i].Columns) || c >= len(groups[0].Columns) || c >= len(rg.ColumnChunks()) {
		return nil, fmt.Errorf("row group %d has no column %s", i, strings.Join(path, "."))
	}
	if w, ok := f.(*windowed); ok {
		if err := w.hold(i, &groups[i].Columns[c].MetaData); err != nil {
			return nil, fmt.Errorf("column %s of row group %d: %w", strings.Join(path, "."), i, err)
		}
	}
	if err := checkChunk(f, pf.Size(), &groups[i].Columns[c].MetaData, groups[0].Columns[c].MetaData.Codec); err != nil {
		return nil, fmt.Errorf("column %s of row group %d: %w", strings.Join(path, "."), i, err)
	}
	return rg.ColumnChunks()[c].Pages(), nil
}

// readValues calls fn with every value of the pages, in order, and closes them.
func readValues(pages pq.Pages, fn func(pq.Value) error) error {
	defer pages.Close()
	buf := make([]pq.Value, 256)
	for {
		page, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		vr := page.Values()
		for {
			n, err := vr.ReadValues(buf)
			for _, v := range buf[:n] {
				if err := fn(v); err != nil {
					pq.Release(page)
					return err
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				pq.Release(page)
				return err
			}
		}
		pq.Release(page)
	}
}

// cursor reads the values of a column chunk's pages one by one, holding one page.
type cursor struct {
	pages pq.Pages
	page  pq.Page
	vr    pq.ValueReader
	buf   []pq.Value
	i, n  int
	done  bool // vr has no more values after buf[:n]
}

// next returns the next value, valid until the next call, or io.EOF after the last.
func (c *cursor) next() (pq.Value, error) {
	for c.i >= c.n {
		if c.vr != nil && !c.done {
			n, err := c.vr.ReadValues(c.buf)
			c.i, c.n = 0, n
			if err == io.EOF {
				c.done = true
			} else if err != nil {
				return pq.Value{}, err
			}
			continue
		}
		c.release()
		page, err := c.pages.ReadPage()
		if err != nil {
			return pq.Value{}, err
		}
		if c.buf == nil {
			c.buf = make([]pq.Value, 256)
		}
		c.page, c.vr, c.done = page, page.Values(), false
	}
	c.i++
	return c.buf[c.i-1], nil
}

func (c *cursor) release() {
	if c.page != nil {
		pq.Release(c.page)
		c.page, c.vr = nil, nil
	}
}

func (c *cursor) close() {
	c.release()
	c.pages.Close()
}

// PlanDecode takes the build's transform (memdecode.Decoder.Plan: the --fast scale).
func (s *Source) PlanDecode(p source.DecodePlan) { s.dec.Plan(p) }

// Info describes the source.
func (s *Source) Info() source.SourceInfo {
	labels := "integers"
	if s.strLabels {
		labels = "names"
	}
	return source.SourceInfo{
		Kind:    Kind,
		Classes: append([]string(nil), s.classes...),
		Spec: s.dec.Spec(map[string]any{
			"kind": Kind, "files": len(s.files), "image_column": strings.Join(s.imagePath, "."),
			"label_column": s.opts.LabelColumn, "labels": labels,
		}),
		HasMeta: true,
		Count:   -1,
		Fields:  s.fieldSchema(),
	}
}

// Enumerate reads the files in order and emits one item per row.
func (s *Source) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	return s.EnumerateLayout(ctx, emit, nil)
}

var _ source.RecordSource = (*Source)(nil)

// InputFiles are the Parquet files, in the order they are read.
func (s *Source) InputFiles() (string, []string) { return s.root, s.files }

// FileStamp is the stamp of one of InputFiles now (source.RecordSource).
func (s *Source) FileStamp(name string) source.Stamp {
	return source.StatStamp(s.opts.Files, filepath.Join(s.root, filepath.FromSlash(name)))
}

// EnumerateLayout is Enumerate that reports each file's row count and the rows of each of
// its row groups (source.RecordSource).
func (s *Source) EnumerateLayout(ctx context.Context, emit func(source.Item) error, file func(source.FileLayout) error) error {
	var groups []int64
	hook := file
	if file != nil {
		hook = func(l source.FileLayout) error {
			var n int64
			for _, g := range groups {
				n += g
			}
			if n == l.Items {
				l.Groups = groups
			}
			groups = nil
			return file(l)
		}
	}
	return source.EnumerateFiles(ctx, s, func(ctx context.Context, name string, seq *int64, emit func(source.Item) error) error {
		if file == nil {
			return s.enumerateFile(ctx, name, nil, 0, 0, seq, emit, nil)
		}
		return s.enumerateFile(ctx, name, nil, 0, 0, seq, emit, &groups)
	}, emit, hook)
}

// EnumerateRange emits the rows [lo, hi) (source.RecordSource): it opens only the files that
// hold them (reading each one's footer), and of those reads only the row groups that hold
// them, by ranged reads; within the first row group, the rows before lo are read and passed
// over.
func (s *Source) EnumerateRange(ctx context.Context, files []source.FileLayout, lo, hi int64, emit func(source.Item) error) error {
	return source.EnumerateFileRange(ctx, s.root, files, lo, hi, source.GroupStart, func(ctx context.Context, i int, first int64, seq *int64, emit func(source.Item) error) error {
		g, at := 0, int64(0)
		for ; at < first; g++ {
			at += files[i].Groups[g]
		}
		return s.enumerateFile(ctx, s.files[i], &files[i].Stamp, g, first, seq, emit, nil)
	}, emit)
}

// emitErr marks an error returned by the pipeline's emit, which ends the enumeration.
type emitErr struct{ error }

// enumerateFile emits the rows of the file name, pinned to st (or nil) where it is read through
// Options.Files, from the row group first (whose first row is the file's row row) on. With
// groups not nil, it appends the number of items of each row group read whole.
func (s *Source) enumerateFile(ctx context.Context, name string, st *source.Stamp, first int, row int64, seq *int64, emit func(source.Item) error, groups *[]int64) error {
	fname := fsentry.Name(name)
	send := func(it source.Item) error {
		it.Seq = *seq
		*seq++
		if err := emit(it); err != nil {
			return emitErr{err}
		}
		return nil
	}
	rest := func(err error) error {
		return send(source.Item{Name: fmt.Sprintf("%s (from row %d)", fname, row), Note: memdecode.Note{Err: fmt.Errorf("%w: %w", ErrFile, err)}})
	}
	var pf *pq.File
	var f source.ReadAtCloser
	err := noPanic(func() (err error) { pf, f, err = s.open(name, st); return err })
	if err != nil {
		return unwrapEmit(rest(err))
	}
	defer f.Close()
	if first > 0 {
		// A read that starts at a row group of a plan's layout: the footer's row groups before
		// it must hold the rows the plan says, else the rows would be numbered wrongly.
		var rows int64
		groups := pf.Metadata().RowGroups
		for _, g := range groups[:min(first, len(groups))] {
			rows += g.NumRows
		}
		if first > len(groups) || rows != row {
			return fmt.Errorf("%w: %s: its row group %d starts at row %d; the plan recorded row %d (make a new plan)",
				source.ErrLayout, filepath.Join(s.root, name), first, rows, row)
		}
	}
	err = noPanic(func() error {
		return s.eachRowGroup(pf, func(rgi int, rg pq.RowGroup) error {
			if err := ctx.Err(); err != nil {
				return emitErr{err}
			}
			if rgi < first {
				return nil
			}
			if groups != nil {
				at := row
				defer func() { *groups = append(*groups, row-at) }()
			}
			// The labels and the images page by page, side by side: memory holds one page of
			// each, whatever the row group's row count.
			var labels *cursor
			if s.labelPath != nil {
				lcol, err := s.column(pf, f, rgi, rg, s.labelPath)
				if err != nil {
					return err
				}
				labels = &cursor{pages: lcol}
				defer labels.close()
			}
			icol, err := s.column(pf, f, rgi, rg, s.imagePath)
			if err != nil {
				return err
			}
			images := &cursor{pages: icol}
			defer images.close()
			var frows [][]*rowReader
			for _, fld := range s.pqFields {
				var rs []*rowReader
				for _, l := range fld.leaves {
					col, err := s.column(pf, f, rgi, rg, l.path)
					if err != nil {
						return err
					}
					c := &cursor{pages: col}
					defer c.close()
					rs = append(rs, &rowReader{c: c, leaf: l})
				}
				frows = append(frows, rs)
			}
			for i := 0; ; i++ {
				v, err := images.next()
				if err == io.EOF {
					if labels == nil {
						return nil
					}
					if _, err := labels.next(); err != io.EOF {
						return fmt.Errorf("the image column has %d rows, the label column more", i)
					}
					return nil
				}
				if err != nil {
					return err
				}
				var raw []byte
				if !v.IsNull() {
					raw = append([]byte(nil), v.ByteArray()...)
				}
				var lv pq.Value
				if labels != nil {
					lv, err = labels.next()
					if err == io.EOF {
						return fmt.Errorf("the image column has more rows than the label column (%d)", i)
					}
					if err != nil {
						return err
					}
				}
				it := source.Item{Name: fmt.Sprintf("%s#%d", fname, row)}
				meta, _ := json.Marshal(map[string]any{"file": fname, "row": row})
				label, lerr := int64(-1), error(nil)
				if labels != nil {
					label, lerr = s.label(lv)
				}
				var values []source.FieldValue
				var ferr error
				if len(frows) > 0 {
					rows := make([][][]pq.Value, len(frows))
					for k, rs := range frows {
						for _, r := range rs {
							vals, err := r.next()
							if err == io.EOF {
								return fmt.Errorf("the image column has more rows than the column %s (%d)", strings.Join(r.leaf.path, "."), i)
							}
							if err != nil {
								return err
							}
							rows[k] = append(rows[k], vals)
						}
					}
					values, ferr = s.fieldValues(rows)
				}
				switch {
				case v.IsNull():
					it.Note = memdecode.Note{Err: ErrNullImage}
				case lerr != nil:
					it.Note = memdecode.Note{Err: lerr}
				case ferr != nil:
					it.Note = memdecode.Note{Err: ferr}
				default:
					it.Raw, it.Label, it.Note = raw, label, memdecode.Note{Meta: meta, Fields: values}
				}
				row++
				if err := send(it); err != nil {
					return err
				}
			}
		})
	})
	if err != nil {
		var ee emitErr
		if errors.As(err, &ee) {
			return ee.error
		}
		return unwrapEmit(rest(err))
	}
	return nil
}

func unwrapEmit(err error) error {
	var ee emitErr
	if errors.As(err, &ee) {
		return ee.error
	}
	return err
}

// label converts a label value to a class index.
func (s *Source) label(v pq.Value) (int64, error) {
	if v.IsNull() {
		return 0, ErrNullLabel
	}
	var l int64
	if s.strLabels {
		l = s.index[string(v.ByteArray())]
	} else {
		l = v.Int64()
		if v.Kind() == pq.Int32 {
			l = int64(v.Int32())
		}
	}
	if l < 0 || len(s.classes) > 0 && l >= int64(len(s.classes)) {
		return 0, fmt.Errorf("%w: %s, want 0..%d", ErrLabel, strconv.FormatInt(l, 10), len(s.classes)-1)
	}
	return l, nil
}

// Decode decodes the item's image with the source's decoder, or reports the fault Enumerate
// found in it.
func (s *Source) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	return s.dec.Decode(it, emit)
}
