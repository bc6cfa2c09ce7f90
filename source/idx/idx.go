package idx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/transforms"
)

// IDX element type codes (the third byte of the magic number).
const (
	TypeUbyte  = 0x08
	TypeByte   = 0x09
	TypeShort  = 0x0B
	TypeInt    = 0x0C
	TypeFloat  = 0x0D
	TypeDouble = 0x0E
)

// Limits checked before anything is allocated from a header.
const (
	MaxDims       = 8       // dimensions of one IDX file
	MaxCount      = 1 << 30 // images (and labels) in one file
	MaxImageBytes = 1 << 26 // bytes of one image (H×W×C)
	MaxClasses    = 1 << 16 // label values get default names up to this count
	chunkBytes    = 256 << 10
)

// Kind is the source kind of this package.
const Kind = "idx"

// FashionClasses are the Fashion-MNIST class names, used when the images path contains
// "fashion" and no class list is given.
var FashionClasses = []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}

// A FormatError reports that the input is not a valid IDX file, or not one this package uses.
type FormatError string

func (e FormatError) Error() string { return "idx: invalid format: " + string(e) }

// ErrLabel is wrapped by the *source.InputError that Decode returns for a label outside the
// class list.
var ErrLabel = errors.New("label out of range")

// Header is the header of an IDX file.
type Header struct {
	Type byte  // element type code
	Dims []int // dimension sizes, outermost first
}

// Len returns the header's size in bytes.
func (h Header) Len() int { return 4 + 4*len(h.Dims) }

// ElemSize returns the size of one element, or 0 for an unknown type.
func ElemSize(typ byte) int {
	switch typ {
	case TypeUbyte, TypeByte:
		return 1
	case TypeShort:
		return 2
	case TypeInt, TypeFloat:
		return 4
	case TypeDouble:
		return 8
	}
	return 0
}

// TypeName returns the IDX name of an element type.
func TypeName(typ byte) string {
	switch typ {
	case TypeUbyte:
		return "ubyte"
	case TypeByte:
		return "byte"
	case TypeShort:
		return "short"
	case TypeInt:
		return "int"
	case TypeFloat:
		return "float"
	case TypeDouble:
		return "double"
	}
	return fmt.Sprintf("0x%02x", typ)
}

// ReadHeader reads an IDX header: two zero bytes, the element type, the number of dimensions,
// then each dimension as a big-endian uint32. It checks the type and the dimension count
// against MaxDims; dimension sizes are the caller's to check.
func ReadHeader(r io.Reader) (Header, error) {
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return Header{}, headerErr(err)
	}
	if magic[0] != 0 || magic[1] != 0 {
		return Header{}, FormatError(fmt.Sprintf("bad magic %02x %02x %02x %02x (want 00 00 type ndims)", magic[0], magic[1], magic[2], magic[3]))
	}
	if ElemSize(magic[2]) == 0 {
		return Header{}, FormatError(fmt.Sprintf("unknown element type 0x%02x", magic[2]))
	}
	nd := int(magic[3])
	if nd == 0 || nd > MaxDims {
		return Header{}, FormatError(fmt.Sprintf("%d dimensions (want 1 to %d)", nd, MaxDims))
	}
	var buf [4 * MaxDims]byte
	if _, err := io.ReadFull(r, buf[:4*nd]); err != nil {
		return Header{}, headerErr(err)
	}
	h := Header{Type: magic[2], Dims: make([]int, nd)}
	for i := range h.Dims {
		h.Dims[i] = int(binary.BigEndian.Uint32(buf[4*i:]))
	}
	return h, nil
}

func headerErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return FormatError("truncated header")
	}
	return err
}

// inputs opens a source's files: local files, or, where files is set (source.Options.Files:
// the paths are then a view of an object store's listing), the objects they stand for, each
// read once as a stream from its start, never copied.
type inputs struct {
	files source.Files
	ctx   context.Context // of the reads through files
}

