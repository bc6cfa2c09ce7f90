package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/gif"
	"image/png"
	"io"
	"os"
	"syscall"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"
)

// DefaultMaxPixels is the default pixel cap: the size above which Pillow refuses to open an
// image (DecompressionBombError, 2 × PIL.Image.MAX_IMAGE_PIXELS). Between 1× and 2× Pillow
// only warns and decodes, so a torchvision pipeline trains on such images; packer does too.
const DefaultMaxPixels int64 = 2 * 89478485

// Decode errors. Every error DecodeFile and DecodeBytes return for bad input wraps exactly one
// of these (test with errors.Is) inside a *DecodeError naming the file; all of them mean the
// input, not packer, is at fault, and are suitable as a skip reason.
var (
	// ErrUnsupported is returned for a format, or a variant of one, that packer does not
	// decode (an unknown file type, a 2-component JPEG, an animated WebP, ...).
	ErrUnsupported = errors.New("unsupported image")
	// ErrTooLarge is returned, before any pixel is decoded, for an image whose header
	// claims more pixels than DecodeOptions.MaxPixels.
	ErrTooLarge = errors.New("image too large")
	// ErrCorrupt is returned for data the decoder cannot make sense of: bad markers, bad
	// checksums, invalid compressed data. It means corrupt input.
	ErrCorrupt = errors.New("corrupt image")
	// ErrTruncated is returned for a file that ends before its image data does. Pillow raises
	// for such files unless ImageFile.LOAD_TRUNCATED_IMAGES is set; packer always refuses them.
	ErrTruncated = errors.New("truncated image")
	// ErrEmpty is returned for a zero-byte file.
	ErrEmpty = errors.New("empty file")
)

// DecodeError is a decode failure for one file. Err wraps one of the sentinel errors above.
type DecodeError struct {
	Path string // the file, as the caller named it (may be empty for DecodeBytes)
	Err  error
}

func (e *DecodeError) Error() string {
	if e.Path == "" {
		return "decode: " + e.Err.Error()
	}
	return e.Path + ": decode: " + e.Err.Error()
}

func (e *DecodeError) Unwrap() error { return e.Err }

