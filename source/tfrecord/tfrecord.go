package tfrecord

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/source/internal/memdecode"
	"github.com/packer-dev/packer/transforms"
)

// Kind is the source kind's --from name.
const Kind = "tfrecord"

// Default feature keys: the TFDS and TF-slim ImageNet convention.
const (
	DefaultImageKey = "image/encoded"
	DefaultLabelKey = "image/class/label"
)

// MaxRecordSize bounds one record's length: the length field can say anything, and the record
// is held in memory until it is decoded.
const MaxRecordSize = 256 << 20

// Errors a skipped record's reason wraps.
var (
	ErrChecksum  = errors.New("data checksum mismatch")
	ErrFraming   = errors.New("file unreadable from here on")
	ErrExample   = errors.New("not a tf.train.Example")
	ErrNoImage   = errors.New("no image feature")
	ErrNoLabel   = errors.New("no label feature")
	ErrDuplicate = errors.New("ambiguous feature")
	ErrLabel     = errors.New("bad label")
)

// Options configure a Source.
type Options struct {
	// Decode is passed to transforms.DecodeBytes (pixel cap, EXIF orientation); with --fast
	// the build's transform sets Decode.Draft (PlanDecode).
	Decode transforms.DecodeOptions
	// ImageKey and LabelKey name the features; "" means the defaults.
	ImageKey, LabelKey string
	// Classes names the labels (--classes): label i is Classes[i].
	Classes []string
	// Files, when set, serves the bytes of the files below the source's path, which is then a
	// view of an object store's listing (source.Options.Files).
	Files source.Files
}

// Source is a source.Source over TFRecord files.
type Source struct {
	root  string
	files []string
	opts  Options
	dec   memdecode.Decoder
}

var _ source.PlannedSource = (*Source)(nil)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func masked(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// IsFileName reports whether name looks like a TFRecord file of a folder source.
func IsFileName(name string) bool {
	lower := strings.ToLower(name)
	return !strings.HasPrefix(name, ".") && (strings.Contains(lower, ".tfrecord") || strings.Contains(lower, "-of-"))
}

// Open opens one TFRecord file or a folder of them.
func Open(p string, opts Options) (*Source, error) {
	if opts.ImageKey == "" {
		opts.ImageKey = DefaultImageKey
	}
	if opts.LabelKey == "" {
		opts.LabelKey = DefaultLabelKey
	}
	if err := fsentry.CheckClasses(opts.Classes); err != nil {
		return nil, fmt.Errorf("tfrecord: --classes: %w", err)
	}
	// A folder of a view in memory is listed through Options.Files (source.Lister).
	fi, err := source.Stat(opts.Files, p)
	if err != nil {
		return nil, fmt.Errorf("tfrecord: %w", err)
	}
	s := &Source{opts: opts, dec: memdecode.Decoder{Opts: opts.Decode}}
	if !fi.IsDir() {
		s.root, s.files = filepath.Dir(p), []string{filepath.Base(p)}
		return s, nil
	}
	ents, err := source.ReadDir(opts.Files, p)
	if err != nil {
		return nil, fmt.Errorf("tfrecord: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() && IsFileName(e.Name()) {
			s.files = append(s.files, e.Name())
		}
	}
	if len(s.files) == 0 {
		return nil, fmt.Errorf("tfrecord: %s: no TFRecord file (a name containing .tfrecord or -of-)", p)
	}
	sort.Strings(s.files)
	s.root = p
	if err := fsentry.SameFiles(p, s.files); err != nil {
		return nil, fmt.Errorf("tfrecord: %s: %w", p, err)
	}
	return s, nil
}

// PlanDecode takes the build's transform (memdecode.Decoder.Plan: the --fast scale).
func (s *Source) PlanDecode(p source.DecodePlan) { s.dec.Plan(p) }

// Info describes the source.
func (s *Source) Info() source.SourceInfo {
	return source.SourceInfo{
		Kind:    Kind,
		Classes: append([]string(nil), s.opts.Classes...),
		Spec: s.dec.Spec(map[string]any{
			"kind": Kind, "files": len(s.files), "image_key": s.opts.ImageKey, "label_key": s.opts.LabelKey,
		}),
		HasMeta: true,
		Count:   -1,
	}
}

// Enumerate reads the files in order and emits one item per record.
func (s *Source) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	return s.EnumerateLayout(ctx, emit, nil)
}

var _ source.RecordSource = (*Source)(nil)

