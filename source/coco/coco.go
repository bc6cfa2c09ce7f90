// Package coco is the source kind coco: a COCO object-detection annotation file (the
// instances_*.json layout: images, annotations, categories) and the images it names. Each
// image is one record with four fields whose rows are its annotations: boxes (float32 [k, 4],
// x0, y0, x1, y1 in the image's pixels, from COCO's x, y, width, height), category (int64 [k],
// COCO's category ids), iscrowd (int64 [k]) and area (float32 [k], as the file gives it, in
// source pixels: it is not rescaled with the image). The manifest's class names are indexed by
// category id ("" where an id is unused), so classes[category] names a box's class. Records
// have no class of their own: their label is -1.
//
// The file is read as a stream of tokens, one element at a time, so only the tables the
// records need are held (an image's file name, size and its annotations' numbers), not the
// file's segmentation polygons. Images are packed in ascending image id. An image without
// annotations is packed with 0 rows. Inputs that cannot be packed are reported in the
// manifest's skipped list (or fail the build with --on-error fail): an image whose file is
// missing or unreadable, whose decoded size differs from the size the file gives for it,
// one of whose annotations has a bbox that is not four finite numbers with a width and height
// of at least 0, an area that is not a finite number, or a category id the file's categories do
// not list; and, as one input each, the annotations naming an image id the file does not list.
// The bare words NaN, Infinity and -Infinity that Python's json module writes for non-finite
// floats are read as such values (a skip of their image), not as a fault of the whole file.
package coco

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/source/internal/memdecode"
	"github.com/packer-dev/packer/transforms"
)

// Kind is the source kind's --from name.
const Kind = "coco"

// Fields is the schema of a coco record's fields, in order.
var Fields = []shard.Field{
	{Name: "boxes", Kind: shard.KindNDArray, DType: "float32", Shape: []int{-1, 4}, Encoding: shard.EncodingRaw, Geometry: shard.GeometryBoxes},
	{Name: "category", Kind: shard.KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: shard.EncodingRaw, RowsOf: "boxes"},
	{Name: "iscrowd", Kind: shard.KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: shard.EncodingRaw, RowsOf: "boxes"},
	{Name: "area", Kind: shard.KindNDArray, DType: "float32", Shape: []int{-1}, Encoding: shard.EncodingRaw, RowsOf: "boxes"},
}

// maxCategoryID bounds category ids, which index the class list.
const maxCategoryID = 1 << 20

// FormatError is an annotation file that does not follow the COCO layout.
type FormatError struct {
	File string
	Msg  string
}

func (e *FormatError) Error() string { return fmt.Sprintf("coco: %s: %s", e.File, e.Msg) }

// Options configure a coco source.
type Options struct {
	Images string                   // folder the file names are relative to; "" = the annotation file's folder
	Decode transforms.DecodeOptions // image decoding
	// Files, when set, serves the images' bytes: the annotation file and the images folder
	// are then an object store's view (source.Options.Files), and each image is fetched
	// into memory when it is decoded.
	Files source.Files
}

// annotation is what a record keeps of one annotation.
type annotation struct {
	id       int64
	box      [4]float32 // x0, y0, x1, y1
	category int64
	iscrowd  int64
	area     float32
}

// imageEntry is one image of the file with its annotations.
type imageEntry struct {
	id     int64
	file   string
	w, h   int
	anns   []annotation
	reason string // why the image is a bad input, found while reading its annotations
}

// orphan is the annotations naming one image id the file does not list.
type orphan struct {
	image  int64
	reason string
}

// note is what Enumerate hands Decode about an item.
type note struct {
	img    *imageEntry
	orphan string // the item is annotations naming an unknown image: why
}

// Source is a source.Source over a COCO annotation file.
type Source struct {
	file    string
	images  string
	list    []*imageEntry // ascending id
	orphans []orphan      // one per unknown image id, ascending
	classes []string
	opts    Options
	plan    source.DecodePlan
	scratch sync.Pool
}

