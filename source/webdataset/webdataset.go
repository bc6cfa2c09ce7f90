package webdataset

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/source/internal/memdecode"
	"github.com/packer-dev/packer/transforms"
)

// Kind is the source kind's --from name.
const Kind = "webdataset"

// Extensions are the member extensions taken as a sample's image, in any case.
var Extensions = []string{"jpg", "jpeg", "png", "webp", "ppm", "pgm", "bmp", "tif", "tiff"}

// ShardExtensions are the file-name endings of shards in a source folder.
var ShardExtensions = []string{".tar", ".tar.gz", ".tgz"}

// MaxMemberSize bounds one member's size: a tar header can declare any size, and the member is
// held in memory until its sample is decoded.
const MaxMemberSize = 256 << 20

// Errors a bad sample's reason wraps.
var (
	ErrNoImage   = errors.New("no image member")
	ErrNoLabel   = errors.New("no label")
	ErrLabel     = errors.New("bad label")
	ErrTooLarge  = errors.New("member larger than the limit")
	ErrTruncated = errors.New("shard unreadable from here on")
	ErrDuplicate = errors.New("duplicate member")
	ErrField     = errors.New("bad field")
)

// MaxSampleMembers bounds the members of one sample: each is remembered (its extension) to
// find a second member of one name.
const MaxSampleMembers = 4096

// Options configure a Source.
type Options struct {
	// Decode is passed to transforms.DecodeBytes for every image (pixel cap, EXIF
	// orientation); with --fast the build's transform sets Decode.Draft (PlanDecode).
	Decode transforms.DecodeOptions
	// Classes names the labels (--classes): label i is Classes[i].
	Classes []string
	// ImageKey lists the member extensions taken as the image, comma separated, in order of
	// preference ("jpg,png"); "" means Extensions, first one found.
	ImageKey string
	// LabelKey names the field of the sample's .json member holding the label (an integer);
	// "" or "cls" means the .cls member.
	LabelKey string
	// Fields lists further member extensions to carry as fields (--fields txt,json): txt,
	// text and caption become text fields, json a json field, any other extension a bytes
	// field. With fields, a sample without a .cls member is packed with label -1.
	Fields []string
	// Files, when set, serves the bytes of the files below the source's path, which is then a
	// view of an object store's listing (source.Options.Files).
	Files source.Files
}

// Source is a source.Source over WebDataset tar shards.
type Source struct {
	root      string   // the folder, or the shard's folder, or the list's folder
	shards    []string // shard paths relative to root (slash-separated), in order
	imageExts []string // member extensions taken as the image, in order of preference
	opts      Options
	dec       memdecode.Decoder
	fields    []shard.Field // the schema of Options.Fields
	fieldExts []string      // lower-case member extension of each field
}

var _ source.PlannedSource = (*Source)(nil)

