package transforms

import (
	"fmt"
	"math"
)

// Geometry of a sample's fields (shard.GeometryBoxes, shard.GeometryMask): boxes and masks
// follow the pixels of the frame they belong to. docs/fidelity.md ("Boxes and masks") gives
// the arithmetic.

// MapBoxes maps boxes, float32 rows (x0, y0, x1, y1) in the pixel coordinates of a w×h source
// frame, through c's resize and crop, exactly as the frame's pixels move: scaled by the resize's
// output/input ratio on each axis, shifted by the crop's offset, clipped to the output frame.
// A box left with no area is dropped; kept lists the input row of each output row, so the
// caller drops the same rows of the fields that follow the boxes. len(boxes) must be a
// multiple of 4, and every coordinate finite.
//
// The arithmetic is done in float64 and rounded to float32 once, at the end:
// x' = clip(x·rw/w − ox, 0, ow), y' = clip(y·rh/h − oy, 0, oh), where rw×rh is the resized
// size, (ox, oy) the crop's offset in the resized image (negative when the crop pads) and
// ow×oh the output size. A row is dropped when x1' ≤ x0' or y1' ≤ y0' (which also drops
// boxes given with x1 < x0 or y1 < y0).
func (c Compiled) MapBoxes(boxes []float32, w, h int) (out []float32, kept []int, err error) {
	if len(boxes)%4 != 0 {
		return nil, nil, fmt.Errorf("transforms: %d box coordinates, not a multiple of 4", len(boxes))
	}
	g, err := c.geometry(w, h)
	if err != nil {
		return nil, nil, err
	}
	sx := float64(g.rw) / float64(w)
	sy := float64(g.rh) / float64(h)
	n := len(boxes) / 4
	out = make([]float32, 0, len(boxes))
	kept = make([]int, 0, n)
	for i := 0; i < n; i++ {
		b := boxes[4*i : 4*i+4]
		for _, v := range b {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, nil, fmt.Errorf("transforms: box %d (%v) has a coordinate that is not a finite number", i, b)
			}
		}
		x0 := clampF(float64(b[0])*sx-float64(g.ox), float64(g.ow))
		y0 := clampF(float64(b[1])*sy-float64(g.oy), float64(g.oh))
		x1 := clampF(float64(b[2])*sx-float64(g.ox), float64(g.ow))
		y1 := clampF(float64(b[3])*sy-float64(g.oy), float64(g.oh))
		fx0, fy0, fx1, fy1 := float32(x0), float32(y0), float32(x1), float32(y1)
		if !(fx1 > fx0) || !(fy1 > fy0) {
			continue
		}
		out = append(out, fx0, fy0, fx1, fy1)
		kept = append(kept, i)
	}
	return out, kept, nil
}

func clampF(v, hi float64) float64 {
	if v < 0 {
		return 0
	}
	if v > hi {
		return hi
	}
	return v
}

// MapMask resizes a mask (uint8, any channel count, the source frame's full size) with
// nearest-neighbour sampling and crops it exactly as c resizes and crops the frame, and returns
// its bytes in c's layout (hwc or chw) with the output width and height. The bytes equal
// Pillow's Image.resize((ow, oh), NEAREST) followed by the same crop (zero where the crop
// pads). Masks never take c's normalisation or element type: they stay uint8.
func (c Compiled) MapMask(m Image) (pix []byte, w, h int, err error) {
	if m.C < 1 || len(m.Pix) != m.W*m.H*m.C {
		return nil, 0, 0, fmt.Errorf("transforms: mask of %dx%dx%d has %d bytes", m.W, m.H, m.C, len(m.Pix))
	}
	g, err := c.geometry(m.W, m.H)
	if err != nil {
		return nil, 0, 0, err
	}
	xs := nearestTaps(m.W, g.rw, g.ox, g.ow)
	ys := nearestTaps(m.H, g.rh, g.oy, g.oh)
	ch := m.C
	pix = make([]byte, g.ow*g.oh*ch)
	planar := c.s.Layout == CHW
	plane := g.ow * g.oh
	for y, sy := range ys {
		if sy < 0 {
			continue // padding: zero
		}
		row := m.Pix[sy*m.W*ch : (sy+1)*m.W*ch]
		for x, sx := range xs {
			if sx < 0 {
				continue
			}
			src := row[sx*ch : sx*ch+ch]
			if planar {
				for k, v := range src {
					pix[k*plane+y*g.ow+x] = v
				}
			} else {
				copy(pix[(y*g.ow+x)*ch:], src)
			}
		}
	}
	return pix, g.ow, g.oh, nil
}

// nearestTaps returns, for each of the out output positions, the source index that Pillow's
// nearest-neighbour resize of n samples to r reads at resized position off+i, or -1 where that
// position is outside the resized image (crop padding) or Pillow samples outside the source.
//
// Pillow (Image.resize with NEAREST, which runs an affine scaling) walks the output pixels
// with a running float64 coordinate: it starts at scale/2 with scale = n/r and adds scale per
// pixel, and truncates it to an integer. The running sum, not (i+0.5)·scale, is what it
// samples: the two differ by a rounding step for some sizes, so the walk is replicated here.
func nearestTaps(n, r, off, out int) []int {
	scale := float64(n) / float64(r)
	taps := make([]int, r)
	xo := scale * 0.5
	for i := range taps {
		t := -1
		if xo >= 0 {
			t = int(xo)
		}
		if t >= n {
			t = -1
		}
		taps[i] = t
		xo += scale
	}
	res := make([]int, out)
	for i := range res {
		j := off + i
		if j < 0 || j >= r {
			res[i] = -1
			continue
		}
		res[i] = taps[j]
	}
	return res
}
