// Package pairs is the source kind pairs: a folder of images and a folder of segmentation
// masks matched by file stem (the VOC, ADE20K and Cityscapes layouts). Each image is one
// record with one field, mask: a single-channel uint8 image of the image's size (kind image,
// shape [-1, -1, 1] in hwc, [1, -1, -1] in chw, geometry mask), resized nearest-neighbour and
// cropped with the image. Records have no class of their own: their label is -1.
//
// Images are the files with an image extension under SRC, at any depth, in lexical order of
// their slash-separated relative paths (hidden files and folders skipped; symbolic links to
// folders not followed). The mask of SRC/dir/name.ext is, in this order of preference,
// MASKS/dir/name.png, MASKS/name.png, and for a Cityscapes image name_leftImg8bit.png,
// MASKS/dir/name_gtFine_labelIds.png. A mask is a PNG whose pixels are class indices: a
// palette PNG (its indices, not its colours: what NumPy reads from Pillow's P mode) or a
// greyscale PNG of 8 bits or fewer (a transparent grey value, tRNS, is ignored as Pillow's L
// mode does; a 1-bit mask, Pillow's mode 1, gives 0 and 1 as NumPy reads its booleans). An image without a mask, a mask of another size, a mask in another
// PNG colour type (RGB, 16-bit, grey with alpha) or one that does not decode is a reported
// skip naming the mask.
package pairs

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/source/internal/memdecode"
	"github.com/packer-dev/packer/transforms"
)

// Kind is the source kind's --from name.
const Kind = "pairs"

// MaskField is the schema of the mask field (hwc; the engine lays it out as the frame).
var MaskField = shard.Field{Name: "mask", Kind: shard.KindImage, DType: "uint8", Shape: []int{-1, -1, 1}, Encoding: shard.EncodingRaw, Geometry: shard.GeometryMask}

// Options configure a pairs source.
type Options struct {
	Masks  string                   // the masks folder
	Decode transforms.DecodeOptions // image decoding; MaxPixels also bounds masks
	// Files, when set, serves the bytes of the images and masks: both folders are then views
	// of an object store (source.Options.Files), and each image and mask is fetched into
	// memory when it is decoded.
	Files source.Files
}

// Source is a source.Source over an images folder and its masks folder.
type Source struct {
	root, masks string
	files       []string // slash-separated paths relative to root, in order
	opts        Options
	plan        source.DecodePlan
	scratch     sync.Pool
}

var _ source.PlannedSource = (*Source)(nil)

