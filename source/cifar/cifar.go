package cifar

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/transforms"
)

// Geometry of every CIFAR image and the record sizes of the two layouts.
const (
	Width     = 32
	Height    = 32
	Channels  = 3
	ImageSize = Width * Height * Channels // pixel bytes per record

	RecordSize10  = 1 + ImageSize // label, pixels
	RecordSize100 = 2 + ImageSize // coarse label, fine label, pixels

	NumClasses10  = 10  // CIFAR-10 labels are 0..9
	NumFine100    = 100 // CIFAR-100 fine labels are 0..99
	NumCoarse100  = 20  // CIFAR-100 coarse labels are 0..19
	plane         = Width * Height
	chunkRecords  = 64      // records read per allocation
	maxNamesBytes = 1 << 20 // limit on a class names file
)

// The source kinds this package reads.
const (
	Kind10  = "cifar10"
	Kind100 = "cifar100"
)

// ArchiveBuffer bounds the bytes of archive members held in memory while they wait for their
// turn (see the package documentation). The official archives need at most 123 MB.
const ArchiveBuffer = 256 << 20

// MaxMemberSize bounds the size of a data file inside an archive (the largest official one,
// CIFAR-100's train.bin, is 154 MB). A tar header can declare any size, and a sparse member
// costs nothing to store, so the limit is checked before anything is read.
const MaxMemberSize = 1 << 30

// Folder names of the official extracted archives.
const (
	Folder10  = "cifar-10-batches-bin"
	Folder100 = "cifar-100-binary"
)

// Archive names of the official downloads.
const (
	Archive10  = "cifar-10-binary.tar.gz"
	Archive100 = "cifar-100-binary.tar.gz"
)

// A FormatError reports that the input is not a valid CIFAR binary file or archive.
type FormatError string

func (e FormatError) Error() string { return "cifar: invalid format: " + string(e) }

// ErrLabel is wrapped by the *source.InputError that Decode returns for a label byte out of
// range: a bad input, skipped or fatal as --on-error says.
var ErrLabel = errors.New("label out of range")

// Source is a source.Source over CIFAR-10 or CIFAR-100 binary files.
type Source struct {
	kind        string
	split       string
	dir         string   // folder holding files (folder and single-file input)
	archive     string   // path of the archive (archive input)
	members     []string // archive member names, parallel to files
	files       []string // base names, in emit order
	sizes       []int64  // byte sizes, parallel to files
	recSize     int
	classes     []string
	coarse      []string
	classesFrom string
	count       int64
	bufLimit    int64 // ArchiveBuffer; tests lower it
	maxMember   int64 // MaxMemberSize; tests lower it
	// inputs, when set, serves the bytes of the batch files and archives (source.Options.Files:
	// the paths are then a view of an object store's listing): each is read as one stream of
	// its object, never copied.
	inputs source.Files
}

var _ source.Source = (*Source)(nil)

// layout describes what a kind and split need.
type layout struct {
	recSize     int
	files       []string
	namesFile   string // class (fine) names
	coarseFile  string // coarse names (CIFAR-100)
	nClasses    int
	nCoarse     int
	folder      string
	archiveName string
}

func layoutFor(kind, split string) (layout, error) {
	if split != "train" && split != "test" {
		return layout{}, fmt.Errorf("cifar: unknown split %q (want train or test)", split)
	}
	switch kind {
	case Kind10:
		l := layout{recSize: RecordSize10, namesFile: "batches.meta.txt", nClasses: NumClasses10,
			folder: Folder10, archiveName: Archive10}
		if split == "train" {
			for i := 1; i <= 5; i++ {
				l.files = append(l.files, "data_batch_"+strconv.Itoa(i)+".bin")
			}
		} else {
			l.files = []string{"test_batch.bin"}
		}
		return l, nil
	case Kind100:
		return layout{recSize: RecordSize100, files: []string{split + ".bin"},
			namesFile: "fine_label_names.txt", coarseFile: "coarse_label_names.txt",
			nClasses: NumFine100, nCoarse: NumCoarse100, folder: Folder100, archiveName: Archive100}, nil
	}
	return layout{}, fmt.Errorf("cifar: unknown kind %q (want %s or %s)", kind, Kind10, Kind100)
}