var _ source.PlannedSource = (*Source)(nil)

// Open reads the annotation file's tables.
func Open(file string, opts Options) (*Source, error) {
	f, err := fsentry.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := &Source{file: file, images: opts.Images, opts: opts}
	if s.images == "" {
		s.images = filepath.Dir(file)
	}
	if err := fsentry.CheckDirIn(source.ListerOf(opts.Files), s.images); err != nil {
		return nil, fmt.Errorf("coco: images folder: %w", err)
	}
	if err := s.read(f); err != nil {
		return nil, err
	}
	return s, nil
}

// tables is the file's three arrays as read.
type tables struct {
	images     map[int64]*imageEntry
	anns       []pending
	categories map[int64]string
	seen       map[string]bool
}

type rawImage struct {
	ID       *int64  `json:"id"`
	FileName *string `json:"file_name"`
	Width    int     `json:"width"`
	Height   int     `json:"height"`
}

type rawAnnotation struct {
	ID       int64           `json:"id"`
	ImageID  *int64          `json:"image_id"`
	BBox     json.RawMessage `json:"bbox"`
	Category int64           `json:"category_id"`
	IsCrowd  int64           `json:"iscrowd"`
	Area     number          `json:"area"`
}

// pending is an annotation as read, converted at once (its bbox and area checked), waiting
// for the images table: the file may list the annotations first.
type pending struct {
	image  int64
	ann    annotation
	reason string // why its image cannot be packed; "" for a good annotation
}

type rawCategory struct {
	ID   *int64 `json:"id"`
	Name string `json:"name"`
}

func (s *Source) formatErr(format string, a ...any) error {
	return &FormatError{File: s.file, Msg: fmt.Sprintf(format, a...)}
}

// read parses the file as a stream: the top-level object's members one by one, and in the
// arrays that matter one element at a time.
func (s *Source) read(r io.Reader) error {
	dec := json.NewDecoder(newPythonWords(r))
	dec.UseNumber()
	t := &tables{images: map[int64]*imageEntry{}, categories: map[int64]string{}, seen: map[string]bool{}}
	if err := s.expectDelim(dec, '{', "the file"); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return s.formatErr("after offset %d: %v", dec.InputOffset(), err)
		}
		key, _ := tok.(string)
		switch key {
		case "images":
			err = s.eachElement(dec, key, func() error { return s.readImage(dec, t) })
		case "annotations":
			err = s.eachElement(dec, key, func() error {
				var a rawAnnotation
				if err := dec.Decode(&a); err != nil {
					return s.formatErr("annotations[%d]: %v", len(t.anns), err)
				}
				if a.ImageID == nil {
					return s.formatErr("annotation %d has no image_id", a.ID)
				}
				ann, reason := convert(a)
				t.anns = append(t.anns, pending{image: *a.ImageID, ann: ann, reason: reason})
				return nil
			})
		case "categories":
			err = s.eachElement(dec, key, func() error {
				var c rawCategory
				if err := dec.Decode(&c); err != nil {
					return s.formatErr("categories[%d]: %v", len(t.categories), err)
				}
				if c.ID == nil || *c.ID < 0 || *c.ID > maxCategoryID {
					return s.formatErr("category %q: id missing or outside [0, %d]", c.Name, maxCategoryID)
				}
				if _, dup := t.categories[*c.ID]; dup {
					return s.formatErr("category id %d is listed twice", *c.ID)
				}
				t.categories[*c.ID] = c.Name
				return nil
			})
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
			if err != nil {
				err = s.formatErr("member %q: %v", key, err)
			}
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return s.formatErr("unterminated object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return s.formatErr("data after the top-level object")
	}
	return s.assemble(t)
}

func (s *Source) expectDelim(dec *json.Decoder, d json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return s.formatErr("%s: %v", what, err)
	}
	if tok != d {
		return s.formatErr("%s: want %q, found %v", what, d, tok)
	}
	return nil
}