// open opens the file at p for one sequential read, and returns its size.
func (in inputs) open(p string) (io.ReadCloser, int64, error) {
	if in.files != nil {
		ctx := in.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		return in.files.Open(ctx, p, nil)
	}
	f, err := fsentry.Open(p)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// file is an open IDX file, decompressed when it is gzip.
type file struct {
	name string // base name
	f    io.ReadCloser
	size int64
	gz   *gzip.Reader
	r    *bufio.Reader
	hdr  Header
}

// openFile opens p, detects gzip by its magic bytes and reads the IDX header.
func (in inputs) openFile(p string) (*file, error) {
	f, size, err := in.open(p)
	if err != nil {
		return nil, fmt.Errorf("idx: %s: %w", filepath.Base(p), err)
	}
	fl := &file{name: filepath.Base(p), f: f, size: size}
	br := bufio.NewReaderSize(f, 1<<16)
	fl.r = br
	if m, _ := br.Peek(2); len(m) == 2 && m[0] == 0x1f && m[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("idx: %s: gzip: %w", fl.name, err)
		}
		fl.gz = gz
		fl.r = bufio.NewReaderSize(gz, 1<<16)
	}
	if fl.hdr, err = ReadHeader(fl.r); err != nil {
		fl.close()
		return nil, fmt.Errorf("idx: %s: %w", fl.name, err)
	}
	// For an uncompressed file, the size must be exactly the header plus the data.
	if fl.gz == nil {
		want := int64(fl.hdr.Len()) + int64(ElemSize(fl.hdr.Type))*product(fl.hdr.Dims)
		if fl.size != want {
			fl.close()
			return nil, FormatError(fmt.Sprintf("%s: size %d, but the header's shape %v of %s needs %d bytes",
				fl.name, fl.size, fl.hdr.Dims, TypeName(fl.hdr.Type), want))
		}
	}
	return fl, nil
}

// product multiplies dimensions (each < 2^32, at most MaxDims of them), saturating.
func product(d []int) int64 {
	n := int64(1)
	for _, x := range d {
		if x != 0 && n > (1<<62)/int64(x) {
			return 1 << 62
		}
		n *= int64(x)
	}
	return n
}

// checkEnd reports data after the last record (gzip files; raw files are checked by size).
func (fl *file) checkEnd() error {
	if _, err := fl.r.ReadByte(); err == nil {
		return FormatError(fmt.Sprintf("%s: data after the last record", fl.name))
	} else if err != io.EOF {
		return fmt.Errorf("idx: %s: %w", fl.name, err)
	}
	return nil
}

func (fl *file) close() {
	if fl.gz != nil {
		fl.gz.Close()
	}
	fl.f.Close()
}

// Source is a source.Source over an IDX images file and its labels file.
type Source struct {
	in             inputs
	images, labels string // paths
	split          string
	n, h, w, c     int
	labelType      byte
	classes        []string
	classesFrom    string
}

var _ source.Source = (*Source)(nil)

// Open returns a Source for path: a folder holding the split's files (train-images-idx3-ubyte
// and train-labels-idx1-ubyte for "train", t10k-… or test-… for "test", each optionally .gz,
// optionally with a prefix such as "emnist-digits-"), or an images file whose labels file is
// found by replacing "images-idx3" with "labels-idx1" in its name. split "" means "train" and
// is ignored for a file. classes names the labels; nil picks defaults (see the package doc).
func Open(path, split string, classes []string) (*Source, error) {
	return OpenFrom(nil, path, split, classes)
}

// OpenFrom is Open reading the files through files where it is set (source.Options.Files:
// path is then a view of an object store's listing, and each file is read as a stream of
// its object, never copied).
func OpenFrom(files source.Files, path, split string, classes []string) (*Source, error) {
	in := inputs{files: files}
	if split == "" {
		split = "train"
	}
	if split != "train" && split != "test" {
		return nil, fmt.Errorf("idx: unknown split %q (want train or test)", split)
	}
	// A folder of a view in memory is looked at through files (source.Lister).
	fi, err := source.Stat(files, path)
	if err != nil {
		return nil, fmt.Errorf("idx: %w", err)
	}
	if !fi.IsDir() {
		labels, err := in.labelsFor(path)
		if err != nil {
			return nil, err
		}
		return in.openPair(path, labels, "", classes)
	}
	images, err := in.findSplit(path, split)
	if err != nil {
		return nil, err
	}
	labels, err := in.labelsFor(images)
	if err != nil {
		return nil, err
	}
	return in.openPair(images, labels, split, classes)
}