// DecodeReason is what a source records as the reason for an input that DecodeFile,
// DecodeFileRegion or DecodeBytes failed on: the decoder's error without the DecodeError
// wrapper, and a file-system error as its operation and cause ("open: permission denied"),
// both without the path the caller gave, since the source names the input itself (by its
// name in the dataset, never by an absolute path). Other errors are returned as they are.
func DecodeReason(err error) error {
	var de *DecodeError
	var pe *os.PathError
	switch {
	case errors.As(err, &de):
		return de.Err
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// DecodeOptions control DecodeFile and DecodeBytes. The zero value gives the exact
// (Pillow-identical) decode with the default pixel cap.
type DecodeOptions struct {
	// MaxPixels rejects images whose header claims more than this many pixels (width ×
	// height), before decoding. 0 means DefaultMaxPixels; a negative value disables the cap.
	MaxPixels int64 `json:"max_pixels,omitempty"`
	// ExifOrient applies the EXIF orientation tag (JPEG APP1, PNG eXIf, WebP EXIF, TIFF),
	// as PIL.ImageOps.exif_transpose does. Off by default: Pillow's Image.open and
	// torchvision ignore it.
	ExifOrient bool `json:"exif_orient,omitempty"`
	// Draft, when not nil, enables fast mode: it is called with the (oriented) image size and
	// returns the smallest size the caller needs; a JPEG is then decoded at the largest DCT
	// scale 1/8, 1/4 or 1/2 that keeps both dimensions at least that size, chosen as Pillow's
	// Image.draft does. The output then differs from the exact decode (see docs/fidelity.md).
	// Other formats ignore it.
	Draft func(w, h int) (tw, th int) `json:"-"`
}

func (o DecodeOptions) maxPixels() int64 {
	if o.MaxPixels == 0 {
		return DefaultMaxPixels
	}
	return o.MaxPixels
}

// DecodeScratch holds buffers reused across decodes. The Image a decode returns aliases the
// scratch: it is valid until the next decode with the same scratch. A DecodeScratch is not
// safe for concurrent use; give each worker its own. A nil *DecodeScratch allocates.
type DecodeScratch struct {
	out  []byte
	aux  []byte
	file []byte
}

func (s *DecodeScratch) pix(n int) []byte {
	if s == nil {
		return make([]byte, n)
	}
	if cap(s.out) < n {
		s.out = make([]byte, n)
	}
	return s.out[:n]
}

func (s *DecodeScratch) tmp(n int) []byte {
	if s == nil {
		return make([]byte, n)
	}
	if cap(s.aux) < n {
		s.aux = make([]byte, n)
	}
	return s.aux[:n]
}

// maxFileSize bounds what DecodeFile reads into memory.
const maxFileSize = 1 << 30

// DecodeFile reads and decodes an image file into 8-bit RGB (C is always 3), byte-identical
// to PIL.Image.open(path).convert("RGB") unless opts.Draft is set. The format is found from
// the content, not the name. Errors for bad input are *DecodeError naming path.
func DecodeFile(path string, opts DecodeOptions, s *DecodeScratch) (Image, error) {
	data, err := readFile(path, s)
	if err != nil {
		return Image{}, err
	}
	img, err := decode(data, opts, s)
	if err != nil {
		return Image{}, &DecodeError{Path: path, Err: err}
	}
	return img, nil
}

// DecodeBytes decodes an image held in memory, as DecodeFile does.
func DecodeBytes(data []byte, opts DecodeOptions, s *DecodeScratch) (Image, error) {
	img, err := decode(data, opts, s)
	if err != nil {
		return Image{}, &DecodeError{Err: err}
	}
	return img, nil
}

func readFile(path string, s *DecodeScratch) ([]byte, error) {
	// O_NONBLOCK: a FIFO (or a device) opened for reading must not block the build; the mode
	// check below refuses it. It changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &DecodeError{Path: path, Err: fmt.Errorf("%w: not a regular file", ErrUnsupported)}
	}
	return readSized(f, st.Size(), path, s)
}

// readSized reads what r holds, size bytes by its file's Stat or listing, into the scratch's
// file buffer (one byte more, to see a file that grew; io.ReadFull stops at EOF).
func readSized(r io.Reader, size int64, path string, s *DecodeScratch) ([]byte, error) {
	if size > maxFileSize {
		return nil, &DecodeError{Path: path, Err: fmt.Errorf("%w: file is %d bytes", ErrTooLarge, size)}
	}
	var buf []byte
	if s != nil && int64(cap(s.file)) >= size+1 {
		buf = s.file[:size+1]
	} else {
		buf = make([]byte, size+1)
		if s != nil {
			s.file = buf
		}
	}
	n, err := io.ReadFull(r, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	return buf[:n], nil
}

// Format names what sniff found.
type format int

const (
	fmtUnknown format = iota
	fmtJPEG
	fmtPNG
	fmtGIF
	fmtBMP
	fmtTIFF
	fmtWebP
	fmtPNM
)

func (f format) String() string {
	return [...]string{"unknown", "jpeg", "png", "gif", "bmp", "tiff", "webp", "pnm"}[f]
}

// sniff identifies the format from the first bytes, as Pillow's plugins do.
func sniff(b []byte) format {
	switch {
	case len(b) >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF:
		return fmtJPEG
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return fmtPNG
	case bytes.HasPrefix(b, []byte("GIF87a")) || bytes.HasPrefix(b, []byte("GIF89a")):
		return fmtGIF
	case bytes.HasPrefix(b, []byte("BM")):
		return fmtBMP
	case bytes.HasPrefix(b, []byte("II*\x00")) || bytes.HasPrefix(b, []byte("MM\x00*")):
		return fmtTIFF
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return fmtWebP
	case len(b) >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6':
		return fmtPNM
	}
	return fmtUnknown
}

func checkSize(w, h int, opts DecodeOptions) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("%w: image size %dx%d", ErrCorrupt, w, h)
	}
	if max := opts.maxPixels(); max > 0 && int64(w)*int64(h) > max {
		return fmt.Errorf("%w: %dx%d is %d pixels, over the limit of %d", ErrTooLarge, w, h, int64(w)*int64(h), max)
	}
	return nil
}

