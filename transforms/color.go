package transforms

import (
	"fmt"
	"image"
	"image/color"
)

// Colour conversion to 8-bit RGB with the semantics of Pillow's Image.convert("RGB") for the
// mode Pillow would have opened the file in. The rules, each checked against Pillow 9.4 by the
// corpus test (see docs/fidelity.md):
//
//   - L, LA, "1": grey replicated; alpha dropped.
//   - P: palette lookup; transparency (tRNS) ignored; indices past the palette read Pillow's
//     palette padding (see paletteLookup).
//   - RGBA: alpha dropped, no compositing.
//   - 16-bit grey (Pillow mode I): clipped to 255, not scaled: min(v, 255).
//   - 16-bit RGB/RGBA/LA: the high byte (Pillow unpacks "RGB;16B" etc. by taking the MSB).
//   - CMYK (JPEG): inverted (Pillow assumes Adobe polarity), then
//     out = clip(nk - nk*c/255) with Pillow's rounding, nk = 255 - k.
//   - premultiplied RGBA (TIFF associated alpha, Pillow rawmode "RGBa"): un-premultiplied
//     with Pillow's integer formula, then alpha dropped.

// toRGB converts a decoded Go image to 8-bit RGB. It never calls At in a loop for the
// image types Go's decoders produce; an unknown type is an error.
//
// grey16 says the file was 16-bit grey (Pillow mode I), which Go's PNG decoder returns as
// NRGBA64 when the file has a tRNS chunk; such pixels are clipped, not shifted.
//
// rawPal, when not nil, is the palette as the file stores it (RGB triples: PNG's PLTE, the
// GIF colour table of the first frame); it replaces the decoder's palette, which Go's
// decoders alter (see paletteLookup).
func toRGB(m image.Image, grey16 bool, rawPal []byte, s *DecodeScratch) (Image, error) {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	if n, ok := m.(*image.NRGBA64); ok && grey16 {
		out := s.pix(w * h * 3)
		for y := 0; y < h; y++ {
			src := n.Pix[y*n.Stride : y*n.Stride+8*w]
			dst := out[y*w*3 : (y+1)*w*3]
			for x := 0; x < w; x++ {
				v := byte(255)
				if src[8*x] == 0 {
					v = src[8*x+1]
				}
				d := dst[x*3 : x*3+3 : x*3+3]
				d[0], d[1], d[2] = v, v, v
			}
		}
		return Image{W: w, H: h, C: 3, Pix: out}, nil
	}
	switch m := m.(type) {
	case *image.Gray:
		out := s.pix(w * h * 3)
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+w]
			dst := out[y*w*3 : (y+1)*w*3]
			for x, v := range src {
				d := dst[x*3 : x*3+3 : x*3+3]
				d[0], d[1], d[2] = v, v, v
			}
		}
		return Image{W: w, H: h, C: 3, Pix: out}, nil
	case *image.Gray16:
		out := s.pix(w * h * 3)
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+2*w]
			dst := out[y*w*3 : (y+1)*w*3]
			for x := 0; x < w; x++ {
				v := byte(255)
				if src[2*x] == 0 {
					v = src[2*x+1]
				}
				d := dst[x*3 : x*3+3 : x*3+3]
				d[0], d[1], d[2] = v, v, v
			}
		}
		return Image{W: w, H: h, C: 3, Pix: out}, nil
	case *image.NRGBA:
		out := s.pix(w * h * 3)
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+4*w]
			dst := out[y*w*3 : (y+1)*w*3]
			for x := 0; x < w; x++ {
				p := src[x*4 : x*4+3 : x*4+3]
				d := dst[x*3 : x*3+3 : x*3+3]
				d[0], d[1], d[2] = p[0], p[1], p[2]
			}
		}
		return Image{W: w, H: h, C: 3, Pix: out}, nil
	case *image.RGBA:
		out := s.pix(w * h * 3)
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+4*w]
			dst := out[y*w*3 : (y+1)*w*3]
			for x := 0; x < w; x++ {
				p := src[x*4 : x*4+4 : x*4+4]
				d := dst[x*3 : x*3+3 : x*3+3]
				switch a := int(p[3]); a {
				case 255:
					d[0], d[1], d[2] = p[0], p[1], p[2]
				case 0:
					d[0], d[1], d[2] = 0, 0, 0
				default:
					d[0], d[1], d[2] = colorClip8(int(p[0])*255/a), colorClip8(int(p[1])*255/a), colorClip8(int(p[2])*255/a)
				}
			}
		}
		return Image{W: w, H: h, C: 3, Pix: out}, nil
	case *image.NRGBA64:
		return highBytes(m.Pix, m.Stride, w, h, s), nil
	case *image.RGBA64:
		// Go's PNG decoder gives RGBA64 only for opaque 16-bit RGB, so alpha is 65535 and
		// the premultiplied values are the file's values.
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+8*w]
			for x := 0; x < w; x++ {
				if row[8*x+6] != 0xFF || row[8*x+7] != 0xFF {
					return Image{}, fmt.Errorf("%w: premultiplied 16-bit alpha", ErrUnsupported)
				}
			}
		}
		return highBytes(m.Pix, m.Stride, w, h, s), nil
	case *image.Paletted:
		return paletteLookup(m, rawPal, s), nil
	case *image.YCbCr:
		if m.SubsampleRatio == image.YCbCrSubsampleRatio420 {
			return webpYCbCrToRGB(m, s), nil
		}
	case *image.NYCbCrA:
		if m.SubsampleRatio == image.YCbCrSubsampleRatio420 {
			return webpYCbCrToRGB(&m.YCbCr, s), nil
		}
	}
	return Image{}, fmt.Errorf("%w: decoded pixel type %T", ErrUnsupported, m)
}