// InputFiles are the TFRecord files, in the order they are read.
func (s *Source) InputFiles() (string, []string) { return s.root, s.files }

// FileStamp is the stamp of one of InputFiles now (source.RecordSource).
func (s *Source) FileStamp(name string) source.Stamp {
	return source.StatStamp(s.opts.Files, filepath.Join(s.root, filepath.FromSlash(name)))
}

// EnumerateLayout is Enumerate that reports each file's record count (source.RecordSource).
func (s *Source) EnumerateLayout(ctx context.Context, emit func(source.Item) error, file func(source.FileLayout) error) error {
	return source.EnumerateFiles(ctx, s, func(ctx context.Context, name string, seq *int64, emit func(source.Item) error) error {
		return s.enumerateFile(ctx, name, nil, 0, seq, emit)
	}, emit, file)
}

// EnumerateRange emits the records [lo, hi) (source.RecordSource): it opens only the files
// that hold them, and passes over the records before lo by their length headers, without
// checking or parsing them.
func (s *Source) EnumerateRange(ctx context.Context, files []source.FileLayout, lo, hi int64, emit func(source.Item) error) error {
	return source.EnumerateFileRange(ctx, s.root, files, lo, hi, nil, func(ctx context.Context, i int, _ int64, seq *int64, emit func(source.Item) error) error {
		return s.enumerateFile(ctx, s.files[i], &files[i].Stamp, max(0, lo-*seq), seq, emit)
	}, emit)
}