// Open opens a folder of shards or one shard file.
func Open(p string, opts Options) (*Source, error) {
	if err := fsentry.CheckClasses(opts.Classes); err != nil {
		return nil, fmt.Errorf("webdataset: --classes: %w", err)
	}
	// A folder of a view in memory is listed through Options.Files (source.Lister).
	fi, err := source.Stat(opts.Files, p)
	if err != nil {
		return nil, fmt.Errorf("webdataset: %w", err)
	}
	s := &Source{opts: opts, imageExts: Extensions, dec: memdecode.Decoder{Opts: opts.Decode}}
	if opts.ImageKey != "" {
		s.imageExts = nil
		for _, e := range strings.Split(opts.ImageKey, ",") {
			if e = strings.TrimPrefix(strings.TrimSpace(e), "."); e != "" {
				s.imageExts = append(s.imageExts, e)
			}
		}
		if len(s.imageExts) == 0 {
			return nil, fmt.Errorf("webdataset: --image-key %q names no extension", opts.ImageKey)
		}
	}
	if len(opts.Fields) > 0 {
		if err := s.setFields(opts.Fields); err != nil {
			return nil, err
		}
	}
	if opts.LabelKey == "cls" {
		s.opts.LabelKey = ""
	}
	if !fi.IsDir() && strings.HasSuffix(strings.ToLower(p), ".txt") {
		// A list of shard paths, one per line, relative to the list's folder; kept in its order.
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("webdataset: %w", err)
		}
		s.root = filepath.Dir(p)
		for i, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if !isShardName(line) {
				return nil, fmt.Errorf("webdataset: %s line %d: %q is not a shard (a file ending in %s)", p, i+1, line, strings.Join(ShardExtensions, ", "))
			}
			s.shards = append(s.shards, filepath.ToSlash(line))
		}
		if len(s.shards) == 0 {
			return nil, fmt.Errorf("webdataset: %s: the list names no shard", p)
		}
		if err := fsentry.SameFiles(s.root, s.shards); err != nil {
			return nil, fmt.Errorf("webdataset: %s: %w", p, err)
		}
		return s, nil
	}
	if !fi.IsDir() {
		s.root, s.shards = filepath.Dir(p), []string{filepath.Base(p)}
		return s, nil
	}
	ents, err := source.ReadDir(opts.Files, p)
	if err != nil {
		return nil, fmt.Errorf("webdataset: %w", err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") && isShardName(e.Name()) {
			s.shards = append(s.shards, e.Name())
		}
	}
	if len(s.shards) == 0 {
		return nil, fmt.Errorf("webdataset: %s: no shard (a file ending in %s)", p, strings.Join(ShardExtensions, ", "))
	}
	sort.Strings(s.shards)
	s.root = p
	if err := fsentry.SameFiles(p, s.shards); err != nil {
		return nil, fmt.Errorf("webdataset: %s: %w", p, err)
	}
	if err := compressedTwins(s.shards); err != nil {
		return nil, fmt.Errorf("webdataset: %s: %w", p, err)
	}
	return s, nil
}

// compressedTwins refuses a folder's shards among which one is named as the gzip copy of
// another (a.tar beside a.tar.gz or a.tgz, as gzip -k or gunzip -k leave them): both would be
// read, and every sample of the shard packed twice.
func compressedTwins(shards []string) error {
	plain := map[string]string{} // lower-case name of the uncompressed shard -> its name
	for _, n := range shards {
		if l := strings.ToLower(n); strings.HasSuffix(l, ".tar") {
			plain[l] = n
		}
	}
	for _, n := range shards {
		l := strings.ToLower(n)
		var stem string
		switch {
		case strings.HasSuffix(l, ".tar.gz"):
			stem = strings.TrimSuffix(l, ".gz")
		case strings.HasSuffix(l, ".tgz"):
			stem = strings.TrimSuffix(l, ".tgz") + ".tar"
		default:
			continue
		}
		if o, ok := plain[stem]; ok {
			return fmt.Errorf("%s and %s look like one shard, uncompressed and gzip-compressed: its samples would be packed twice; remove one of them (or name the shards to read in a .txt list)",
				fsentry.Name(o), fsentry.Name(n))
		}
	}
	return nil
}

func isShardName(name string) bool {
	lower := strings.ToLower(name)
	for _, ext := range ShardExtensions {
		if strings.HasSuffix(lower, ext) {
			return true
		}
	}
	return false
}

// PlanDecode takes the build's transform (memdecode.Decoder.Plan: the --fast scale).
func (s *Source) PlanDecode(p source.DecodePlan) { s.dec.Plan(p) }

// Info describes the source.
func (s *Source) Info() source.SourceInfo {
	return source.SourceInfo{
		Kind:    Kind,
		Classes: append([]string(nil), s.opts.Classes...),
		Spec: s.dec.Spec(map[string]any{
			"kind": Kind, "shards": len(s.shards), "image_extensions": s.imageExts, "label": s.labelSpec(),
		}),
		HasMeta: true,
		Count:   -1,
		Fields:  append([]shard.Field(nil), s.fields...),
	}
}

// setFields makes the schema of the requested member extensions.
func (s *Source) setFields(exts []string) error {
	names, err := source.CheckFieldNames(exts)
	if err != nil {
		return fmt.Errorf("webdataset: --fields: %w", err)
	}
	for i, e := range exts {
		le := strings.ToLower(strings.TrimPrefix(e, "."))
		if le == "cls" && s.opts.LabelKey == "" || s.imageRank(le) >= 0 {
			return fmt.Errorf("webdataset: --fields %s: that member is the sample's label or image", e)
		}
		kind := shard.KindBytes
		switch le {
		case "txt", "text", "caption":
			kind = shard.KindText
		case "json":
			kind = shard.KindJSON
		}
		s.fields = append(s.fields, source.ScalarField(names[i], kind))
		s.fieldExts = append(s.fieldExts, le)
	}
	return nil
}