func decode(data []byte, opts DecodeOptions, s *DecodeScratch) (Image, error) {
	if len(data) == 0 {
		return Image{}, ErrEmpty
	}
	f := sniff(data)
	orient := 1
	if opts.ExifOrient {
		orient = exifOrientation(f, data)
	}
	var img Image
	var err error
	switch f {
	case fmtJPEG:
		img, err = decodeJPEG(data, opts, orient, s)
	case fmtPNM:
		img, err = decodePNM(data, opts, s)
	case fmtUnknown:
		return Image{}, fmt.Errorf("%w: unknown image format", ErrUnsupported)
	default:
		img, err = decodeGo(f, data, opts, s)
	}
	if err != nil {
		return Image{}, err
	}
	if orient != 1 {
		img = applyOrientation(img, orient, s)
	}
	return img, nil
}

// draftDenom returns the DCT scale denominator Pillow's JpegImageFile.draft picks for an
// image of w×h when size tw×th is requested: the largest of 8, 4, 2, 1 not above
// min(w/tw, h/th).
func draftDenom(w, h, tw, th int) int {
	if tw <= 0 || th <= 0 {
		return 1
	}
	scale := min(w/tw, h/th)
	for _, s := range [...]int{8, 4, 2} {
		if scale >= s {
			return s
		}
	}
	return 1
}

func decodeJPEG(data []byte, opts DecodeOptions, orient int, s *DecodeScratch) (Image, error) {
	hdr, err := jpegDecodeHeader(data)
	if err != nil {
		return Image{}, err
	}
	if err := checkSize(hdr.w, hdr.h, opts); err != nil {
		return Image{}, err
	}
	denom := 1
	if opts.Draft != nil {
		w, h := hdr.w, hdr.h
		swap := orient >= 5
		if swap {
			w, h = h, w
		}
		tw, th := opts.Draft(w, h)
		if swap {
			tw, th = th, tw
		}
		denom = draftDenom(hdr.w, hdr.h, tw, th)
	}
	return jpegDecode(data, denom, s)
}

// goConfig reads the header with the standard-library style DecodeConfig of each format.
func goConfig(f format, r io.Reader) (image.Config, error) {
	switch f {
	case fmtPNG:
		return png.DecodeConfig(r)
	case fmtGIF:
		return gif.DecodeConfig(r)
	case fmtBMP:
		return bmp.DecodeConfig(r)
	case fmtTIFF:
		return tiff.DecodeConfig(r)
	case fmtWebP:
		return webp.DecodeConfig(r)
	}
	return image.Config{}, fmt.Errorf("%w: %v", ErrUnsupported, f)
}

func goDecode(f format, r io.Reader) (image.Image, error) {
	switch f {
	case fmtPNG:
		return png.Decode(r)
	case fmtGIF:
		return gif.Decode(r)
	case fmtBMP:
		return bmp.Decode(r)
	case fmtTIFF:
		return tiff.Decode(r)
	case fmtWebP:
		return webp.Decode(r)
	}
	return nil, fmt.Errorf("%w: %v", ErrUnsupported, f)
}

// goError classifies an error from a Go decoder: a short read is truncation, the decoders'
// unsupported-feature errors are ErrUnsupported, anything else is corrupt data.
func goError(f format, err error) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fmt.Errorf("%w: %v: file is truncated", ErrTruncated, f)
	case isUnsupported(err):
		return fmt.Errorf("%w: %v: %v", ErrUnsupported, f, err)
	}
	return fmt.Errorf("%w: %v: %v", ErrCorrupt, f, err)
}