// Open lists the images under root.
func Open(root string, opts Options) (*Source, error) {
	if opts.Masks == "" {
		return nil, errors.New("pairs: give the masks folder with --masks DIR")
	}
	l := source.ListerOf(opts.Files) // a view's listing in memory, or nil: the file system
	if err := fsentry.CheckDirIn(l, root); err != nil {
		return nil, fmt.Errorf("pairs: images folder: %w", err)
	}
	if err := fsentry.CheckDirIn(l, opts.Masks); err != nil {
		return nil, fmt.Errorf("pairs: masks folder: %w", err)
	}
	s := &Source{root: root, masks: opts.Masks, opts: opts}
	err := walkDir(l, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		// The masks folder inside the images folder holds masks, not images.
		if p != root && d.IsDir() && (s.samePath(p, s.masks) || l == nil && sameDir(p, s.masks)) {
			return filepath.SkipDir
		}
		if d.IsDir() || !isImage(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		s.files = append(s.files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pairs: %w", err)
	}
	if len(s.files) == 0 {
		return nil, fmt.Errorf("pairs: %s holds no image (%s)", root, strings.Join(imagedir.Extensions, ", "))
	}
	return s, nil
}

// walkDir is filepath.WalkDir, of the listing l where it is not nil (a view in memory, in
// which every folder can be listed: no error reaches fn).
func walkDir(l source.Lister, root string, fn fs.WalkDirFunc) error {
	if l == nil {
		return filepath.WalkDir(root, fn)
	}
	st, err := l.Stat(root)
	if err != nil {
		return fn(root, nil, err)
	}
	var walk func(p string, d fs.DirEntry) error
	walk = func(p string, d fs.DirEntry) error {
		if err := fn(p, d, nil); err != nil || !d.IsDir() {
			return err
		}
		ents, err := l.ReadDir(p)
		if err != nil {
			return fn(p, d, err)
		}
		for _, e := range ents {
			if err := walk(filepath.Join(p, e.Name()), e); err == filepath.SkipDir {
				if !e.IsDir() {
					return nil // SkipDir for a file skips the rest of its folder
				}
			} else if err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root, fs.FileInfoToDirEntry(st)); err != filepath.SkipDir && err != filepath.SkipAll {
		return err
	}
	return nil
}

func isImage(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	for _, e := range imagedir.Extensions {
		if ext == e {
			return true
		}
	}
	return false
}

// PlanDecode takes the build's transform (windows apply to the image; the mask is always read
// whole, and the engine resizes and crops it).
func (s *Source) PlanDecode(p source.DecodePlan) { s.plan = p }

// Info describes the source.
func (s *Source) Info() source.SourceInfo {
	d := s.opts.Decode
	mp := d.MaxPixels
	if mp == 0 {
		mp = transforms.DefaultMaxPixels
	}
	return source.SourceInfo{
		Kind: Kind,
		Spec: map[string]any{
			"kind": Kind, "masks": "matched by stem: DIR/STEM.png, STEM.png, STEM_gtFine_labelIds.png for STEM_leftImg8bit",
			"mask_png": "palette indices or grey of at most 8 bits", "exif_orient": d.ExifOrient, "max_pixels": mp,
		},
		Count:   int64(len(s.files)),
		HasMeta: true,
		Fields:  []shard.Field{MaskField},
	}
}

// Enumerate emits the images in order; Item.Path is the image.
func (s *Source) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	for i, rel := range s.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		it := source.Item{Seq: int64(i), Name: fsentry.Name(rel), Path: filepath.Join(s.root, filepath.FromSlash(rel)), Label: -1, Side: s.sidePath(rel)}
		if err := emit(it); err != nil {
			return err
		}
	}
	return nil
}

// sidePath is the mask file of the image rel as listed (Item.Side, whose size and modification
// time join the content digest, so parts never mix masks of two versions), or, when it has none
// yet, its first candidate: a mask added later then changes the digest too.
func (s *Source) sidePath(rel string) string {
	if p, _, err := s.findMask(rel); err == nil {
		return p
	}
	return filepath.Join(s.masks, filepath.FromSlash(s.maskCandidates(rel)[0]))
}

// maskCandidates are the masks an image may have, by preference.
func (s *Source) maskCandidates(rel string) []string {
	dir, base := path.Split(rel)
	stem := strings.TrimSuffix(base, path.Ext(base))
	c := []string{path.Join(dir, stem+".png"), stem + ".png"}
	if city, ok := strings.CutSuffix(stem, "_leftImg8bit"); ok {
		c = append(c, path.Join(dir, city+"_gtFine_labelIds.png"))
	}
	return c
}

// samePath reports whether the paths a and b name one entry: the same path once cleaned (and,
// on the file system, made absolute).
func (s *Source) samePath(a, b string) bool {
	if s.opts.Files == nil {
		var errA, errB error
		a, errA = filepath.Abs(a)
		b, errB = filepath.Abs(b)
		if errA != nil || errB != nil {
			return false
		}
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// sameDir reports whether the folders a and b on the file system are one (a link to it, say).
func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// findMask returns the mask file of the image rel (relative to root), or the candidates it
// looked for. The image file itself is never its mask (masks and images in one folder).
func (s *Source) findMask(rel string) (string, string, error) {
	cands := s.maskCandidates(rel)
	img := filepath.Join(s.root, filepath.FromSlash(rel))
	self := ""
	for _, c := range cands {
		p := filepath.Join(s.masks, filepath.FromSlash(c))
		if s.samePath(p, img) {
			self = fmt.Sprintf(" (%s is the image itself)", c)
			continue
		}
		if _, err := source.Lstat(s.opts.Files, p); err == nil {
			return p, c, nil
		}
	}
	return "", "", fmt.Errorf("no mask: none of %s in the masks folder%s", strings.Join(cands, ", "), self)
}

// Decode decodes one image and its mask.
func (s *Source) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	rel := filepath.ToSlash(mustRel(s.root, it.Path))
	maskPath, maskName, err := s.findMask(rel)
	if err != nil {
		return &source.InputError{Input: it.Name, Err: err}
	}
	if err := fsentry.CheckIn(source.ListerOf(s.opts.Files), it.Path); err != nil {
		return &source.InputError{Input: it.Name, Err: err}
	}
	mask, err := s.readMask(ctx, maskPath)
	if err != nil {
		return &source.InputError{Input: it.Name, Err: fmt.Errorf("mask %s: %w", maskName, err)}
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
	if d.Full.X != mask.W || d.Full.Y != mask.H {
		return &source.InputError{Input: it.Name, Err: fmt.Errorf("mask %s is %dx%d, the image %dx%d", maskName, mask.W, mask.H, d.Full.X, d.Full.Y)}
	}
	meta, _ := json.Marshal(struct {
		Path string `json:"path"`
		Mask string `json:"mask"`
	}{it.Name, fsentry.Name(maskName)})
	c := source.Clip{Frames: []transforms.Image{d.Image}, Label: -1, Meta: meta, Fields: []source.FieldValue{{Image: &mask}}}
	if d.At != (image.Point{}) || d.Full != image.Pt(d.W, d.H) {
		c.Windows = []source.Window{{X: d.At.X, Y: d.At.Y, FullW: d.Full.X, FullH: d.Full.Y}}
	}
	return emit(c)
}

func mustRel(root, p string) string {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return rel
}

// PNG colour types (the IHDR's byte 9).
const (
	pngGrey    = 0
	pngPalette = 3
)

// readMask decodes the mask PNG at p: from its file, or where Options.Files is set from the
// object the view's file stands for.
func (s *Source) readMask(ctx context.Context, p string) (transforms.Image, error) {
	var r io.ReadCloser
	var err error
	if s.opts.Files != nil {
		r, _, err = s.opts.Files.Open(ctx, p, nil)
	} else {
		r, err = fsentry.Open(p)
	}
	if err != nil {
		return transforms.Image{}, err
	}
	defer r.Close()
	return decodeMask(r, s.opts.Decode.MaxPixels)
}

// decodeMask decodes a mask PNG to its class indices.
func decodeMask(f io.Reader, maxPixels int64) (transforms.Image, error) {
	br := bufio.NewReader(f)
	hdr, err := br.Peek(26)
	if err != nil || string(hdr[:8]) != "\x89PNG\r\n\x1a\n" || string(hdr[12:16]) != "IHDR" {
		return transforms.Image{}, errors.New("not a PNG file")
	}
	w, h := binary.BigEndian.Uint32(hdr[16:]), binary.BigEndian.Uint32(hdr[20:])
	depth, ctype := hdr[24], hdr[25]
	switch {
	case ctype == pngPalette:
	case ctype == pngGrey && depth <= 8:
	default:
		return transforms.Image{}, fmt.Errorf("PNG colour type %d at %d bits: a mask must be a palette or greyscale PNG of at most 8 bits, of class indices", ctype, depth)
	}
	if maxPixels == 0 {
		maxPixels = transforms.DefaultMaxPixels
	}
	if w == 0 || h == 0 || (maxPixels > 0 && int64(w)*int64(h) > maxPixels) {
		return transforms.Image{}, fmt.Errorf("%dx%d pixels: empty or over the %d-pixel limit", w, h, maxPixels)
	}
	img, err := png.Decode(br)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("truncated PNG")
		}
		return transforms.Image{}, err
	}
	out := transforms.Image{W: int(w), H: int(h), C: 1, Pix: make([]byte, int(w)*int(h))}
	// A 1-bit grey mask is Pillow's mode 1, which NumPy reads as booleans: 0 and 1. 2- and
	// 4-bit grey are scaled to 0..255 by both decoders alike.
	one := byte(1)
	if ctype == pngGrey && depth == 1 {
		one = 255
	}
	switch m := img.(type) {
	case *image.Paletted:
		copyPlane(out, m.Pix, m.Stride, 1, 1)
	case *image.Gray:
		copyPlane(out, m.Pix, m.Stride, 1, one)
	case *image.NRGBA:
		// Grey with a transparent value (tRNS) decodes as NRGBA; the grey is its red.
		if ctype != pngGrey {
			return transforms.Image{}, fmt.Errorf("decoded as %T, not class indices", img)
		}
		copyPlane(out, m.Pix, m.Stride, 4, one)
	default:
		return transforms.Image{}, fmt.Errorf("decoded as %T, not class indices", img)
	}
	return out, nil
}

// copyPlane copies the first byte of every step-byte pixel of src into out, divided by div.
func copyPlane(out transforms.Image, src []byte, stride, step int, div byte) {
	for y := 0; y < out.H; y++ {
		row, dst := src[y*stride:], out.Pix[y*out.W:(y+1)*out.W]
		for x := range dst {
			dst[x] = row[x*step] / div
		}
	}
}

// Entry is the source kind pairs, for the command's table.
var Entry = source.Entry{
	Kind: Kind,
	Help: "an images folder with a masks folder (give --from pairs --masks DIR)",
	Open: func(p string, o source.Options) (source.Source, error) {
		if len(o.Fields) > 0 {
			return nil, errors.New("pairs: --fields does not apply: a pairs record's one field is its mask")
		}
		if o.ExifOrient {
			// Masks are not rotated: under 180 degrees the size still matches and the classes
			// would land on the wrong pixels.
			return nil, errors.New("pairs: --exif-orient does not apply: masks are in the coordinates of the image as stored")
		}
		return Open(p, Options{Masks: o.Masks, Decode: transforms.DecodeOptions{MaxPixels: o.MaxPixels, ExifOrient: o.ExifOrient}, Files: o.Files})
	},
	Streams: true,
	Lists:   true,
}
