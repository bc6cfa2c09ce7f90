package webdataset

import (
	"archive/tar"
	"bufio"
	"bytes"
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
	"sync"

	"github.com/klauspost/compress/gzip"

	"github.com/packer-dev/packer/formats/inputs"
	"github.com/packer-dev/packer/pipeline"
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
	ErrNoLabel   = errors.New("no .cls member")
	ErrLabel     = errors.New("bad label")
	ErrTooLarge  = errors.New("member larger than the limit")
	ErrTruncated = errors.New("shard unreadable from here on")
)

// Options configure a Source.
type Options struct {
	// Decode is passed to transforms.DecodeBytes for every image (pixel cap, EXIF
	// orientation); with --fast the build's transform sets Decode.Draft (PlanDecode).
	Decode transforms.DecodeOptions
	// Classes names the labels (--classes): label i is Classes[i].
	Classes []string
}

// Source is a pipeline.Source over WebDataset tar shards.
type Source struct {
	root    string   // the folder, or the shard's folder
	shards  []string // shard paths relative to root, in order
	opts    Options
	plan    pipeline.DecodePlan
	scratch sync.Pool // *transforms.DecodeScratch
}

var _ pipeline.PlannedSource = (*Source)(nil)

// Open opens a folder of shards or one shard file.
func Open(p string, opts Options) (*Source, error) {
	if err := inputs.CheckClasses(opts.Classes); err != nil {
		return nil, fmt.Errorf("webdataset: --classes: %w", err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("webdataset: %w", err)
	}
	s := &Source{opts: opts}
	if !fi.IsDir() {
		s.root, s.shards = filepath.Dir(p), []string{filepath.Base(p)}
		return s, nil
	}
	ents, err := os.ReadDir(p)
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
	return s, nil
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

// PlanDecode takes the build's transform: with --fast, JPEGs are decoded at the reduced scale
// it allows (transforms.DraftSize). Images decoded from memory are never windows.
func (s *Source) PlanDecode(p pipeline.DecodePlan) {
	s.plan = pipeline.DecodePlan{Transform: p.Transform}
	if s.opts.Decode.Draft == nil && p.Transform.Fast {
		s.opts.Decode.Draft = transforms.DraftSize(p.Transform, 1)
	}
}

// Info describes the source.
func (s *Source) Info() pipeline.SourceInfo {
	mp := s.opts.Decode.MaxPixels
	if mp == 0 {
		mp = transforms.DefaultMaxPixels
	}
	return pipeline.SourceInfo{
		Kind:    Kind,
		Classes: append([]string(nil), s.opts.Classes...),
		Spec: map[string]any{
			"kind": Kind, "shards": len(s.shards), "image_extensions": Extensions, "label": "cls",
			"exif_orient": s.opts.Decode.ExifOrient, "fast_decode": s.opts.Decode.Draft != nil, "max_pixels": mp,
		},
		HasMeta: true,
		Count:   -1,
	}
}

// sample is one group of members with the same key.
type sample struct {
	key      string
	image    []byte
	imageMem string
	label    []byte
	hasLabel bool
	err      error
}

// Enumerate reads the shards in order and emits one item per sample.
func (s *Source) Enumerate(ctx context.Context, emit func(pipeline.Item) error) error {
	var seq int64
	for _, name := range s.shards {
		if err := s.enumerateShard(ctx, name, &seq, emit); err != nil {
			return err
		}
	}
	return nil
}

func (s *Source) enumerateShard(ctx context.Context, name string, seq *int64, emit func(pipeline.Item) error) error {
	f, err := inputs.Open(filepath.Join(s.root, name))
	if err != nil {
		return s.emitBad(seq, inputs.Name(name), fmt.Errorf("%w: %w", ErrTruncated, err), emit)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 1<<20)
	lower := strings.ToLower(name)
	if strings.HasSuffix(lower, ".gz") || strings.HasSuffix(lower, ".tgz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return s.emitBad(seq, inputs.Name(name), fmt.Errorf("%w: gzip: %w", ErrTruncated, err), emit)
		}
		defer zr.Close()
		r = zr
	}
	shardName := inputs.Name(name)
	tr := tar.NewReader(r)
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
		if h.Typeflag != tar.TypeReg {
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
		want := isImageExt(ext) && cur.image == nil || strings.EqualFold(ext, "cls") && !cur.hasLabel
		if !want {
			continue
		}
		if h.Size > MaxMemberSize {
			cur.err = fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, inputs.Name(h.Name), h.Size, MaxMemberSize)
			continue
		}
		data, err := readN(tr, h.Size)
		if err != nil {
			where := fmt.Sprintf("%s (after member %d)", shardName, members-1)
			cur = nil
			return s.emitBad(seq, where, fmt.Errorf("%w: %w", ErrTruncated, err), emit)
		}
		if isImageExt(ext) {
			cur.image, cur.imageMem = data, h.Name
		} else {
			cur.label, cur.hasLabel = data, true
		}
	}
}