func isUnsupported(err error) bool {
	switch err.(type) {
	case png.UnsupportedError, tiff.UnsupportedError:
		return true
	}
	return errors.Is(err, bmp.ErrUnsupported)
}

func decodeGo(f format, data []byte, opts DecodeOptions, s *DecodeScratch) (Image, error) {
	cfg, err := goConfig(f, bytes.NewReader(data))
	if err != nil {
		return Image{}, goError(f, err)
	}
	if err := checkSize(cfg.Width, cfg.Height, opts); err != nil {
		return Image{}, err
	}
	if f == fmtWebP {
		if err := webpCheck(data); err != nil {
			return Image{}, err
		}
	}
	m, err := goDecode(f, bytes.NewReader(data))
	if err != nil && f == fmtPNG {
		m, err = pngRetry(data, err)
	} else if err != nil {
		err = goError(f, err)
	}
	if err != nil {
		return Image{}, err
	}
	b := m.Bounds()
	if b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return Image{}, fmt.Errorf("%w: %v: decoded %dx%d, header says %dx%d", ErrUnsupported, f, b.Dx(), b.Dy(), cfg.Width, cfg.Height)
	}
	grey16 := f == fmtPNG && len(data) > 25 && data[24] == 16 && data[25] == 0
	var rawPal []byte
	switch f {
	case fmtPNG:
		rawPal = pngPalette(data)
	case fmtGIF:
		rawPal = gifPalette(data)
	}
	return toRGB(m, grey16, rawPal, s)
}

// pngPalette returns a PNG's PLTE chunk data (RGB triples), or nil.
func pngPalette(b []byte) []byte {
	i := 8
	for n := 0; i+8 <= len(b) && n < 4096; n++ {
		l := binary.BigEndian.Uint32(b[i:])
		if uint64(l) > uint64(len(b)-i-8) {
			return nil
		}
		switch string(b[i+4 : i+8]) {
		case "PLTE":
			return b[i+8 : i+8+int(l)]
		case "IDAT", "IEND":
			return nil
		}
		i += 12 + int(l)
	}
	return nil
}

// pngRetry handles the PNG files Go's decoder refuses and Pillow opens, after a first
// attempt failed with err: Pillow checks the CRCs of the chunks before the first IDAT only
// (Go checks them all), and needs no IEND chunk (Go does). It decodes a repaired copy when
// that is all that is wrong, and classifies the failure otherwise.
func pngRetry(data []byte, err error) (image.Image, error) {
	end := pngEnd(data)
	if end == pngEndsInChunk {
		return nil, fmt.Errorf("%w: png: file is truncated", ErrTruncated)
	}
	fixed, changed, ok := pngFixCRCs(data)
	if !ok {
		return nil, fmt.Errorf("%w: png: bad checksum in a chunk before the image data", ErrCorrupt)
	}
	if end == pngNoIEND {
		fixed = append(bytes.Clone(fixed), 0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82)
		changed = true
	}
	if !changed {
		return nil, goError(fmtPNG, err)
	}
	m, err := goDecode(fmtPNG, bytes.NewReader(fixed))
	if err != nil {
		if end == pngNoIEND {
			return nil, fmt.Errorf("%w: png: file is truncated (%v)", ErrTruncated, err)
		}
		return nil, goError(fmtPNG, err)
	}
	return m, nil
}

// How a PNG file ends.
const (
	pngHasIEND     = iota // an IEND chunk is present
	pngNoIEND             // the file ends after a whole chunk, without IEND
	pngEndsInChunk        // the file ends inside a chunk: truncated
)

// pngEnd walks the chunks of a PNG file and says how it ends.
func pngEnd(b []byte) int {
	i := 8
	for i < len(b) {
		if i+12 > len(b) {
			return pngEndsInChunk
		}
		l := binary.BigEndian.Uint32(b[i:])
		if uint64(l) > uint64(len(b)-i-12) {
			return pngEndsInChunk
		}
		if string(b[i+4:i+8]) == "IEND" {
			return pngHasIEND
		}
		i += 12 + int(l)
	}
	return pngNoIEND
}