// enumerateFile emits the records of the file name, pinned to st (or nil) where it is read
// through Options.Files; the first skip records are counted but neither checked nor parsed
// (EnumerateRange passes over them).
func (s *Source) enumerateFile(ctx context.Context, name string, st *source.Stamp, skip int64, seq *int64, emit func(source.Item) error) error {
	fname := fsentry.Name(name)
	send := func(it source.Item) error {
		it.Seq = *seq
		*seq++
		return emit(it)
	}
	f, err := source.OpenPinned(ctx, s.opts.Files, filepath.Join(s.root, name), st, fsentry.Open)
	if err != nil {
		return send(source.Item{Name: fname, Note: memdecode.Note{Err: fmt.Errorf("%w: %w", ErrFraming, err)}})
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var head [12]byte
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		rest := func(err error) error {
			return send(source.Item{Name: fmt.Sprintf("%s (from record %d)", fname, n), Note: memdecode.Note{Err: fmt.Errorf("%w: %w", ErrFraming, err)}})
		}
		if _, err := io.ReadFull(r, head[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return rest(fmt.Errorf("record header: %w", err))
		}
		if got, want := binary.LittleEndian.Uint32(head[8:]), masked(head[:8]); got != want {
			return rest(fmt.Errorf("length checksum mismatch (%08x, want %08x)", got, want))
		}
		size := binary.LittleEndian.Uint64(head[:8])
		if size > MaxRecordSize {
			return rest(fmt.Errorf("record of %d bytes, the limit is %d", size, MaxRecordSize))
		}
		if int64(n) < skip {
			if got, err := r.Discard(int(size) + 4); err != nil {
				return rest(fmt.Errorf("record data: %d of %d bytes: %w", got, size+4, io.ErrUnexpectedEOF))
			}
			*seq++
			continue
		}
		data := bytes.NewBuffer(make([]byte, 0, min(size+4, 1<<20)))
		if got, err := data.ReadFrom(io.LimitReader(r, int64(size)+4)); err != nil || got < int64(size)+4 {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return rest(fmt.Errorf("record data: %w", err))
		}
		body, crc := data.Bytes()[:size], binary.LittleEndian.Uint32(data.Bytes()[size:])
		it := source.Item{Name: fmt.Sprintf("%s#%d", fname, n)}
		meta, _ := json.Marshal(map[string]any{"file": fname, "record": n})
		if want := masked(body); crc != want {
			it.Note = memdecode.Note{Err: fmt.Errorf("%w (%08x, want %08x)", ErrChecksum, crc, want)}
		} else if img, label, err := s.parse(body); err != nil {
			it.Note = memdecode.Note{Err: err}
		} else {
			it.Raw, it.Label, it.Note = img, label, memdecode.Note{Meta: meta}
		}
		if err := send(it); err != nil {
			return err
		}
	}
}

// parse reads the image bytes and the label out of a tf.train.Example. The image feature must
// hold one bytes value and the label feature one int64 value, each named once: the feature map
// naming one twice (TensorFlow's parser keeps the last entry) or a feature of several values (a
// FixedLenFeature of shape [] refuses it) is a bad Example, not one of its values picked.
func (s *Source) parse(b []byte) (img []byte, label int64, err error) {
	var haveImg, haveLabel bool
	err = fields(b, func(f field) error {
		if f.num != 1 || f.typ != protowire.BytesType { // Example.features
			return nil
		}
		return fields(f.b, func(f field) error {
			if f.num != 1 || f.typ != protowire.BytesType { // Features.feature (a map entry)
				return nil
			}
			var key string
			var feat []byte
			if err := fields(f.b, func(f field) error {
				switch {
				case f.num == 1 && f.typ == protowire.BytesType:
					key = string(f.b)
				case f.num == 2 && f.typ == protowire.BytesType:
					feat = f.b
				}
				return nil
			}); err != nil {
				return err
			}
			switch key {
			case s.opts.ImageKey:
				if haveImg {
					return fmt.Errorf("%w: feature %q twice", ErrDuplicate, key)
				}
				v, n, err := bytesValues(feat)
				if err != nil {
					return err
				}
				if n > 1 {
					return fmt.Errorf("%w: feature %q holds %d values, want one", ErrDuplicate, key, n)
				}
				img, haveImg = v, n == 1
			case s.opts.LabelKey:
				if haveLabel {
					return fmt.Errorf("%w: feature %q twice", ErrDuplicate, key)
				}
				v, n, err := int64Values(feat)
				if err != nil {
					return err
				}
				if n > 1 {
					return fmt.Errorf("%w: feature %q holds %d values, want one", ErrDuplicate, key, n)
				}
				label, haveLabel = v, n == 1
			}
			return nil
		})
	})
	switch {
	case errors.Is(err, ErrDuplicate):
		return nil, 0, err
	case err != nil:
		return nil, 0, fmt.Errorf("%w: %w", ErrExample, err)
	case !haveImg:
		return nil, 0, fmt.Errorf("%w %q (a bytes_list)", ErrNoImage, s.opts.ImageKey)
	case !haveLabel:
		return nil, 0, fmt.Errorf("%w %q (an int64_list)", ErrNoLabel, s.opts.LabelKey)
	case label < 0:
		return nil, 0, fmt.Errorf("%w: %d", ErrLabel, label)
	case len(s.opts.Classes) > 0 && label >= int64(len(s.opts.Classes)):
		return nil, 0, fmt.Errorf("%w: %d, want 0..%d (--classes names %d classes)", ErrLabel, label, len(s.opts.Classes)-1, len(s.opts.Classes))
	}
	return img, label, nil
}

// field is one field of a protobuf message: its payload when length-delimited, its value when
// a varint.
type field struct {
	num protowire.Number
	typ protowire.Type
	b   []byte
	x   uint64
}

// fields calls fn with every field of a message, in order.
func fields(b []byte, fn func(field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			f.x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// bytesValues returns the first value of a Feature's bytes_list (Feature field 1, BytesList
// field 1) and how many values it holds (lists repeated in one Feature merge, as protobuf
// merges them).
func bytesValues(feat []byte) (first []byte, n int, err error) {
	err = fields(feat, func(f field) error {
		if f.num != 1 || f.typ != protowire.BytesType {
			return nil
		}
		return fields(f.b, func(v field) error {
			if v.num == 1 && v.typ == protowire.BytesType {
				if n == 0 {
					first = v.b
				}
				n++
			}
			return nil
		})
	})
	return first, n, err
}

// int64Values returns the first value of a Feature's int64_list (Feature field 3, Int64List
// field 1, packed or not) and how many values it holds.
func int64Values(feat []byte) (first int64, n int, err error) {
	err = fields(feat, func(f field) error {
		if f.num != 3 || f.typ != protowire.BytesType {
			return nil
		}
		return fields(f.b, func(v field) error {
			if v.num != 1 {
				return nil
			}
			switch v.typ {
			case protowire.VarintType:
				if n == 0 {
					first = int64(v.x)
				}
				n++
			case protowire.BytesType: // packed
				for b := v.b; len(b) > 0; {
					x, k := protowire.ConsumeVarint(b)
					if k < 0 {
						return protowire.ParseError(k)
					}
					if n == 0 {
						first = int64(x)
					}
					n++
					b = b[k:]
				}
			}
			return nil
		})
	})
	return first, n, err
}

// Decode decodes the item's image with the source's decoder, or reports the fault Enumerate
// found in it.
func (s *Source) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	return s.dec.Decode(it, emit)
}