// OpenFiles returns a Source for an explicit pair of images and labels files.
func OpenFiles(images, labels string, classes []string) (*Source, error) {
	return inputs{}.openPair(images, labels, "", classes)
}

var splitPrefixes = map[string][]string{"train": {"train"}, "test": {"t10k", "test"}}

// findSplit finds the images file of split in dir.
func (in inputs) findSplit(dir, split string) (string, error) {
	ents, err := source.ReadDir(in.files, dir)
	if err != nil {
		return "", fmt.Errorf("idx: %w", err)
	}
	stems := map[string][]string{} // stem -> file names
	for _, e := range ents {
		// Symbolic links to the files are ordinary inputs; anything that is not a regular
		// file (after following links) is not a candidate.
		if !e.Type().IsRegular() && fsentry.Check(filepath.Join(dir, e.Name())) != nil {
			continue
		}
		stem := normalize(e.Name())
		for _, p := range splitPrefixes[split] {
			suffix := p + "-images-idx3-ubyte"
			if stem == suffix || strings.HasSuffix(stem, "-"+suffix) {
				stems[stem] = append(stems[stem], e.Name())
			}
		}
	}
	if len(stems) == 0 {
		var looked []string
		for _, p := range splitPrefixes[split] {
			looked = append(looked, p+"-images-idx3-ubyte[.gz]")
		}
		return "", fmt.Errorf("idx: %s: no %s images file (looked for %s, with any prefix)",
			dir, split, strings.Join(looked, " or "))
	}
	if len(stems) > 1 {
		var all []string
		for _, names := range stems {
			all = append(all, names...)
		}
		sort.Strings(all)
		return "", fmt.Errorf("idx: %s: several %s images files (%s): name one", dir, split, strings.Join(all, ", "))
	}
	var names []string
	for _, n := range stems {
		names = n
	}
	// The same data compressed and not: prefer the uncompressed file.
	sort.Slice(names, func(i, j int) bool {
		gi, gj := strings.HasSuffix(names[i], ".gz"), strings.HasSuffix(names[j], ".gz")
		if gi != gj {
			return !gi
		}
		return names[i] < names[j]
	})
	if err := in.sameData(dir, names); err != nil {
		return "", err
	}
	return filepath.Join(dir, names[0]), nil
}

// sameData checks that the files names in dir (one dataset file, compressed and not, or
// spelled with dots and dashes) hold the same data once decompressed; the first is the one
// read. A stale extraction beside a newer download would otherwise be packed without a word.
func (in inputs) sameData(dir string, names []string) error {
	for _, n := range names[1:] {
		same, err := in.equalData(filepath.Join(dir, names[0]), filepath.Join(dir, n))
		if err != nil {
			return err
		}
		if !same {
			return fmt.Errorf("idx: %s: %s and %s hold different data: remove the stale one or name the file to read",
				dir, names[0], n)
		}
	}
	return nil
}

// equalData compares the decompressed contents of two files.
func (in inputs) equalData(a, b string) (bool, error) {
	ra, err := in.openData(a)
	if err != nil {
		return false, err
	}
	defer ra.Close()
	rb, err := in.openData(b)
	if err != nil {
		return false, err
	}
	defer rb.Close()
	ba, bb := make([]byte, 1<<16), make([]byte, 1<<16)
	for {
		na, ea := io.ReadFull(ra, ba)
		nb, eb := io.ReadFull(rb, bb)
		if ea != nil && ea != io.EOF && ea != io.ErrUnexpectedEOF {
			return false, fmt.Errorf("idx: %s: %w", filepath.Base(a), ea)
		}
		if eb != nil && eb != io.EOF && eb != io.ErrUnexpectedEOF {
			return false, fmt.Errorf("idx: %s: %w", filepath.Base(b), eb)
		}
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if ea != nil || eb != nil {
			return ea != nil && eb != nil, nil
		}
	}
}