// fieldIndex is the position of a member extension among the fields, -1 if none.
func (s *Source) fieldIndex(lext string) int {
	for i, e := range s.fieldExts {
		if e == lext {
			return i
		}
	}
	return -1
}

// sample is one group of members with the same key.
type sample struct {
	key       string
	image     []byte
	imageMem  string
	imageRank int // position of the image's extension in the preference list
	label     []byte
	hasLabel  bool
	fields    [][]byte          // values of the source's fields, nil where the member is missing
	exts      map[string]string // lower-case extension -> the member name that had it
	err       error
}

// Enumerate reads the shards in order and emits one item per sample.
func (s *Source) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	return s.EnumerateLayout(ctx, emit, nil)
}

var _ source.RecordSource = (*Source)(nil)

// InputFiles are the shards, in the order they are read.
func (s *Source) InputFiles() (string, []string) { return s.root, s.shards }

// FileStamp is the stamp of one of InputFiles now (source.RecordSource).
func (s *Source) FileStamp(name string) source.Stamp {
	return source.StatStamp(s.opts.Files, filepath.Join(s.root, filepath.FromSlash(name)))
}

// EnumerateLayout is Enumerate that reports each shard's sample count (source.RecordSource).
func (s *Source) EnumerateLayout(ctx context.Context, emit func(source.Item) error, file func(source.FileLayout) error) error {
	return source.EnumerateFiles(ctx, s, func(ctx context.Context, name string, seq *int64, emit func(source.Item) error) error {
		return s.enumerateShard(ctx, name, nil, seq, emit)
	}, emit, file)
}

// EnumerateRange emits the samples [lo, hi) (source.RecordSource): it opens only the shards
// that hold them; within the first, the samples before lo are read as a stream and passed
// over (a tar has no index to seek by), and the last is closed after sample hi-1.
func (s *Source) EnumerateRange(ctx context.Context, files []source.FileLayout, lo, hi int64, emit func(source.Item) error) error {
	return source.EnumerateFileRange(ctx, s.root, files, lo, hi, nil, func(ctx context.Context, i int, _ int64, seq *int64, emit func(source.Item) error) error {
		return s.enumerateShard(ctx, s.shards[i], &files[i].Stamp, seq, emit)
	}, emit)
}