func (s *Source) eachElement(dec *json.Decoder, key string, fn func() error) error {
	if err := s.expectDelim(dec, '[', fmt.Sprintf("member %q", key)); err != nil {
		return err
	}
	for dec.More() {
		if err := fn(); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	if err != nil {
		return s.formatErr("member %q: %v", key, err)
	}
	return nil
}

func (s *Source) readImage(dec *json.Decoder, t *tables) error {
	var im rawImage
	if err := dec.Decode(&im); err != nil {
		return s.formatErr("images[%d]: %v", len(t.images), err)
	}
	if im.ID == nil || im.FileName == nil || *im.FileName == "" {
		return s.formatErr("images[%d]: an image needs an id and a file_name", len(t.images))
	}
	if _, dup := t.images[*im.ID]; dup {
		return s.formatErr("image id %d is listed twice", *im.ID)
	}
	name := filepath.ToSlash(*im.FileName)
	if filepath.IsAbs(*im.FileName) || strings.HasPrefix(name, "../") || strings.Contains(name, "/../") || name == ".." {
		return s.formatErr("image %d: file_name %q leaves the images folder", *im.ID, *im.FileName)
	}
	// One file however spelt ("a.jpg", "./a.jpg", "s//a.jpg").
	key := path.Clean(name)
	if t.seen[key] {
		return s.formatErr("image %d: file_name %q is named by another image too", *im.ID, name)
	}
	t.seen[key] = true
	t.images[*im.ID] = &imageEntry{id: *im.ID, file: name, w: im.Width, h: im.Height}
	return nil
}

// assemble groups the annotations by image (in the file's order within an image) and orders
// the images by id.
func (s *Source) assemble(t *tables) error {
	orphans := map[int64][]int64{}
	for _, a := range t.anns {
		img := t.images[a.image]
		if img == nil {
			orphans[a.image] = append(orphans[a.image], a.ann.id)
			continue
		}
		if img.reason != "" {
			continue
		}
		if a.reason != "" {
			img.reason = a.reason
			img.anns = nil
			continue
		}
		if _, ok := t.categories[a.ann.category]; !ok && len(t.categories) > 0 {
			img.reason = fmt.Sprintf("annotation %d: category_id %d is not among the file's categories", a.ann.id, a.ann.category)
			img.anns = nil
			continue
		}
		img.anns = append(img.anns, a.ann)
	}
	t.anns = nil
	for _, img := range t.images {
		s.list = append(s.list, img)
	}
	sort.Slice(s.list, func(i, j int) bool { return s.list[i].id < s.list[j].id })
	var ids []int64
	for id := range orphans {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		s.orphans = append(s.orphans, orphan{image: id, reason: fmt.Sprintf("annotations %s name image id %d, which the file does not list", joinIDs(orphans[id]), id)})
	}
	var maxID int64 = -1
	for id := range t.categories {
		maxID = max(maxID, id)
	}
	s.classes = make([]string, maxID+1)
	for id, name := range t.categories {
		s.classes[id] = name
	}
	return nil
}

func joinIDs(ids []int64) string {
	var b strings.Builder
	for i, id := range ids {
		if i == 8 {
			fmt.Fprintf(&b, " and %d more", len(ids)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, id)
	}
	return b.String()
}

// convert checks one annotation's bbox and area and returns the record's row, or why the
// image cannot be packed (the row then holds only the annotation's id).
func convert(a rawAnnotation) (annotation, string) {
	bad := annotation{id: a.ID}
	if len(a.BBox) == 0 {
		return bad, fmt.Sprintf("annotation %d has no bbox", a.ID)
	}
	var v [4]float64
	if fs := v[:0]; json.Unmarshal(a.BBox, &fs) != nil || len(fs) != 4 || !finite32(fs) {
		// The reason, from a second reading that keeps what is not a number.
		var bb []number
		if err := json.Unmarshal(a.BBox, &bb); err != nil || len(bb) != 4 {
			return bad, fmt.Sprintf("annotation %d: bbox %s is not four numbers", a.ID, abbreviate(a.BBox))
		}
		for _, n := range bb {
			if n.text != "" {
				return bad, fmt.Sprintf("annotation %d: bbox holds %s, not a finite number", a.ID, n.text)
			}
		}
		return bad, fmt.Sprintf("annotation %d: bbox %s is not four numbers", a.ID, abbreviate(a.BBox))
	}
	if v[2] < 0 || v[3] < 0 {
		return bad, fmt.Sprintf("annotation %d: bbox %v has a negative width or height", a.ID, v)
	}
	x1, y1 := v[0]+v[2], v[1]+v[3]
	if math.Abs(x1) > math.MaxFloat32 || math.Abs(y1) > math.MaxFloat32 {
		return bad, fmt.Sprintf("annotation %d: bbox %v reaches past float32's range", a.ID, v)
	}
	if a.Area.text == "null" {
		a.Area = number{} // null is an absent area, as before: 0
	}
	if a.Area.text != "" {
		return bad, fmt.Sprintf("annotation %d: area %s is not a finite number", a.ID, a.Area.text)
	}
	return annotation{
		id:       a.ID,
		box:      [4]float32{float32(v[0]), float32(v[1]), float32(x1), float32(y1)},
		category: a.Category,
		iscrowd:  a.IsCrowd,
		area:     float32(a.Area.v),
	}, ""
}

// finite32 reports whether every value is finite and within float32's range.
func finite32(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.Abs(x) > math.MaxFloat32 {
			return false
		}
	}
	return true
}

// number is a JSON number that fits a float32. Anything else in its place (a string, null,
// the words NaN, Infinity and -Infinity that Python's json module writes for non-finite
// floats, a number past float32's range) is kept as its text, for the image's skip reason: a
// bad value in one annotation costs its image, not the whole file.
type number struct {
	v    float64
	text string // "" for a good number
}

func (n *number) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > math.MaxFloat32 {
		text := abbreviate(b)
		switch text {
		case `"NaN"`, `"Infinity"`, `"-Infinity"`:
			text = text[1 : len(text)-1] // as the file has it: pythonWords quoted it
		}
		*n = number{text: text}
		return nil
	}
	*n = number{v: v}
	return nil
}