// dataReader is a file's decompressed contents.
type dataReader struct {
	io.Reader
	f  io.ReadCloser
	gz *gzip.Reader
}

func (d *dataReader) Close() error {
	if d.gz != nil {
		d.gz.Close()
	}
	return d.f.Close()
}

// openData opens p, decompressing it when it starts with the gzip magic bytes.
func (in inputs) openData(p string) (*dataReader, error) {
	f, _, err := in.open(p)
	if err != nil {
		return nil, fmt.Errorf("idx: %s: %w", filepath.Base(p), err)
	}
	br := bufio.NewReaderSize(f, 1<<16)
	d := &dataReader{Reader: br, f: f}
	if m, _ := br.Peek(2); len(m) == 2 && m[0] == 0x1f && m[1] == 0x8b {
		if d.gz, err = gzip.NewReader(br); err != nil {
			f.Close()
			return nil, fmt.Errorf("idx: %s: gzip: %w", filepath.Base(p), err)
		}
		d.Reader = d.gz
	}
	return d, nil
}

// normalize lower-cases a file name, drops ".gz" and turns dots into dashes, so that
// "train-images.idx3-ubyte.gz" and "train-images-idx3-ubyte" compare equal.
func normalize(name string) string {
	name = strings.ToLower(name)
	name = strings.TrimSuffix(name, ".gz")
	return strings.ReplaceAll(name, ".", "-")
}

// labelsFor finds the labels file belonging to an images file.
func (in inputs) labelsFor(images string) (string, error) {
	dir, name := filepath.Split(images)
	var cands []string
	for _, r := range [][2]string{{"images-idx3", "labels-idx1"}, {"images.idx3", "labels.idx1"}} {
		if i := strings.LastIndex(name, r[0]); i >= 0 {
			l := name[:i] + r[1] + name[i+len(r[0]):]
			base := strings.TrimSuffix(l, ".gz")
			cands = append(cands, l, base, base+".gz")
		}
	}
	if len(cands) == 0 {
		return "", fmt.Errorf("idx: %s: cannot derive the labels file name (no \"images-idx3\" in the name): give both files", name)
	}
	var found []string
	for _, c := range cands {
		if fi, err := source.Stat(in.files, filepath.Join(dir, c)); err == nil && fi.Mode().IsRegular() && !slices.Contains(found, c) {
			found = append(found, c)
		}
	}
	if len(found) > 0 {
		if err := in.sameData(dir, found); err != nil {
			return "", err
		}
		return filepath.Join(dir, found[0]), nil
	}
	return "", fmt.Errorf("idx: %s: labels file %s not found", images, strings.TrimSuffix(cands[0], ".gz")+"[.gz]")
}

// openPair opens the images and labels files (open is the opening of one file).
func (in inputs) openPair(images, labels, split string, classes []string) (*Source, error) {
	s := &Source{in: in, images: images, labels: labels, split: split}
	im, err := in.openFile(images)
	if err != nil {
		return nil, err
	}
	defer im.close()
	if err := s.checkImages(im.name, im.hdr); err != nil {
		return nil, err
	}
	lb, err := in.openFile(labels)
	if err != nil {
		return nil, err
	}
	defer lb.close()
	if err := s.checkLabels(lb.name, lb.hdr); err != nil {
		return nil, err
	}
	// Read every label once: it checks the file completely before the build starts and finds
	// the label range for the default class names. Labels are small (60 KB for MNIST).
	minL, maxL := int64(0), int64(-1)
	esz := ElemSize(s.labelType)
	var buf [8]byte
	for i := 0; i < s.n; i++ {
		if _, err := io.ReadFull(lb.r, buf[:esz]); err != nil {
			return nil, fmt.Errorf("idx: %s: label %d: %w", lb.name, i, eofErr(err))
		}
		v := labelValue(s.labelType, buf[:esz])
		if i == 0 || v < minL {
			minL = v
		}
		if i == 0 || v > maxL {
			maxL = v
		}
	}
	if lb.gz != nil {
		if err := lb.checkEnd(); err != nil {
			return nil, err
		}
	}
	s.setClasses(classes, minL, maxL)
	if err := fsentry.CheckClasses(s.classes); err != nil {
		return nil, fmt.Errorf("idx: %w", err)
	}
	return s, nil
}

func eofErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (s *Source) checkImages(name string, h Header) error {
	if h.Type != TypeUbyte {
		return FormatError(fmt.Sprintf("%s: images must be ubyte (0x08), this file holds %s", name, TypeName(h.Type)))
	}
	switch {
	case len(h.Dims) == 3:
		s.c = 1
	case len(h.Dims) == 4 && (h.Dims[3] == 1 || h.Dims[3] == 3):
		s.c = h.Dims[3]
	default:
		return FormatError(fmt.Sprintf("%s: images have shape %v: want [N, H, W] or [N, H, W, 1|3]", name, h.Dims))
	}
	s.n, s.h, s.w = h.Dims[0], h.Dims[1], h.Dims[2]
	if s.n > MaxCount {
		return FormatError(fmt.Sprintf("%s: %d images, over the limit of %d", name, s.n, MaxCount))
	}
	if s.h == 0 || s.w == 0 {
		return FormatError(fmt.Sprintf("%s: empty image size %dx%d", name, s.w, s.h))
	}
	if int64(s.h)*int64(s.w)*int64(s.c) > MaxImageBytes {
		return FormatError(fmt.Sprintf("%s: image size %dx%dx%d is over the limit of %d bytes", name, s.w, s.h, s.c, MaxImageBytes))
	}
	return nil
}

func (s *Source) checkLabels(name string, h Header) error {
	switch h.Type {
	case TypeUbyte, TypeByte, TypeShort, TypeInt:
	default:
		return FormatError(fmt.Sprintf("%s: labels must be integers (ubyte, byte, short or int), this file holds %s", name, TypeName(h.Type)))
	}
	if len(h.Dims) != 1 {
		return FormatError(fmt.Sprintf("%s: labels have shape %v: want [N]", name, h.Dims))
	}
	if h.Dims[0] != s.n {
		return FormatError(fmt.Sprintf("%s: %d labels for %d images in %s", name, h.Dims[0], s.n, filepath.Base(s.images)))
	}
	s.labelType = h.Type
	return nil
}

// labelValue converts one big-endian label element.
func labelValue(typ byte, b []byte) int64 {
	switch typ {
	case TypeByte:
		return int64(int8(b[0]))
	case TypeShort:
		return int64(int16(binary.BigEndian.Uint16(b)))
	case TypeInt:
		return int64(int32(binary.BigEndian.Uint32(b)))
	}
	return int64(b[0])
}

func (s *Source) setClasses(classes []string, minL, maxL int64) {
	switch {
	case classes != nil:
		s.classes = make([]string, len(classes))
		for i, c := range classes {
			s.classes[i] = fsentry.Name(c)
		}
		s.classesFrom = "option"
		return
	case isFashion(s.images) && minL >= 0 && maxL < int64(len(FashionClasses)):
		s.classes = append([]string(nil), FashionClasses...)
		s.classesFrom = "fashion-mnist"
		return
	}
	k := int64(10)
	if maxL >= k && maxL < MaxClasses {
		k = maxL + 1
	}
	s.classes = make([]string, k)
	for i := range s.classes {
		s.classes[i] = strconv.Itoa(i)
	}
	s.classesFrom = "label values"
}

// isFashion reports whether the images path names Fashion-MNIST.
func isFashion(p string) bool {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return strings.Contains(strings.ToLower(p), "fashion")
}

// Len returns the number of records.
func (s *Source) Len() int64 { return int64(s.n) }

// Shape returns the image shape [H, W, C].
func (s *Source) Shape() []int { return []int{s.h, s.w, s.c} }

// Info describes the source. Spec holds the split, the file base names, count, image shape,
// label element type and where the class names came from; nothing host-dependent.
func (s *Source) Info() source.SourceInfo {
	spec := map[string]any{
		"kind":         Kind,
		"images":       filepath.Base(s.images),
		"labels":       filepath.Base(s.labels),
		"records":      int64(s.n),
		"shape":        []int{s.h, s.w, s.c},
		"label_type":   TypeName(s.labelType),
		"classes_from": s.classesFrom,
	}
	if s.split != "" {
		spec["split"] = s.split
	}
	return source.SourceInfo{
		Kind:    Kind,
		Classes: append([]string(nil), s.classes...),
		Spec:    spec,
		Count:   int64(s.n),
		Frame:   source.FrameShape{W: s.w, H: s.h, C: s.c},
	}
}

