package transforms

import (
	"encoding/binary"
	"fmt"
	"image"
)

// libwebp's YUV→RGB conversion (src/dsp/yuv.h) and its "fancy" chroma upsampler
// (src/dsp/upsampling.c, the default for WebPDecodeRGB and the animation decoder Pillow
// uses), rewritten so lossy WebP decodes to the same RGB as Pillow's. golang.org/x/image/webp
// returns the decoded Y, Cb and Cr planes; its own At method would use nearest chroma and a
// different formula.

const (
	webpYUVFix2  = 6
	webpYUVMask2 = (256 << webpYUVFix2) - 1
)

func webpMultHi(v, coeff int) int { return (v * coeff) >> 8 }

func webpClip8(v int) byte {
	if v&^webpYUVMask2 == 0 {
		return byte(v >> webpYUVFix2)
	}
	if v < 0 {
		return 0
	}
	return 255
}

func webpYUVToRGB(y, u, v int, d []byte) {
	d = d[:3:3]
	yy := webpMultHi(y, 19077)
	d[0] = webpClip8(yy + webpMultHi(v, 26149) - 14234)
	d[1] = webpClip8(yy - webpMultHi(u, 6419) - webpMultHi(v, 13320) + 8708)
	d[2] = webpClip8(yy + webpMultHi(u, 33050) - 17685)
}

// webpUpsampleRow writes one output row: luma row ys, chroma interpolated between the
// nearer chroma row (nu, nv) with weight 3/4 and the farther (fu, fv) with 1/4, then
// horizontally as libwebp's UPSAMPLE_FUNC does (its packed u|v<<16 arithmetic never carries
// between the halves, so computing u and v apart gives the same values).
func webpUpsampleRow(ys, nu, nv, fu, fv []byte, dst []byte) {
	n := len(ys)
	if n == 0 {
		return
	}
	last := (n - 1) >> 1
	// near/far per chroma column
	tlU, tlV := int(nu[0]), int(nv[0])
	lU, lV := int(fu[0]), int(fv[0])
	webpYUVToRGB(int(ys[0]), (3*tlU+lU+2)>>2, (3*tlV+lV+2)>>2, dst[0:])
	for x := 1; x <= last; x++ {
		tU, tV := int(nu[x]), int(nv[x])
		cU, cV := int(fu[x]), int(fv[x])
		avgU := tlU + tU + lU + cU + 8
		avgV := tlV + tV + lV + cV + 8
		d12U := (avgU + 2*(tU+lU)) >> 3
		d12V := (avgV + 2*(tV+lV)) >> 3
		d03U := (avgU + 2*(tlU+cU)) >> 3
		d03V := (avgV + 2*(tlV+cV)) >> 3
		webpYUVToRGB(int(ys[2*x-1]), (d12U+tlU)>>1, (d12V+tlV)>>1, dst[(2*x-1)*3:])
		webpYUVToRGB(int(ys[2*x]), (d03U+tU)>>1, (d03V+tV)>>1, dst[(2*x)*3:])
		tlU, tlV, lU, lV = tU, tV, cU, cV
	}
	if n&1 == 0 {
		webpYUVToRGB(int(ys[n-1]), (3*tlU+lU+2)>>2, (3*tlV+lV+2)>>2, dst[(n-1)*3:])
	}
}

// webpYCbCrToRGB converts a 4:2:0 image as libwebp's EmitFancyRGB does: row 0 and, for an
// even height, the last row use one chroma row; every other row r uses chroma rows
// (r-1)/2 and (r+1)/2, weighted 3:1 towards the nearer one.
func webpYCbCrToRGB(m *image.YCbCr, s *DecodeScratch) Image {
	b := m.Rect
	w, h := b.Dx(), b.Dy()
	out := s.pix(w * h * 3)
	cw := (w + 1) / 2
	yrow := func(r int) []byte { return m.Y[r*m.YStride : r*m.YStride+w] }
	crow := func(r int) ([]byte, []byte) {
		return m.Cb[r*m.CStride : r*m.CStride+cw], m.Cr[r*m.CStride : r*m.CStride+cw]
	}
	for r := 0; r < h; r++ {
		var nu, nv, fu, fv []byte
		switch {
		case r == 0:
			nu, nv = crow(0)
			fu, fv = nu, nv
		case r&1 == 1 && r+1 < h: // top row of a pair: nearer chroma row (r-1)/2
			nu, nv = crow((r - 1) / 2)
			fu, fv = crow((r + 1) / 2)
		case r&1 == 1: // last row of an even-height image
			nu, nv = crow((r - 1) / 2)
			fu, fv = nu, nv
		default: // bottom row of a pair: nearer chroma row r/2
			nu, nv = crow(r / 2)
			fu, fv = crow(r/2 - 1)
		}
		webpUpsampleRow(yrow(r), nu, nv, fu, fv, out[r*w*3:(r+1)*w*3])
	}
	return Image{W: w, H: h, C: 3, Pix: out}
}

// webpCheck refuses animated WebP files, which golang.org/x/image/webp cannot decode (Pillow
// would give the first frame), and a RIFF container that libwebp's demuxer (through which
// Pillow opens WebP files) refuses while golang.org/x/image/webp reads the image chunk alone:
// a RIFF size past the end of the file (a file cut off after its image data, in its metadata),
// a chunk running past the RIFF data's end, bytes in the RIFF data that are no whole chunk.
// Bytes after the RIFF data are ignored, as libwebp ignores them.
func webpCheck(data []byte) error {
	if len(data) >= 21 && string(data[12:16]) == "VP8X" && binary.LittleEndian.Uint32(data[16:20]) >= 10 && data[20]&0x02 != 0 {
		return fmt.Errorf("%w: animated webp", ErrUnsupported)
	}
	if len(data) < 12 {
		return fmt.Errorf("%w: webp: file is truncated", ErrTruncated)
	}
	end := uint64(binary.LittleEndian.Uint32(data[4:8])) + 8
	if end > uint64(len(data)) {
		return fmt.Errorf("%w: webp: file is truncated (its RIFF header says %d bytes, the file holds %d)", ErrTruncated, end, len(data))
	}
	for at := uint64(12); at < end; {
		if end-at < 8 {
			return fmt.Errorf("%w: webp: %d bytes at offset %d are no chunk", ErrCorrupt, end-at, at)
		}
		size := uint64(binary.LittleEndian.Uint32(data[at+4 : at+8]))
		next := at + 8 + size + size&1
		if next > end {
			return fmt.Errorf("%w: webp: chunk %q at offset %d runs past the end of the RIFF data (%d bytes)", ErrCorrupt, data[at:at+4], at, end)
		}
		at = next
	}
	return nil
}