// pythonWords passes a JSON text through, quoting every bare word that starts with N or I (or
// -I) outside strings: the NaN, Infinity and -Infinity Python's json module writes for
// non-finite floats (and that pycocotools reads back). Valid JSON has no such word, so it
// passes unchanged; with them quoted, the decoder reads the file on and the annotation that
// holds one is its image's reported skip rather than a parse error of the whole file.
type pythonWords struct {
	r      io.Reader
	inStr  bool // inside a string
	esc    bool // after a backslash inside a string
	inWord bool // inside a quoted bare word
	minus  bool // a '-' outside strings held back until the byte after it is known
	err    error
	in     []byte
	out    []byte // output not yet handed out
	outAt  int
}

func newPythonWords(r io.Reader) *pythonWords {
	return &pythonWords{r: r, in: make([]byte, 64<<10)}
}

func (q *pythonWords) Read(p []byte) (int, error) {
	for q.outAt == len(q.out) {
		if q.err != nil {
			return 0, q.err
		}
		n, err := q.r.Read(q.in)
		q.out, q.outAt = q.convert(q.out[:0], q.in[:n]), 0
		if err != nil {
			q.err = err
			if q.minus {
				q.out = append(q.out, '-')
			}
			if q.inWord {
				q.out = append(q.out, '"')
			}
			q.minus, q.inWord = false, false
		}
	}
	n := copy(p, q.out[q.outAt:])
	q.outAt += n
	return n, nil
}

