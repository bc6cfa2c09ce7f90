package transforms

import (
	"bytes"
	"encoding/binary"
	"math"
)

// EXIF orientation, read with bounded parsing of the container and the TIFF structure
// inside it. Anything malformed reads as orientation 1 (no change), as Pillow's
// exif_transpose leaves an image alone when it cannot read the tag.

// exifMaxScan bounds how far into a file the container walk looks for EXIF data.
const exifMaxScan = 1 << 20

// exifOrientation returns the EXIF orientation (1..8) of a file of format f, or 1.
func exifOrientation(f format, data []byte) int {
	var tiffData []byte
	switch f {
	case fmtJPEG:
		tiffData = jpegExif(data)
	case fmtPNG:
		tiffData = pngExif(data)
	case fmtWebP:
		tiffData = webpExif(data)
	case fmtTIFF:
		tiffData = data
	}
	if tiffData == nil {
		return 1
	}
	return ExifOrientation(tiffData)
}

// jpegExif returns the TIFF structure of the first APP1 "Exif\0\0" segment before the scan.
func jpegExif(b []byte) []byte {
	i := 2
	for n := 0; i+4 <= len(b) && i < exifMaxScan && n < 1024; n++ {
		if b[i] != 0xFF {
			return nil
		}
		m := b[i+1]
		if m == 0xFF { // fill byte
			i++
			continue
		}
		if m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01 {
			i += 2
			continue
		}
		if m == 0xDA || m == 0xD9 {
			return nil
		}
		l := int(binary.BigEndian.Uint16(b[i+2:]))
		if l < 2 || i+2+l > len(b) {
			return nil
		}
		seg := b[i+4 : i+2+l]
		if m == 0xE1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
			return seg[6:]
		}
		i += 2 + l
	}
	return nil
}

// pngExif returns the eXIf chunk's data, which Pillow reads, if it precedes IDAT.
func pngExif(b []byte) []byte {
	i := 8
	for n := 0; i+8 <= len(b) && n < 4096; n++ {
		l := binary.BigEndian.Uint32(b[i:])
		typ := string(b[i+4 : i+8])
		if uint64(l) > uint64(len(b)-i-8) {
			return nil
		}
		data := b[i+8 : i+8+int(l)]
		switch typ {
		case "eXIf":
			return data
		case "IDAT", "IEND":
			return nil
		}
		i += 12 + int(l)
	}
	return nil
}

// webpExif returns a WebP file's EXIF chunk.
func webpExif(b []byte) []byte {
	i := 12
	for n := 0; i+8 <= len(b) && n < 4096; n++ {
		l := binary.LittleEndian.Uint32(b[i+4:])
		if uint64(l) > uint64(len(b)-i-8) {
			return nil
		}
		if string(b[i:i+4]) == "EXIF" {
			d := b[i+8 : i+8+int(l)]
			// Some writers keep the JPEG "Exif\0\0" prefix.
			return bytes.TrimPrefix(d, []byte("Exif\x00\x00"))
		}
		i += 8 + int(l) + int(l&1)
	}
	return nil
}

// ExifOrientation reads the Orientation tag (0x0112) from IFD0 of a TIFF structure (the
// payload of an EXIF block) and returns it, or 1 when it is absent, malformed or not in 1..8.
func ExifOrientation(t []byte) int {
	if len(t) < 8 {
		return 1
	}
	var bo binary.ByteOrder
	switch string(t[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo = binary.BigEndian
	default:
		return 1
	}
	off := bo.Uint32(t[4:])
	if off < 8 || uint64(off)+2 > uint64(len(t)) {
		return 1
	}
	n := int(bo.Uint16(t[off:]))
	p := int(off) + 2
	for k := 0; k < n && k < 1024; k++ {
		e := p + 12*k
		if e+12 > len(t) {
			return 1
		}
		if bo.Uint16(t[e:]) != 0x0112 {
			continue
		}
		typ, count := bo.Uint16(t[e+2:]), bo.Uint32(t[e+4:])
		// The integer types and FLOAT, whose value Pillow's ImageOps.exif_transpose takes when it
		// equals 1..8 (BYTE, ASCII and UNDEFINED values come out as bytes or text, which it
		// does not).
		size := map[uint16]uint64{3: 2, 4: 4, 6: 1, 8: 2, 9: 4, 11: 4}[typ]
		if size == 0 || count < 1 {
			return 1
		}
		// The first of count values, as Pillow takes it: in the entry when they fit in its 4
		// bytes, else at the offset the entry holds; values past the end of the data are no
		// tag (Pillow skips it).
		at := uint64(e + 8)
		if size*uint64(count) > 4 {
			at = uint64(bo.Uint32(t[e+8:]))
			if at+size*uint64(count) > uint64(len(t)) {
				return 1
			}
		}
		var v int
		switch typ {
		case 3:
			v = int(bo.Uint16(t[at:]))
		case 4:
			v = int(bo.Uint32(t[at:]))
		case 6:
			v = int(int8(t[at]))
		case 8:
			v = int(int16(bo.Uint16(t[at:])))
		case 9:
			v = int(int32(bo.Uint32(t[at:])))
		case 11:
			f := math.Float32frombits(bo.Uint32(t[at:]))
			if f != float32(int(f)) {
				return 1
			}
			v = int(f)
		}
		if v < 1 || v > 8 {
			return 1
		}
		return v
	}
	return 1
}

// applyOrientation returns img transformed as PIL.ImageOps.exif_transpose does for
// orientation o: 2 mirror, 3 rotate 180, 4 flip, 5 transpose, 6 rotate 270 (90 clockwise),
// 7 transverse, 8 rotate 90. The result does not alias img.
func applyOrientation(img Image, o int, s *DecodeScratch) Image {
	if o < 2 || o > 8 {
		return img
	}
	w, h, c := img.W, img.H, img.C
	ow, oh := w, h
	if o >= 5 {
		ow, oh = h, w
	}
	out := make([]byte, len(img.Pix))
	// For every output pixel (x, y), the source pixel (sx, sy).
	for y := 0; y < oh; y++ {
		for x := 0; x < ow; x++ {
			var sx, sy int
			switch o {
			case 2:
				sx, sy = w-1-x, y
			case 3:
				sx, sy = w-1-x, h-1-y
			case 4:
				sx, sy = x, h-1-y
			case 5:
				sx, sy = y, x
			case 6:
				sx, sy = y, h-1-x
			case 7:
				sx, sy = w-1-y, h-1-x
			case 8:
				sx, sy = w-1-y, x
			}
			copy(out[(y*ow+x)*c:(y*ow+x+1)*c], img.Pix[(sy*w+sx)*c:(sy*w+sx+1)*c])
		}
	}
	if s != nil {
		// Keep the scratch's contract: the result lives in scratch-owned memory.
		s.out = out
	}
	return Image{W: ow, H: oh, C: c, Pix: out}
}