// Open returns a Source for the given kind ("cifar10" or "cifar100") and split ("train" or
// "test"; "" means "train"). path is the extracted folder, a folder containing it (or the
// official archive), the .tar.gz or .tar archive itself, or a single .bin file (then split is
// not used and every record of that file is read).
func Open(p, kind, split string) (*Source, error) {
	return open(p, kind, split, ArchiveBuffer, MaxMemberSize, nil)
}

// OpenFrom is Open reading the batch files or the archive through files where it is set
// (source.Options.Files: p is then a view of an object store's listing, and each file is read
// as a stream of its object, never copied).
func OpenFrom(files source.Files, p, kind, split string) (*Source, error) {
	return open(p, kind, split, ArchiveBuffer, MaxMemberSize, files)
}

func open(p, kind, split string, bufLimit, maxMember int64, files source.Files) (*Source, error) {
	if split == "" {
		split = "train"
	}
	l, err := layoutFor(kind, split)
	if err != nil {
		return nil, err
	}
	// A folder of a view in memory is looked at through files (source.Lister).
	fi, err := source.Stat(files, p)
	if err != nil {
		return nil, fmt.Errorf("cifar: %w", err)
	}
	s := &Source{kind: kind, split: split, recSize: l.recSize, bufLimit: bufLimit, maxMember: maxMember, inputs: files}
	switch {
	case fi.IsDir():
		dir, archive, err := findInput(files, p, l)
		if err != nil {
			return nil, err
		}
		if archive != "" {
			err = s.openArchive(archive, l)
		} else {
			err = s.openFolder(dir, l.files, l)
		}
		if err != nil {
			return nil, err
		}
	case fi.Mode().IsRegular():
		isArchive, err := s.sniffArchive(p)
		if err != nil {
			return nil, err
		}
		if isArchive {
			if err := s.openArchive(p, l); err != nil {
				return nil, err
			}
		} else {
			s.split = ""
			if err := s.openFolder(filepath.Dir(p), []string{filepath.Base(p)}, l); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("cifar: %s is neither a folder nor a regular file", p)
	}
	if err := s.setClasses(l); err != nil {
		return nil, err
	}
	for _, sz := range s.sizes {
		s.count += sz / int64(s.recSize)
	}
	return s, nil
}

// findInput locates the data under folder p: the files themselves, the official folder inside
// p, or the official archive inside p.
func findInput(files source.Files, p string, l layout) (dir, archive string, err error) {
	if exists(files, filepath.Join(p, l.files[0])) {
		return p, "", nil
	}
	if exists(files, filepath.Join(p, l.folder, l.files[0])) {
		return filepath.Join(p, l.folder), "", nil
	}
	if exists(files, filepath.Join(p, l.archiveName)) {
		return "", filepath.Join(p, l.archiveName), nil
	}
	return "", "", fmt.Errorf("cifar: %s: found neither %s, %s/%s nor %s",
		p, l.files[0], l.folder, l.files[0], l.archiveName)
}

func exists(files source.Files, p string) bool {
	fi, err := source.Stat(files, p)
	return err == nil && fi.Mode().IsRegular()
}

// openInput opens the file at p for one sequential read: through Source.inputs where set.
func (s *Source) openInput(ctx context.Context, p string) (io.ReadCloser, error) {
	return source.OpenInput(ctx, s.inputs, p, fsentry.Open)
}

// sniffArchive reports whether the file starts like a gzip stream or a tar archive.
func (s *Source) sniffArchive(p string) (bool, error) {
	f, err := s.openInput(context.Background(), p)
	if err != nil {
		return false, fmt.Errorf("cifar: %s: %w", filepath.Base(p), err)
	}
	defer f.Close()
	var b [512]byte
	n, err := io.ReadFull(f, b[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return false, fmt.Errorf("cifar: %s: %w", p, err)
	}
	if n >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		return true, nil
	}
	if n == 512 && string(b[257:262]) == "ustar" {
		return true, nil
	}
	return false, nil
}

func (s *Source) checkSize(name string, size int64) error {
	if size == 0 {
		// It would contribute no record without a word: refused, like a truncated batch.
		return FormatError(fmt.Sprintf("%s: empty (0 bytes): a batch file holds %d-byte records", name, s.recSize))
	}
	if size%int64(s.recSize) != 0 {
		return FormatError(fmt.Sprintf("%s: size %d is not a multiple of %d", name, size, s.recSize))
	}
	return nil
}

func (s *Source) openFolder(dir string, files []string, l layout) error {
	s.dir = dir
	for _, name := range files {
		fi, err := source.Stat(s.inputs, filepath.Join(dir, name))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("cifar: %s: %s not found", dir, name)
			}
			return fmt.Errorf("cifar: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("cifar: %s is not a regular file", name)
		}
		if err := s.checkSize(name, fi.Size()); err != nil {
			return err
		}
		s.files = append(s.files, name)
		s.sizes = append(s.sizes, fi.Size())
	}
	var err error
	if s.classes, err = readNamesFile(filepath.Join(dir, l.namesFile), l.namesFile, l.nClasses); err != nil {
		return err
	}
	if s.classes != nil {
		s.classesFrom = l.namesFile
	}
	if l.coarseFile != "" {
		if s.coarse, err = readNamesFile(filepath.Join(dir, l.coarseFile), l.coarseFile, l.nCoarse); err != nil {
			return err
		}
	}
	return nil
}