// convert appends what the input bytes in become to out.
func (q *pythonWords) convert(out, in []byte) []byte {
	for i := 0; i < len(in); i++ {
		c := in[i]
		if q.inStr {
			// The common case, a run of string bytes, copied whole.
			j := i
			for j < len(in) && in[j] != '"' && in[j] != '\\' && !q.esc {
				j++
			}
			out = append(out, in[i:j]...)
			if j == len(in) {
				break
			}
			i, c = j, in[j]
			switch {
			case q.esc:
				q.esc = false
			case c == '\\':
				q.esc = true
			default:
				q.inStr = false
			}
			out = append(out, c)
			continue
		}
		if q.minus {
			q.minus = false
			if c == 'I' {
				q.inWord = true
				out = append(out, '"', '-', c)
				continue
			}
			out = append(out, '-')
		}
		if q.inWord {
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
				out = append(out, c)
				continue
			}
			q.inWord = false
			out = append(out, '"')
		}
		switch c {
		case '"':
			q.inStr = true
		case 'N', 'I':
			q.inWord = true
			out = append(out, '"')
		case '-':
			q.minus = true
			continue
		}
		out = append(out, c)
	}
	return out
}

func abbreviate(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}

// PlanDecode takes the build's transform (windows: only the rectangle the transform reads is
// decoded; the boxes stay in the full image's coordinates, which the engine maps).
func (s *Source) PlanDecode(p source.DecodePlan) { s.plan = p }

// Info describes the source.
func (s *Source) Info() source.SourceInfo {
	d := s.opts.Decode
	mp := d.MaxPixels
	if mp == 0 {
		mp = transforms.DefaultMaxPixels
	}
	return source.SourceInfo{
		Kind:    Kind,
		Classes: append([]string(nil), s.classes...),
		Spec: map[string]any{
			"kind": Kind, "annotations": filepath.Base(s.file), "order": "image id",
			"classes": "indexed by category id", "exif_orient": d.ExifOrient, "max_pixels": mp,
		},
		Count:   int64(len(s.list) + len(s.orphans)),
		HasMeta: true,
		Fields:  append([]shard.Field(nil), Fields...),
	}
}

// key is what the annotation file says of the image, encoded canonically (Item.Extra): its id,
// size, why it is refused if it is, and each annotation's id, box, category, crowd flag and
// area. Parts of one build and a resumed build compare it through the listing digest, so
// records from two versions of the annotation file are never mixed in one dataset.
func (img *imageEntry) key() []byte {
	b := make([]byte, 0, 24+len(img.reason)+len(img.anns)*40)
	b = binary.LittleEndian.AppendUint64(b, uint64(img.id))
	b = binary.LittleEndian.AppendUint64(b, uint64(img.w))
	b = binary.LittleEndian.AppendUint64(b, uint64(img.h))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(img.reason)))
	b = append(b, img.reason...)
	for _, a := range img.anns {
		b = binary.LittleEndian.AppendUint64(b, uint64(a.id))
		for _, v := range a.box {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(a.category))
		b = binary.LittleEndian.AppendUint64(b, uint64(a.iscrowd))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(a.area))
	}
	return b
}

// Enumerate emits the images in ascending id, then one item per unknown image id its
// annotations name (each a reported skip).
func (s *Source) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	var seq int64
	for _, img := range s.list {
		if err := ctx.Err(); err != nil {
			return err
		}
		it := source.Item{Seq: seq, Name: fsentry.Name(img.file), Path: filepath.Join(s.images, filepath.FromSlash(img.file)), Label: -1, Note: note{img: img}, Extra: img.key()}
		if err := emit(it); err != nil {
			return err
		}
		seq++
	}
	for _, o := range s.orphans {
		name := fmt.Sprintf("%s#image_id=%d", fsentry.Name(filepath.Base(s.file)), o.image)
		if err := emit(source.Item{Seq: seq, Name: name, Label: -1, Note: note{orphan: o.reason}, Extra: []byte(o.reason)}); err != nil {
			return err
		}
		seq++
	}
	return nil
}

