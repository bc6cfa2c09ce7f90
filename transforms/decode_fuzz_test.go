package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder, seeded with every corpus file: it must
// never panic or hang, must classify every failure as one of the sentinel errors, and must
// return a consistent RGB image otherwise. Images over 1e6 pixels are refused by the cap. A
// region decode of the central quarter must fail when the full decode fails, and otherwise
// equal that part of the full image.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
			f.Add(b, false)
		}
	}
	sentinels := []error{ErrUnsupported, ErrTooLarge, ErrCorrupt, ErrTruncated, ErrEmpty}
	f.Fuzz(func(t *testing.T, data []byte, fast bool) {
		opts := DecodeOptions{MaxPixels: 1e6, ExifOrient: fast}
		if fast {
			opts.Draft = func(w, h int) (int, int) { return w / 3, h / 5 }
		}
		img, err := DecodeBytes(data, opts, nil)
		reg, rerr := decodeRegion(data, opts, func(w, h int) image.Rectangle {
			return image.Rect(w/4, h/4, w/4+max(1, w/2), h/4+max(1, h/2))
		}, nil)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("full decode error %v, region decode error %v", err, rerr)
		}
		if err == nil {
			if fy := windowDiff(reg, img); fy >= 0 {
				t.Fatalf("region row %d differs from the full decode", fy)
			}
		}
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			for _, s := range sentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error %v wraps no sentinel", err)
		}
		if img.C != 3 || img.W <= 0 || img.H <= 0 || len(img.Pix) != img.W*img.H*3 {
			t.Fatalf("bad image %dx%dx%d with %d bytes", img.W, img.H, img.C, len(img.Pix))
		}
	})
}

// FuzzExif feeds arbitrary EXIF (TIFF) payloads to the orientation parser, alone and inside a
// JPEG APP1 segment.
func FuzzExif(f *testing.F) {
	le := []byte("II*\x00\x08\x00\x00\x00\x01\x00\x12\x01\x03\x00\x01\x00\x00\x00\x06\x00\x00\x00\x00\x00\x00\x00")
	be := []byte("MM\x00*\x00\x00\x00\x08\x00\x01\x01\x12\x00\x03\x00\x00\x00\x01\x00\x08\x00\x00\x00\x00\x00\x00")
	f.Add(le)
	f.Add(be)
	f.Add([]byte("II*\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o := ExifOrientation(data)
		if o < 1 || o > 8 {
			t.Fatalf("orientation %d", o)
		}
		if len(data) > 60000 {
			return
		}
		var jpg bytes.Buffer
		jpg.Write([]byte{0xFF, 0xD8, 0xFF, 0xE1})
		_ = binary.Write(&jpg, binary.BigEndian, uint16(len(data)+8))
		jpg.WriteString("Exif\x00\x00")
		jpg.Write(data)
		jpg.Write([]byte{0xFF, 0xD9})
		if got := exifOrientation(fmtJPEG, jpg.Bytes()); got != o {
			t.Fatalf("in a JPEG: orientation %d, alone %d", got, o)
		}
		img := Image{W: 3, H: 2, C: 3, Pix: make([]byte, 18)}
		for i := range img.Pix {
			img.Pix[i] = byte(i)
		}
		r := applyOrientation(img, o, nil)
		if r.W*r.H != 6 || len(r.Pix) != 18 {
			t.Fatalf("orientation %d: %dx%d", o, r.W, r.H)
		}
	})
}

// TestJPEGScanLimit repeats a scan of a progressive JPEG past the scan limit: libjpeg only
// warns about the bogus progression, so without the limit this decodes, and a large image
// with many scans takes very long.
func TestJPEGScanLimit(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "corpus", "progressive.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	sos := bytes.Index(data, []byte{0xFF, 0xDA})
	if sos < 0 {
		t.Fatal("no SOS")
	}
	end := sos + 2 + int(binary.BigEndian.Uint16(data[sos+2:]))
	for end+1 < len(data) && !(data[end] == 0xFF && data[end+1] != 0 && (data[end+1] < 0xD0 || data[end+1] > 0xD7)) {
		end++
	}
	scan := data[sos:end]
	build := func(n int) []byte {
		var b bytes.Buffer
		b.Write(data[:sos])
		for i := 0; i < n; i++ {
			b.Write(scan)
		}
		b.Write(data[end:])
		return b.Bytes()
	}
	if _, err := DecodeBytes(build(5), DecodeOptions{}, nil); err != nil {
		t.Fatalf("5 repeated scans: %v", err)
	}
	if _, err := DecodeBytes(build(1200), DecodeOptions{}, nil); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "scans") {
		t.Fatalf("1200 scans: got %v, want ErrUnsupported (too many scans)", err)
	}
}