// enumerateShard emits the samples of the shard name, pinned to st (or nil) where it is read
// through Options.Files.
func (s *Source) enumerateShard(ctx context.Context, name string, st *source.Stamp, seq *int64, emit func(source.Item) error) error {
	f, err := source.OpenPinned(ctx, s.opts.Files, filepath.Join(s.root, filepath.FromSlash(name)), st, fsentry.Open)
	if err != nil {
		return s.emitBad(seq, fsentry.Name(name), fmt.Errorf("%w: %w", ErrTruncated, err), emit)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 1<<20)
	lower := strings.ToLower(name)
	if strings.HasSuffix(lower, ".gz") || strings.HasSuffix(lower, ".tgz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return s.emitBad(seq, fsentry.Name(name), fmt.Errorf("%w: gzip: %w", ErrTruncated, err), emit)
		}
		defer zr.Close()
		r = zr
	}
	shardName := fsentry.Name(name)
	tail := &tailReader{r: r}
	tr := tar.NewReader(tail)
	var cur *sample
	members := 0
	flush := func() error {
		if cur == nil {
			return nil
		}
		smp := cur
		cur = nil
		return s.emitSample(seq, shardName, smp, emit)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF && !tail.zeroBlock() {
			// archive/tar ends the archive where the data ends between two members, as Python's
			// tarfile does; a tar ends with zero blocks, so this one was cut off there.
			err = errors.New("the tar file ends with no end-of-archive blocks: it was cut off here")
		}
		if err == io.EOF {
			return flush()
		}
		if err != nil {
			// The sample being read may be incomplete: it goes with the rest of the shard.
			where := fmt.Sprintf("%s (after member %d)", shardName, members)
			cur = nil
			return s.emitBad(seq, where, fmt.Errorf("%w: %w", ErrTruncated, err), emit)
		}
		members++
		if !isFile(h) {
			continue
		}
		key, ext := splitKey(h.Name)
		if cur == nil || cur.key != key {
			if err := flush(); err != nil {
				return err
			}
			cur = &sample{key: key}
		}
		if cur.err != nil {
			continue
		}
		// A second member of one name (its extension in any case: tar keeps both, extracting
		// keeps the last, webdataset's reader refuses it) makes the sample ambiguous.
		lext := strings.ToLower(ext)
		if first, ok := cur.exts[lext]; ok {
			cur.err = fmt.Errorf("%w: two members %s and %s", ErrDuplicate, fsentry.Name(first), fsentry.Name(h.Name))
			continue
		}
		if len(cur.exts) >= MaxSampleMembers {
			cur.err = fmt.Errorf("more than %d members of key %s", MaxSampleMembers, fsentry.Name(key))
			continue
		}
		if cur.exts == nil {
			cur.exts = map[string]string{}
		}
		cur.exts[lext] = h.Name
		rank := s.imageRank(ext)
		isLabel := !cur.hasLabel && (s.opts.LabelKey == "" && strings.EqualFold(ext, "cls") || s.opts.LabelKey != "" && strings.EqualFold(ext, "json"))
		field := s.fieldIndex(lext)
		if rank < 0 && !isLabel && field < 0 || rank >= 0 && cur.image != nil && rank >= cur.imageRank {
			continue
		}
		if h.Size > MaxMemberSize {
			cur.err = fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, fsentry.Name(h.Name), h.Size, MaxMemberSize)
			continue
		}
		data, err := memdecode.ReadN(tr, h.Size)
		if err != nil {
			where := fmt.Sprintf("%s (after member %d)", shardName, members-1)
			cur = nil
			return s.emitBad(seq, where, fmt.Errorf("%w: %w", ErrTruncated, err), emit)
		}
		if field >= 0 {
			if cur.fields == nil {
				cur.fields = make([][]byte, len(s.fields))
			}
			cur.fields[field] = data
		}
		switch {
		case rank >= 0:
			cur.image, cur.imageMem, cur.imageRank = data, h.Name, rank
		case isLabel:
			cur.label, cur.hasLabel = data, true
		}
	}
}

// tailReader passes r's bytes on and keeps the last tarBlock of them.
type tailReader struct {
	r    io.Reader
	n    int64
	last [tarBlock]byte
}

const tarBlock = 512

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	b := p[:n]
	if len(b) >= tarBlock {
		copy(t.last[:], b[len(b)-tarBlock:])
	} else {
		copy(t.last[:], t.last[len(b):])
		copy(t.last[tarBlock-len(b):], b)
	}
	t.n += int64(n)
	return n, err
}

// zeroBlock reports whether the last block read was a block of zeros: where archive/tar returns
// io.EOF, the end-of-archive block it stopped at, not the end of the data after a member.
func (t *tailReader) zeroBlock() bool {
	return t.n >= tarBlock && t.last == [tarBlock]byte{}
}

// isFile reports whether a tar member holds a file's data, as Python's tarfile (and so
// webdataset's reader) counts them: a regular file (archive/tar reports old-style ones as
// TypeReg), a GNU sparse file (GNU tar --sparse; archive/tar reads it whole, holes as zeros)
// or a contiguous file.
func isFile(h *tar.Header) bool {
	return h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeGNUSparse || h.Typeflag == tar.TypeCont
}

// splitKey splits a member name into its sample key and the extension after the key's dot.
func splitKey(name string) (key, ext string) {
	dir, base := path.Split(name)
	if i := strings.IndexByte(base, '.'); i >= 0 {
		return dir + base[:i], base[i+1:]
	}
	return name, ""
}

// imageRank is ext's position in the source's image extensions, -1 if it is not one.
func (s *Source) imageRank(ext string) int {
	for i, e := range s.imageExts {
		if strings.EqualFold(e, ext) {
			return i
		}
	}
	return -1
}

func isImageExt(ext string) bool {
	for _, e := range Extensions {
		if strings.EqualFold(e, ext) {
			return true
		}
	}
	return false
}