// splitKey splits a member name into its sample key and the extension after the key's dot.
func splitKey(name string) (key, ext string) {
	dir, base := path.Split(name)
	if i := strings.IndexByte(base, '.'); i >= 0 {
		return dir + base[:i], base[i+1:]
	}
	return name, ""
}

func isImageExt(ext string) bool {
	for _, e := range Extensions {
		if strings.EqualFold(e, ext) {
			return true
		}
	}
	return false
}

func (s *Source) emitSample(seq *int64, shardName string, smp *sample, emit func(pipeline.Item) error) error {
	name := shardName + ":" + inputs.Name(smp.key)
	err := smp.err
	var label int64
	switch {
	case err != nil:
	case smp.image == nil:
		err = ErrNoImage
	case !smp.hasLabel:
		err = ErrNoLabel
	default:
		label, err = s.parseLabel(smp.label)
	}
	if err != nil {
		return s.emitBad(seq, name, err, emit)
	}
	meta, _ := json.Marshal(map[string]string{"shard": shardName, "key": inputs.Name(smp.key), "image": inputs.Name(smp.imageMem)})
	it := pipeline.Item{Seq: *seq, Name: name, Raw: smp.image, Label: label, Note: meta}
	*seq++
	return emit(it)
}

func (s *Source) parseLabel(b []byte) (int64, error) {
	t := strings.TrimSpace(string(b))
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%w: .cls holds %q, want an integer from 0", ErrLabel, t)
	}
	if len(s.opts.Classes) > 0 && v >= int64(len(s.opts.Classes)) {
		return 0, fmt.Errorf("%w: %d, want 0..%d (--classes names %d classes)", ErrLabel, v, len(s.opts.Classes)-1, len(s.opts.Classes))
	}
	return v, nil
}

// emitBad emits an item that Decode reports as bad with err (its Note).
func (s *Source) emitBad(seq *int64, name string, err error, emit func(pipeline.Item) error) error {
	it := pipeline.Item{Seq: *seq, Name: name, Note: err}
	*seq++
	return emit(it)
}

// Decode decodes a sample's image, or reports the fault Enumerate found in it.
func (s *Source) Decode(ctx context.Context, it pipeline.Item, emit func(pipeline.Clip) error) error {
	if err, ok := it.Note.(error); ok {
		return &pipeline.InputError{Input: it.Name, Err: err}
	}
	meta, _ := it.Note.([]byte)
	sc, _ := s.scratch.Get().(*transforms.DecodeScratch)
	if sc == nil {
		sc = new(transforms.DecodeScratch)
	}
	defer s.scratch.Put(sc)
	img, err := transforms.DecodeBytes(it.Raw, s.opts.Decode, sc)
	if err != nil {
		var de *transforms.DecodeError
		if errors.As(err, &de) {
			err = de.Err
		}
		return &pipeline.InputError{Input: it.Name, Err: err}
	}
	return emit(pipeline.Clip{Frames: []transforms.Image{img}, Label: it.Label, Meta: meta})
}

// readN reads exactly n bytes of r. The buffer grows with what arrives, so a header that
// claims a large member in a truncated file costs no large allocation.
func readN(r io.Reader, n int64) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(n, 1<<20)))
	got, err := buf.ReadFrom(io.LimitReader(r, n))
	if err == nil && got < n {
		err = io.ErrUnexpectedEOF
	}
	return buf.Bytes(), err
}
