package main

// What preview draws of a record's fields (shard.Field) on its tile: masks overlaid in a
// semi-transparent colour per class value, boxes as outlines, and the first text field's start
// as a caption under the tile. Everything is scaled as the tile is (drawScaled's placement),
// and deterministic.

import (
	"encoding/binary"
	"image"
	"image/color"
	"math"
	"strings"
	"unicode"

	"github.com/packer-dev/packer/shard"
)

// captionRunes is how much of a record's first text field preview writes under its tile.
const captionRunes = 40

// boxColour outlines boxes; maskColours tints mask values 1, 2, ... (value 0, the background,
// is left as it is), cycling.
var (
	boxColour   = color.RGBA{255, 255, 0, 255}
	maskColours = []color.RGBA{
		{230, 25, 75, 255}, {60, 180, 75, 255}, {0, 130, 200, 255}, {245, 130, 48, 255},
		{145, 30, 180, 255}, {70, 240, 240, 255}, {240, 50, 230, 255}, {210, 245, 60, 255},
	}
)

// placement is where drawScaled put a w×h source image on the sheet: at (x, y), scaled by
// scale, w×h pixels of the sheet in all.
type placement struct {
	x, y, w, h int
	scale      float64
	sw, sh     int // the source image's size
}

// src returns the source pixel drawn at sheet pixel (x+dx, y+dy).
func (p placement) src(dx, dy int) (int, int) {
	return min(int(float64(dx)/p.scale), p.sw-1), min(int(float64(dy)/p.scale), p.sh-1)
}

// drawFields draws record fields vals (schema m.Fields) over the tile at p: masks first, then
// boxes. shape is the record's own sample shape.
func drawFields(dst *image.RGBA, p placement, m *shard.Manifest, shape []int, vals [][]byte) {
	hw := strings.IndexByte(m.Sample.Layout, 'h') >= 0 && len(shape) == len(m.Sample.Layout)
	if !hw {
		return
	}
	h, w := shape[strings.IndexByte(m.Sample.Layout, 'h')], shape[strings.IndexByte(m.Sample.Layout, 'w')]
	for k, f := range m.Fields {
		if k < len(vals) && f.Kind == shard.KindImage && f.Geometry == shard.GeometryMask {
			overlayMask(dst, p, vals[k], w, h, m.Sample.Layout == "chw")
		}
	}
	for k, f := range m.Fields {
		if k < len(vals) && f.Geometry == shard.GeometryBoxes && f.DType == "float32" {
			drawBoxes(dst, p, vals[k])
		}
	}
}

// overlayMask blends the colour of each non-zero mask value (channel 0) half over the tile.
func overlayMask(dst *image.RGBA, p placement, mask []byte, w, h int, chw bool) {
	if w <= 0 || h <= 0 || len(mask) == 0 || len(mask)%(w*h) != 0 {
		return
	}
	c := len(mask) / (w * h)
	for dy := range p.h {
		for dx := range p.w {
			sx, sy := p.src(dx, dy)
			i := (sy*w + sx) * c // hwc: channel 0 of the pixel; chw: plane 0 comes first
			if chw {
				i = sy*w + sx
			}
			v := mask[i]
			if v == 0 {
				continue
			}
			mc := maskColours[(int(v)-1)%len(maskColours)]
			o := dst.RGBAAt(p.x+dx, p.y+dy)
			dst.SetRGBA(p.x+dx, p.y+dy, color.RGBA{half(o.R, mc.R), half(o.G, mc.G), half(o.B, mc.B), 255})
		}
	}
}

// drawBoxes outlines each box (float32 x0, y0, x1, y1 in the record's pixels) on the tile, one
// sheet pixel wide, clipped to the tile.
func drawBoxes(dst *image.RGBA, p placement, b []byte) {
	for r := 0; r+16 <= len(b); r += 16 {
		var v [4]float64
		for j := range v {
			v[j] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[r+4*j:])))
		}
		if !(v[2] > v[0] && v[3] > v[1]) {
			continue // NaN or no area
		}
		// The outline runs along the box's first and last sheet pixels: those showing source
		// pixels [x0, x1) scaled.
		x0, y0 := p.clampX(int(math.Floor(v[0]*p.scale))), p.clampY(int(math.Floor(v[1]*p.scale)))
		x1, y1 := p.clampX(int(math.Ceil(v[2]*p.scale))-1), p.clampY(int(math.Ceil(v[3]*p.scale))-1)
		for x := x0; x <= x1; x++ {
			dst.SetRGBA(p.x+x, p.y+y0, boxColour)
			dst.SetRGBA(p.x+x, p.y+y1, boxColour)
		}
		for y := y0; y <= y1; y++ {
			dst.SetRGBA(p.x+x0, p.y+y, boxColour)
			dst.SetRGBA(p.x+x1, p.y+y, boxColour)
		}
	}
}

func (p placement) clampX(x int) int { return max(0, min(x, p.w-1)) }
func (p placement) clampY(y int) int { return max(0, min(y, p.h-1)) }

// captionOf is the start of a record's first text field, at most captionRunes characters, on
// one line ("" when the schema has no text field).
func captionOf(m *shard.Manifest, vals [][]byte) string {
	for k, f := range m.Fields {
		if f.Kind != shard.KindText || k >= len(vals) {
			continue
		}
		var b strings.Builder
		n := 0
		for _, r := range string(vals[k]) {
			if n == captionRunes {
				break
			}
			if unicode.IsSpace(r) || !unicode.IsPrint(r) {
				r = ' '
			}
			b.WriteRune(r)
			n++
		}
		return strings.TrimSpace(b.String())
	}
	return ""
}

// half is the mean of two channel values, rounded down.
func half(a, b uint8) uint8 { return uint8((int(a) + int(b)) / 2) }