// readNamesFile reads a class names file, or returns nil when it does not exist.
func readNamesFile(p, name string, want int) ([]string, error) {
	f, err := fsentry.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cifar: %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxNamesBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cifar: %s: %w", name, err)
	}
	return parseNames(data, name, want)
}

// parseNames returns the non-empty, space-trimmed lines of a names file, which must number want.
func parseNames(data []byte, name string, want int) ([]string, error) {
	if len(data) > maxNamesBytes {
		return nil, FormatError(fmt.Sprintf("%s: larger than %d bytes", name, maxNamesBytes))
	}
	var names []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			names = append(names, line)
		}
	}
	if len(names) != want {
		return nil, FormatError(fmt.Sprintf("%s: %d class names, want %d", name, len(names), want))
	}
	for i, n := range names {
		names[i] = fsentry.Name(n)
	}
	if err := fsentry.CheckClasses(names); err != nil {
		return nil, fmt.Errorf("cifar: %s: %w", name, err)
	}
	return names, nil
}

func (s *Source) setClasses(l layout) error {
	if s.classes == nil {
		s.classes = indexNames(l.nClasses)
		s.classesFrom = "label values"
	}
	if l.nCoarse > 0 && s.coarse == nil {
		s.coarse = indexNames(l.nCoarse)
	}
	return nil
}

func indexNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	return names
}

// archiveReader streams the members of a .tar.gz or .tar file.
type archiveReader struct {
	f  io.ReadCloser
	gz *gzip.Reader
	tr *tar.Reader
}

func (s *Source) openArchiveReader(ctx context.Context, p string) (*archiveReader, error) {
	f, err := s.openInput(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("cifar: %s: %w", filepath.Base(p), err)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	a := &archiveReader{f: f}
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cifar: %s: %w", filepath.Base(p), err)
		}
		a.gz = gz
		r = gz
	}
	a.tr = tar.NewReader(r)
	return a, nil
}

// next returns the next regular member, or io.EOF. Every member, wanted or not, must declare at
// most max bytes: tar skips a member by reading it, and a sparse member of any declared size is
// stored in a few bytes.
func (a *archiveReader) next(max int64) (*tar.Header, error) {
	for {
		h, err := a.tr.Next()
		if err != nil {
			return nil, err
		}
		if h.Size > max {
			return nil, fmt.Errorf("%s: size %d is over the limit of %d bytes", h.Name, h.Size, max)
		}
		if h.Typeflag == tar.TypeReg { // archive/tar reports old-style regular files (TypeRegA) as TypeReg
			return h, nil
		}
	}
}