// highBytes converts 16-bit-per-sample 4-channel pixels to RGB by taking each sample's high
// byte, as Pillow's "RGB;16B"/"RGBA;16B"/"LA;16B" unpackers do.
func highBytes(pix []byte, stride, w, h int, s *DecodeScratch) Image {
	out := s.pix(w * h * 3)
	for y := 0; y < h; y++ {
		src := pix[y*stride : y*stride+8*w]
		dst := out[y*w*3 : (y+1)*w*3]
		for x := 0; x < w; x++ {
			p := src[x*8 : x*8+8 : x*8+8]
			d := dst[x*3 : x*3+3 : x*3+3]
			d[0], d[1], d[2] = p[0], p[2], p[4]
		}
	}
	return Image{W: w, H: h, C: 3, Pix: out}
}

// paletteLookup converts a paletted image. Pillow keeps the file's palette colours and a
// 256-entry table whose entries past the file's palette are a grey ramp (entry i is
// (i, i, i)), so an out-of-range index i becomes grey i. Go's decoders differ: the PNG decoder
// gives opaque black for out-of-range indices and the GIF decoder replaces the transparent
// index's colour by transparent black. So with rawPal (the file's own table) the lookup table
// is built from the file, not from m.Palette.
func paletteLookup(m *image.Paletted, rawPal []byte, s *DecodeScratch) Image {
	var lut [256][3]byte
	for i := range lut {
		lut[i] = [3]byte{byte(i), byte(i), byte(i)}
	}
	if rawPal != nil {
		for i := 0; i < 256 && 3*i+2 < len(rawPal); i++ {
			lut[i] = [3]byte{rawPal[3*i], rawPal[3*i+1], rawPal[3*i+2]}
		}
	} else {
		for i, c := range m.Palette {
			if i >= 256 {
				break
			}
			lut[i] = colorRGB(c)
		}
	}
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	out := s.pix(w * h * 3)
	for y := 0; y < h; y++ {
		src := m.Pix[y*m.Stride : y*m.Stride+w]
		dst := out[y*w*3 : (y+1)*w*3]
		for x, v := range src {
			e := &lut[v]
			d := dst[x*3 : x*3+3 : x*3+3]
			d[0], d[1], d[2] = e[0], e[1], e[2]
		}
	}
	return Image{W: w, H: h, C: 3, Pix: out}
}

// colorRGB returns a palette entry's stored (non-premultiplied) RGB.
func colorRGB(c color.Color) [3]byte {
	switch c := c.(type) {
	case color.RGBA:
		if c.A == 255 {
			return [3]byte{c.R, c.G, c.B}
		}
	case color.NRGBA:
		return [3]byte{c.R, c.G, c.B}
	}
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return [3]byte{n.R, n.G, n.B}
}

func colorClip8(v int) byte {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}

// cmykInvertedToRGB converts libjpeg's CMYK output (4 bytes a pixel) to RGB as Pillow does:
// unpack with rawmode "CMYK;I" (every channel inverted), then cmyk2rgb:
// nk = 255 - k; out = clip(nk - nk*c/255), with MULDIV255's rounding.
func cmykInvertedToRGB(dst, src []byte) {
	n := len(src) / 4
	if len(dst) < n*3 {
		return
	}
	for i := 0; i < n; i++ {
		p := src[i*4 : i*4+4 : i*4+4]
		d := dst[i*3 : i*3+3 : i*3+3]
		nk := int(p[3]) // 255 - (255 - k)
		d[0] = cmykChannel(255-int(p[0]), nk)
		d[1] = cmykChannel(255-int(p[1]), nk)
		d[2] = cmykChannel(255-int(p[2]), nk)
	}
}

func cmykChannel(c, nk int) byte {
	t := c*nk + 128
	return colorClip8(nk - ((t>>8)+t)>>8)
}