// Decode decodes one image and returns it with its annotations as fields.
func (s *Source) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	n, _ := it.Note.(note)
	if n.orphan != "" {
		return &source.InputError{Input: it.Name, Err: errors.New(n.orphan)}
	}
	img := n.img
	if img == nil {
		return fmt.Errorf("coco: item %s was not listed by this source", it.Name)
	}
	if img.reason != "" {
		return &source.InputError{Input: it.Name, Err: errors.New(img.reason)}
	}
	if err := fsentry.CheckIn(source.ListerOf(s.opts.Files), it.Path); err != nil {
		return &source.InputError{Input: it.Name, Err: err}
	}
	sc, _ := s.scratch.Get().(*transforms.DecodeScratch)
	if sc == nil {
		sc = new(transforms.DecodeScratch)
	}
	defer s.scratch.Put(sc)
	var region func(w, h int) image.Rectangle
	if s.plan.Windows {
		region = s.plan.Transform.Region
	}
	d, err := memdecode.DecodeFile(ctx, s.opts.Files, it.Path, it.Stamp, s.opts.Decode, region, sc)
	if err != nil {
		return &source.InputError{Input: it.Name, Err: transforms.DecodeReason(err)}
	}
	if (img.w != 0 || img.h != 0) && (d.Full.X != img.w || d.Full.Y != img.h) {
		return &source.InputError{Input: it.Name, Err: fmt.Errorf("the image is %dx%d, the annotation file says %dx%d (image id %d): its boxes would not fit", d.Full.X, d.Full.Y, img.w, img.h, img.id)}
	}
	meta, _ := json.Marshal(struct {
		ImageID int64  `json:"image_id"`
		Path    string `json:"path"`
	}{img.id, it.Name})
	c := source.Clip{Frames: []transforms.Image{d.Image}, Label: -1, Meta: meta, Fields: rows(img.anns)}
	if d.At != (image.Point{}) || d.Full != image.Pt(d.W, d.H) {
		c.Windows = []source.Window{{X: d.At.X, Y: d.At.Y, FullW: d.Full.X, FullH: d.Full.Y}}
	}
	return emit(c)
}

// rows encodes the annotations as the four fields' values.
func rows(anns []annotation) []source.FieldValue {
	k := len(anns)
	boxes := make([]byte, 16*k)
	cats := make([]byte, 8*k)
	crowd := make([]byte, 8*k)
	area := make([]byte, 4*k)
	le := binary.LittleEndian
	for i, a := range anns {
		for j, v := range a.box {
			le.PutUint32(boxes[16*i+4*j:], math.Float32bits(v))
		}
		le.PutUint64(cats[8*i:], uint64(a.category))
		le.PutUint64(crowd[8*i:], uint64(a.iscrowd))
		le.PutUint32(area[4*i:], math.Float32bits(a.area))
	}
	return []source.FieldValue{{Bytes: boxes}, {Bytes: cats}, {Bytes: crowd}, {Bytes: area}}
}

// Entry is the source kind coco, for the command's table.
var Entry = source.Entry{
	Kind: Kind,
	Help: "a COCO annotation file (instances_*.json; give --from coco)",
	Open: func(p string, o source.Options) (source.Source, error) {
		if len(o.Fields) > 0 {
			return nil, fmt.Errorf("coco: --fields does not apply: a coco record's fields are always %s", fieldNames())
		}
		if o.ExifOrient {
			// The annotations are in the stored pixels' coordinates: a rotated image would keep
			// its size under 180 degrees and carry boxes that no longer fit it.
			return nil, errors.New("coco: --exif-orient does not apply: the annotations are in the coordinates of the image as stored")
		}
		return Open(p, Options{Images: o.Images, Decode: transforms.DecodeOptions{MaxPixels: o.MaxPixels, ExifOrient: o.ExifOrient}, Files: o.Files})
	},
	Streams: true,
	Lists:   true,
}

func fieldNames() string {
	var n []string
	for _, f := range Fields {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}