func (a *archiveReader) close() {
	if a.gz != nil {
		a.gz.Close()
	}
	a.f.Close()
}

func (s *Source) openArchive(p string, l layout) error {
	s.archive = p
	an := filepath.Base(p)
	want := make(map[string]int, len(l.files))
	for i, name := range l.files {
		want[name] = i
	}
	members := make([]string, len(l.files))
	sizes := make([]int64, len(l.files))
	var namesData, coarseData []byte
	a, err := s.openArchiveReader(context.Background(), p)
	if err != nil {
		return err
	}
	defer a.close()
	// The whole archive is listed, not only up to the last member wanted: a second member with
	// a wanted name makes the archive ambiguous (extracting it keeps the last one; packer would
	// take the first), so it is refused rather than resolved silently.
	namesMember, coarseMember := "", ""
	for {
		h, err := a.next(s.maxMember)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("cifar: %s: %w", an, archiveErr(err))
		}
		base := path.Base(h.Name)
		dup := ""
		if i, ok := want[base]; ok && members[i] != "" {
			dup = members[i]
		} else if base == l.namesFile && namesMember != "" {
			dup = namesMember
		} else if l.coarseFile != "" && base == l.coarseFile && coarseMember != "" {
			dup = coarseMember
		}
		if dup != "" {
			return FormatError(fmt.Sprintf("%s: two members named %s (%s and %s): the archive is ambiguous", an, base, dup, h.Name))
		}
		if i, ok := want[base]; ok {
			if err := s.checkSize(an+": "+h.Name, h.Size); err != nil {
				return err
			}
			members[i], sizes[i] = h.Name, h.Size
			continue
		}
		var dst *[]byte
		switch {
		case base == l.namesFile:
			dst, namesMember = &namesData, h.Name
		case l.coarseFile != "" && base == l.coarseFile:
			dst, coarseMember = &coarseData, h.Name
		default:
			continue
		}
		if h.Size > maxNamesBytes {
			return FormatError(fmt.Sprintf("%s: %s: larger than %d bytes", an, h.Name, maxNamesBytes))
		}
		data, err := io.ReadAll(a.tr)
		if err != nil {
			return fmt.Errorf("cifar: %s: %s: %w", an, h.Name, archiveErr(err))
		}
		*dst = data
	}
	for i, m := range members {
		if m == "" {
			return fmt.Errorf("cifar: %s: no member named %s", an, l.files[i])
		}
	}
	s.members, s.files, s.sizes = members, l.files, sizes
	if namesData != nil {
		if s.classes, err = parseNames(namesData, l.namesFile, l.nClasses); err != nil {
			return err
		}
		s.classesFrom = l.namesFile
	}
	if coarseData != nil {
		if s.coarse, err = parseNames(coarseData, l.coarseFile, l.nCoarse); err != nil {
			return err
		}
	}
	return nil
}

// archiveErr turns a plain EOF inside an archive into io.ErrUnexpectedEOF.
func archiveErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Len returns the number of records the source will enumerate.
func (s *Source) Len() int64 { return s.count }

// Info describes the source. Spec holds the kind, split, file names (relative), record count
// and where the class names came from; nothing host-dependent.
func (s *Source) Info() source.SourceInfo {
	spec := map[string]any{
		"kind":         s.kind,
		"files":        append([]string(nil), s.files...),
		"records":      s.count,
		"classes_from": s.classesFrom,
	}
	if s.split != "" {
		spec["split"] = s.split
	}
	if s.archive != "" {
		spec["archive"] = filepath.Base(s.archive)
	}
	info := source.SourceInfo{
		Kind:    s.kind,
		Classes: append([]string(nil), s.classes...),
		Spec:    spec,
		Count:   s.count,
		Frame:   source.FrameShape{W: Width, H: Height, C: Channels},
	}
	if s.kind == Kind100 {
		info.AuxNames = []string{"coarse_label"}
		spec["coarse_classes"] = append([]string(nil), s.coarse...)
	}
	return info
}

// CoarseClasses returns the CIFAR-100 coarse class names (nil for CIFAR-10).
func (s *Source) CoarseClasses() []string { return append([]string(nil), s.coarse...) }

