package transforms

import "fmt"

// decodePNM decodes binary PGM (P5) and PPM (P6) files with a maxval of 255, the variants
// ImageFolder datasets use; Pillow opens these as L and RGB. Other PNM variants (plain text
// P1-P3, bitmaps P4, 16-bit or rescaled samples) are refused as unsupported.
func decodePNM(data []byte, opts DecodeOptions, s *DecodeScratch) (Image, error) {
	kind := data[1]
	if kind != '5' && kind != '6' {
		return Image{}, fmt.Errorf("%w: pnm: P%c files", ErrUnsupported, kind)
	}
	i := 2
	var vals [3]int
	for k := 0; k < 3; k++ {
		// Skip whitespace and comments.
		for i < len(data) {
			c := data[i]
			if c == '#' {
				for i < len(data) && data[i] != '\n' && data[i] != '\r' {
					i++
				}
				continue
			}
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' {
				i++
				continue
			}
			break
		}
		start, v := i, 0
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			v = v*10 + int(data[i]-'0')
			if v > 1<<24 {
				return Image{}, fmt.Errorf("%w: pnm: header value too large", ErrCorrupt)
			}
			i++
		}
		if i == start {
			if i >= len(data) {
				return Image{}, fmt.Errorf("%w: pnm: header", ErrTruncated)
			}
			return Image{}, fmt.Errorf("%w: pnm: bad header", ErrCorrupt)
		}
		vals[k] = v
	}
	if i >= len(data) {
		return Image{}, fmt.Errorf("%w: pnm: header", ErrTruncated)
	}
	i++ // the single whitespace byte after maxval
	w, h, maxval := vals[0], vals[1], vals[2]
	if err := checkSize(w, h, opts); err != nil {
		return Image{}, err
	}
	if maxval != 255 {
		return Image{}, fmt.Errorf("%w: pnm: maxval %d (only 255)", ErrUnsupported, maxval)
	}
	c := 1
	if kind == '6' {
		c = 3
	}
	n := w * h * c
	if len(data)-i < n {
		return Image{}, fmt.Errorf("%w: pnm: file is truncated", ErrTruncated)
	}
	px := data[i : i+n]
	out := s.pix(w * h * 3)
	if c == 3 {
		copy(out, px)
	} else {
		for j, v := range px {
			d := out[j*3 : j*3+3 : j*3+3]
			d[0], d[1], d[2] = v, v, v
		}
	}
	return Image{W: w, H: h, C: 3, Pix: out}, nil
}