// Enumerate emits every image with its label, in file order, reading both files as streams.
func (s *Source) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	in := s.in
	in.ctx = ctx
	im, err := in.openFile(s.images)
	if err != nil {
		return err
	}
	defer im.close()
	if err := s.sameHeader(im, true); err != nil {
		return err
	}
	lb, err := in.openFile(s.labels)
	if err != nil {
		return err
	}
	defer lb.close()
	if err := s.sameHeader(lb, false); err != nil {
		return err
	}
	size := s.h * s.w * s.c
	per := max(1, chunkBytes/size)
	esz := ElemSize(s.labelType)
	var lbuf [8]byte
	var chunk []byte
	for i := 0; i < s.n; i++ {
		if i%per == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			chunk = make([]byte, min(per, s.n-i)*size)
		}
		raw := chunk[(i%per)*size : (i%per+1)*size : (i%per+1)*size]
		if _, err := io.ReadFull(im.r, raw); err != nil {
			return fmt.Errorf("idx: %s: image %d: %w", im.name, i, eofErr(err))
		}
		if _, err := io.ReadFull(lb.r, lbuf[:esz]); err != nil {
			return fmt.Errorf("idx: %s: label %d: %w", lb.name, i, eofErr(err))
		}
		it := source.Item{
			Seq:   int64(i),
			Name:  fsentry.Name(im.name) + "#" + strconv.Itoa(i),
			Raw:   raw,
			Label: labelValue(s.labelType, lbuf[:esz]),
		}
		if err := emit(it); err != nil {
			return err
		}
	}
	if im.gz != nil {
		if err := im.checkEnd(); err != nil {
			return err
		}
	}
	return nil
}

// sameHeader checks that a file still has the header Open saw.
func (s *Source) sameHeader(fl *file, images bool) error {
	var err error
	if images {
		var t Source
		err = t.checkImages(fl.name, fl.hdr)
		if err == nil && (t.n != s.n || t.h != s.h || t.w != s.w || t.c != s.c) {
			err = fmt.Errorf("idx: %s changed since it was opened", fl.name)
		}
	} else {
		t := Source{n: s.n, images: s.images}
		err = t.checkLabels(fl.name, fl.hdr)
		if err == nil && t.labelType != s.labelType {
			err = fmt.Errorf("idx: %s changed since it was opened", fl.name)
		}
	}
	return err
}

// Decode checks the label against the class list and returns the image; its pixels are the
// item's bytes, not a copy.
func (s *Source) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	if err := s.check(it); err != nil {
		return err
	}
	return emit(source.Clip{
		Frames: []transforms.Image{{W: s.w, H: s.h, C: s.c, Pix: it.Raw}},
		Label:  it.Label,
	})
}

func (s *Source) check(it source.Item) error {
	if len(it.Raw) != s.h*s.w*s.c {
		return fmt.Errorf("idx: %s: item has %d bytes, want %d", it.Name, len(it.Raw), s.h*s.w*s.c)
	}
	if it.Label < 0 || it.Label >= int64(len(s.classes)) {
		return &source.InputError{Input: it.Name, Err: fmt.Errorf("idx: %w: %d, want 0..%d", ErrLabel, it.Label, len(s.classes)-1)}
	}
	return nil
}

var _ source.DirectSource = (*Source)(nil)

// FrameShape returns the size of every image (source.DirectSource).
func (s *Source) FrameShape() (w, h, c int) { return s.w, s.h, s.c }

// DecodeTo is Decode into pix (source.DirectSource): the same checks, the item's bytes copied.
func (s *Source) DecodeTo(ctx context.Context, it source.Item, pix []byte) (source.Clip, error) {
	if err := s.check(it); err != nil {
		return source.Clip{}, err
	}
	copy(pix, it.Raw)
	return source.Clip{Label: it.Label}, nil
}