// Enumerate emits every record of the split in file order.
func (s *Source) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	var seq int64
	if s.archive == "" {
		for i, name := range s.files {
			f, err := s.openInput(ctx, filepath.Join(s.dir, name))
			if err != nil {
				return fmt.Errorf("cifar: %s: %w", name, err)
			}
			err = s.emitRecords(ctx, f, i, &seq, emit)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	return s.enumerateArchive(ctx, &seq, emit)
}

func (s *Source) enumerateArchive(ctx context.Context, seq *int64, emit func(source.Item) error) error {
	an := filepath.Base(s.archive)
	index := make(map[string]int, len(s.members))
	for i, m := range s.members {
		index[m] = i
	}
	buffered := make(map[int][]byte)
	budget := s.bufLimit
	next := 0
	for next < len(s.files) {
		progress, err := s.archivePass(ctx, index, buffered, &budget, &next, seq, emit)
		if err != nil {
			return err
		}
		if !progress && next < len(s.files) {
			return fmt.Errorf("cifar: %s: member %s disappeared since the archive was opened", an, s.members[next])
		}
	}
	return nil
}

// archivePass reads the archive once, emitting what it can in order and buffering members
// that come early while the budget allows.
func (s *Source) archivePass(ctx context.Context, index map[string]int, buffered map[int][]byte,
	budget *int64, next *int, seq *int64, emit func(source.Item) error) (progress bool, err error) {
	an := filepath.Base(s.archive)
	a, err := s.openArchiveReader(ctx, s.archive)
	if err != nil {
		return false, err
	}
	defer a.close()
	for *next < len(s.files) {
		h, err := a.next(s.maxMember)
		if err == io.EOF {
			return progress, nil
		}
		if err != nil {
			return progress, fmt.Errorf("cifar: %s: %w", an, archiveErr(err))
		}
		i, ok := index[h.Name]
		if !ok || i < *next {
			continue
		}
		if _, ok := buffered[i]; ok {
			continue
		}
		if h.Size != s.sizes[i] {
			return progress, fmt.Errorf("cifar: %s: %s changed size since the archive was opened", an, h.Name)
		}
		if i == *next {
			progress = true
			if err := s.emitRecords(ctx, a.tr, i, seq, emit); err != nil {
				return progress, err
			}
			*next++
			for {
				b, ok := buffered[*next]
				if !ok {
					break
				}
				delete(buffered, *next)
				*budget += int64(len(b))
				if err := s.emitRecords(ctx, bytes.NewReader(b), *next, seq, emit); err != nil {
					return progress, err
				}
				*next++
			}
			continue
		}
		if h.Size > *budget {
			continue // waits for a later pass
		}
		b := make([]byte, h.Size)
		if _, err := io.ReadFull(a.tr, b); err != nil {
			return progress, fmt.Errorf("cifar: %s: %s: %w", an, h.Name, archiveErr(err))
		}
		buffered[i] = b
		*budget -= h.Size
		progress = true
	}
	return progress, nil
}

// emitRecords reads file i's records from r and emits them.
func (s *Source) emitRecords(ctx context.Context, r io.Reader, i int, seq *int64, emit func(source.Item) error) error {
	name := s.files[i]
	rs := s.recSize
	n := s.sizes[i] / int64(rs)
	for rec := int64(0); rec < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := min(n-rec, chunkRecords)
		chunk := make([]byte, int(k)*rs)
		if _, err := io.ReadFull(r, chunk); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("cifar: %s: record %d: %w", name, rec, err)
		}
		for j := 0; j < int(k); j++ {
			b := chunk[j*rs : (j+1)*rs : (j+1)*rs]
			it := source.Item{
				Seq:  *seq,
				Name: fsentry.Name(name) + "#" + strconv.FormatInt(rec, 10),
				Raw:  b[rs-ImageSize:],
			}
			if rs == RecordSize100 {
				it.Label = int64(b[1])
				it.Aux = []int64{int64(b[0])}
			} else {
				it.Label = int64(b[0])
			}
			if err := emit(it); err != nil {
				return err
			}
			*seq++
			rec++
		}
	}
	return nil
}