func (s *Source) emitSample(seq *int64, shardName string, smp *sample, emit func(source.Item) error) error {
	name := shardName + ":" + fsentry.Name(smp.key)
	err := smp.err
	var label int64
	switch {
	case err != nil:
	case smp.image == nil:
		err = ErrNoImage
	case !smp.hasLabel && s.opts.LabelKey != "":
		err = fmt.Errorf("%w: no .json member (--label-key %s)", ErrNoLabel, s.opts.LabelKey)
	case !smp.hasLabel && len(s.fields) > 0:
		label = -1 // a sample of a captioned dataset: no class
	case !smp.hasLabel:
		err = fmt.Errorf("%w: no .cls member", ErrNoLabel)
	default:
		label, err = s.parseLabel(smp.label)
	}
	var values []source.FieldValue
	if err == nil && len(s.fields) > 0 {
		values, err = s.fieldValues(smp)
	}
	if err != nil {
		return s.emitBad(seq, name, err, emit)
	}
	meta, _ := json.Marshal(map[string]string{"shard": shardName, "key": fsentry.Name(smp.key), "image": fsentry.Name(smp.imageMem)})
	it := source.Item{Seq: *seq, Name: name, Raw: smp.image, Label: label, Note: memdecode.Note{Meta: meta, Fields: values}}
	*seq++
	return emit(it)
}

// fieldValues checks a sample's field members: each must be there, text UTF-8 and json one
// JSON value.
func (s *Source) fieldValues(smp *sample) ([]source.FieldValue, error) {
	values := make([]source.FieldValue, len(s.fields))
	for i, f := range s.fields {
		var b []byte
		if smp.fields != nil {
			b = smp.fields[i]
		}
		if b == nil {
			return nil, fmt.Errorf("%w: no .%s member (--fields)", ErrField, s.fieldExts[i])
		}
		switch f.Kind {
		case shard.KindText:
			if !utf8.Valid(b) {
				return nil, fmt.Errorf("%w: the .%s member is not UTF-8 text", ErrField, s.fieldExts[i])
			}
		case shard.KindJSON:
			if !json.Valid(b) {
				return nil, fmt.Errorf("%w: the .%s member is not one JSON value", ErrField, s.fieldExts[i])
			}
		}
		values[i] = source.FieldValue{Bytes: b}
	}
	return values, nil
}

func (s *Source) parseLabel(b []byte) (int64, error) {
	var v int64
	if s.opts.LabelKey != "" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return 0, fmt.Errorf("%w: the .json member does not parse: %v", ErrLabel, err)
		}
		raw, ok := m[s.opts.LabelKey]
		if !ok {
			return 0, fmt.Errorf("%w %q in the .json member", ErrNoLabel, s.opts.LabelKey)
		}
		if err := json.Unmarshal(raw, &v); err != nil || v < 0 {
			return 0, fmt.Errorf("%w: %q is %s, want an integer from 0", ErrLabel, s.opts.LabelKey, raw)
		}
	} else {
		t := strings.TrimSpace(string(b))
		var err error
		v, err = strconv.ParseInt(t, 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%w: .cls holds %q, want an integer from 0", ErrLabel, t)
		}
	}
	if len(s.opts.Classes) > 0 && v >= int64(len(s.opts.Classes)) {
		return 0, fmt.Errorf("%w: %d, want 0..%d (--classes names %d classes)", ErrLabel, v, len(s.opts.Classes)-1, len(s.opts.Classes))
	}
	return v, nil
}

// emitBad emits an item that Decode reports as bad with err (its Note).
func (s *Source) emitBad(seq *int64, name string, err error, emit func(source.Item) error) error {
	it := source.Item{Seq: *seq, Name: name, Note: memdecode.Note{Err: err}}
	*seq++
	return emit(it)
}

// Decode decodes the item's image with the source's decoder, or reports the fault Enumerate
// found in it.
func (s *Source) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	return s.dec.Decode(it, emit)
}

// labelSpec says where labels come from, for the manifest.
func (s *Source) labelSpec() string {
	if s.opts.LabelKey != "" {
		return "json:" + s.opts.LabelKey
	}
	return "cls"
}