// pngFixCRCs returns the PNG file with the CRCs of its IDAT and later chunks corrected (a
// copy when one was wrong, and changed), and ok false when a chunk before the first IDAT has
// a bad CRC, which Pillow refuses too.
func pngFixCRCs(b []byte) (out []byte, changed, ok bool) {
	out = b
	idat := false
	i := 8
	for i+12 <= len(b) {
		l := binary.BigEndian.Uint32(b[i:])
		if uint64(l) > uint64(len(b)-i-12) {
			break
		}
		end := i + 8 + int(l)
		typ := string(b[i+4 : i+8])
		if typ == "IDAT" {
			idat = true
		}
		want := crc32.ChecksumIEEE(b[i+4 : end])
		if binary.BigEndian.Uint32(b[end:]) != want {
			if !idat {
				return nil, false, false
			}
			if !changed {
				out, changed = bytes.Clone(b), true
			}
			binary.BigEndian.PutUint32(out[end:], want)
		}
		if typ == "IEND" {
			break
		}
		i = end + 4
	}
	return out, changed, true
}

// gifPalette returns the colour table of a GIF's first image (its local table, or the global
// one), or nil.
func gifPalette(b []byte) []byte {
	if len(b) < 13 {
		return nil
	}
	var global []byte
	i := 13
	if b[10]&0x80 != 0 {
		n := 3 << (b[10]&7 + 1)
		if i+n > len(b) {
			return nil
		}
		global = b[i : i+n]
		i += n
	}
	for blocks := 0; i < len(b) && blocks < 1<<16; blocks++ {
		switch b[i] {
		case 0x21: // extension: label, then data sub-blocks up to a zero length
			i += 2
			for i < len(b) && b[i] != 0 {
				i += int(b[i]) + 1
			}
			i++
		case 0x2C: // image descriptor: position, size, flags, then its local table if any
			if i+10 > len(b) {
				return nil
			}
			flags := b[i+9]
			if flags&0x80 == 0 {
				return global
			}
			n := 3 << (flags&7 + 1)
			if i+10+n > len(b) {
				return nil
			}
			return b[i+10 : i+10+n]
		default:
			return nil
		}
	}
	return nil
}

// DraftSize returns the DecodeOptions.Draft function for fast mode under spec, or nil when the
// spec does not ask for fast mode or does not resize. The requested size is the size the
// image will be resized to (Compiled.ResizedSize: torchvision Resize(N) rounding and max_size,
// or the exact --size) times gap (at least 1), so a JPEG is decoded at the largest DCT
// reduction that keeps at least gap × the resized size in both dimensions. Gap 1 is
// Pillow's draft(mode, size) with the target size; Pillow's thumbnail() uses a gap of 2.
func DraftSize(t Compiled, gap int) func(w, h int) (int, int) {
	if s := t.Spec(); !s.Fast || (s.Resize <= 0 && s.Width <= 0) {
		return nil
	}
	gap = max(gap, 1)
	return func(w, h int) (int, int) {
		rw, rh, err := t.ResizedSize(w, h)
		if err != nil {
			return 0, 0 // full-size decode
		}
		return rw * gap, rh * gap
	}
}

// Decoded is an image decoded in part: Image holds the pixels of the rectangle
// [At.X, At.X+Image.W) × [At.Y, At.Y+Image.H) of a full image of Full.X × Full.Y pixels.
type Decoded struct {
	Image
	Full image.Point // size of the whole (oriented, draft-scaled) image
	At   image.Point // where Image sits in it
}