// Decode checks the labels and converts the stored planes into an interleaved image.
func (s *Source) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	if err := s.check(it); err != nil {
		return err
	}
	pix := make([]byte, ImageSize)
	ToHWC(pix, it.Raw)
	clip := source.Clip{
		Frames: []transforms.Image{{W: Width, H: Height, C: Channels, Pix: pix}},
		Label:  it.Label,
	}
	if len(it.Aux) > 0 {
		clip.Aux = append([]int64(nil), it.Aux...)
	}
	return emit(clip)
}

var _ source.DirectSource = (*Source)(nil)

// FrameShape returns the size of every image (source.DirectSource).
func (s *Source) FrameShape() (w, h, c int) { return Width, Height, Channels }

// DecodeTo is Decode into pix (source.DirectSource): the same checks, the planes interleaved
// straight into the record buffer.
func (s *Source) DecodeTo(ctx context.Context, it source.Item, pix []byte) (source.Clip, error) {
	if err := s.check(it); err != nil {
		return source.Clip{}, err
	}
	ToHWC(pix, it.Raw)
	clip := source.Clip{Label: it.Label}
	if len(it.Aux) > 0 {
		clip.Aux = append([]int64(nil), it.Aux...)
	}
	return clip, nil
}

// check validates an item's size and labels.
func (s *Source) check(it source.Item) error {
	if len(it.Raw) != ImageSize {
		return fmt.Errorf("cifar: %s: item has %d pixel bytes, want %d", it.Name, len(it.Raw), ImageSize)
	}
	nClasses := int64(NumClasses10)
	if s.kind == Kind100 {
		nClasses = NumFine100
		if len(it.Aux) != 1 {
			return fmt.Errorf("cifar: %s: item has %d aux labels, want 1", it.Name, len(it.Aux))
		}
		if c := it.Aux[0]; c < 0 || c >= NumCoarse100 {
			return &source.InputError{Input: it.Name, Err: fmt.Errorf("cifar: coarse %w: %d, want 0..%d", ErrLabel, c, NumCoarse100-1)}
		}
	}
	if it.Label < 0 || it.Label >= nClasses {
		return &source.InputError{Input: it.Name, Err: fmt.Errorf("cifar: %w: %d, want 0..%d", ErrLabel, it.Label, nClasses-1)}
	}
	return nil
}

// ToHWC interleaves the three stored 32×32 planes of src into dst (both ImageSize bytes).
// It moves four pixels per step: one 32-bit load from each plane, three 32-bit stores.
func ToHWC(dst, src []byte) {
	r := (*[plane]byte)(src[0:plane])
	g := (*[plane]byte)(src[plane : 2*plane])
	b := (*[plane]byte)(src[2*plane : 3*plane])
	d := (*[3 * plane]byte)(dst[:3*plane])
	for i := 0; i < plane; i += 4 {
		rv := binary.LittleEndian.Uint32(r[i : i+4])
		gv := binary.LittleEndian.Uint32(g[i : i+4])
		bv := binary.LittleEndian.Uint32(b[i : i+4])
		o := d[3*i : 3*i+12]
		binary.LittleEndian.PutUint32(o[0:4], rv&0xff|(gv&0xff)<<8|(bv&0xff)<<16|(rv&0xff00)<<16)
		binary.LittleEndian.PutUint32(o[4:8], (gv>>8)&0xff|(bv&0xff00)|(rv&0xff0000)|(gv&0xff0000)<<8)
		binary.LittleEndian.PutUint32(o[8:12], (bv>>16)&0xff|(rv>>16)&0xff00|(gv>>8)&0xff0000|bv&0xff000000)
	}
}

// ToCHW is the inverse of ToHWC.
func ToCHW(dst, src []byte) {
	r, g, b := dst[0:plane], dst[plane:2*plane], dst[2*plane:3*plane]
	src = src[:3*plane]
	for i := 0; i < plane; i++ {
		s := src[3*i : 3*i+3 : 3*i+3]
		r[i], g[i], b[i] = s[0], s[1], s[2]
	}
}