// DecodeFileRegion is DecodeFile for callers that need only part of the image, such as a
// resize followed by a centre crop. region is called with the size of the whole image (after
// any draft scale and orientation) and returns the rectangle the caller will read. For a
// JPEG without EXIF rotation, only those rows are decoded (the rows above and below are
// skipped, though still read, so that damage anywhere fails as in the full decode) and the
// columns are cropped to whole iMCUs around the rectangle, so the result may be wider than
// asked; the pixels are exactly those of the full decode, and the file is accepted or
// rejected exactly as by DecodeFile. Other formats are decoded whole (At is 0, 0). A nil
// region decodes everything.
func DecodeFileRegion(path string, opts DecodeOptions, region func(w, h int) image.Rectangle, s *DecodeScratch) (Decoded, error) {
	data, err := readFile(path, s)
	if err != nil {
		return Decoded{}, err
	}
	d, err := decodeRegion(data, opts, region, s)
	if err != nil {
		return Decoded{}, &DecodeError{Path: path, Err: err}
	}
	return d, nil
}

// DecodeReaderRegion is DecodeFileRegion for an image read from r, which holds size bytes (an
// object of a store, streamed): the same pixels and the same errors, without a local file.
// name is how errors name the image.
func DecodeReaderRegion(r io.Reader, size int64, name string, opts DecodeOptions, region func(w, h int) image.Rectangle, s *DecodeScratch) (Decoded, error) {
	data, err := readSized(r, size, name, s)
	if err != nil {
		return Decoded{}, err
	}
	d, err := decodeRegion(data, opts, region, s)
	if err != nil {
		return Decoded{}, &DecodeError{Path: name, Err: err}
	}
	return d, nil
}

// regionSafe reports whether libjpeg-turbo's cropped and skipped decoding gives the full
// decode's pixels and outcome for a JPEG with this header at scale 1/denom: at full scale with
// sampling factors of 1 or 2 (4:4:4, 4:2:2, 4:4:0, 4:2:0, grey), which is every JPEG a camera or
// a common encoder writes. Elsewhere libjpeg-turbo 2.1 (Debian bookworm) was found to differ:
// at scales 1/2 and 1/4 with 2×4 or 4×2 luma sampling, jpeg_crop_scanline gave other pixels and
// jpeg_skip_scanlines never returned on progressive files (TestDecodeRegionSampling). Those
// images are decoded whole, which is always exact.
func regionSafe(hdr jpegHeader, denom int) bool {
	return denom == 1 && hdr.maxH <= 2 && hdr.maxV <= 2
}

func decodeRegion(data []byte, opts DecodeOptions, region func(w, h int) image.Rectangle, s *DecodeScratch) (Decoded, error) {
	whole := func() (Decoded, error) {
		img, err := decode(data, opts, s)
		if err != nil {
			return Decoded{}, err
		}
		return Decoded{Image: img, Full: image.Pt(img.W, img.H)}, nil
	}
	if region == nil || len(data) == 0 || sniff(data) != fmtJPEG {
		return whole()
	}
	if opts.ExifOrient && exifOrientation(fmtJPEG, data) != 1 {
		return whole()
	}
	hdr, err := jpegDecodeHeader(data)
	if err != nil {
		return Decoded{}, err
	}
	if err := checkSize(hdr.w, hdr.h, opts); err != nil {
		return Decoded{}, err
	}
	denom := 1
	if opts.Draft != nil {
		tw, th := opts.Draft(hdr.w, hdr.h)
		denom = draftDenom(hdr.w, hdr.h, tw, th)
	}
	if !regionSafe(hdr, denom) {
		return whole()
	}
	// The output size at 1/denom, as libjpeg computes it (jdiv_round_up).
	fw, fh := (hdr.w+denom-1)/denom, (hdr.h+denom-1)/denom
	r := region(fw, fh).Intersect(image.Rect(0, 0, fw, fh))
	if r.Empty() {
		return whole()
	}
	img, x0, err := jpegDecodeRegion(data, denom, r, s)
	if err != nil {
		return Decoded{}, err
	}
	return Decoded{Image: img, Full: image.Pt(fw, fh), At: image.Pt(x0, r.Min.Y)}, nil
}
