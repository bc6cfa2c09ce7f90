package transforms

import "fmt"

// ResizeOutputSize returns the (width, height) torchvision's Resize(size, max_size=maxSize)
// gives a w×h image (functional._compute_resized_output_size with an int size): the shorter
// side becomes size and the longer int(size*long/short), truncated; then, when maxSize > 0
// and the longer side exceeds it, the longer side becomes maxSize and the shorter
// int(maxSize*short/long). The quotients are float64 divisions of exact integers, as
// Python's true division is. A result side of 0 is an error (Pillow refuses it).
func ResizeOutputSize(w, h, size, maxSize int) (int, int, error) {
	if w < 1 || h < 1 || size < 1 {
		return 0, 0, fmt.Errorf("transforms: resize %dx%d to %d: sizes must be positive", w, h, size)
	}
	if maxSize > 0 && maxSize <= size {
		return 0, 0, fmt.Errorf("transforms: max size %d must be larger than resize %d", maxSize, size)
	}
	short, long := w, h
	if w > h {
		short, long = h, w
	}
	newShort := size
	newLong := int(float64(size) * float64(long) / float64(short))
	if maxSize > 0 && newLong > maxSize {
		newShort, newLong = int(float64(maxSize)*float64(newShort)/float64(newLong)), maxSize
	}
	if newShort < 1 || newLong < 1 || newLong > MaxResampleSize {
		return 0, 0, fmt.Errorf("transforms: resize %dx%d to %d (max size %d) gives an empty or oversized image", w, h, size, maxSize)
	}
	if w <= h {
		return newShort, newLong, nil
	}
	return newLong, newShort, nil
}

// CenterCropOffset returns where torchvision's CenterCrop puts a crop of size crop on an axis
// of size size: the index, on that axis of the image, of the crop's first sample. A negative
// offset means the image is smaller than the crop and is zero-padded first, (crop-size)/2
// samples (rounded down) before it and the rest after it, as functional.center_crop does.
// Otherwise the offset is int(round((size - crop) / 2.0)) with Python's round, which rounds
// halves to even: (size-crop) = 1, 3, 5, 7 give offsets 0, 2, 2, 4.
func CenterCropOffset(size, crop int) int {
	if crop > size {
		return -((crop - size) / 2)
	}
	d := size - crop
	k := d / 2
	if d%2 == 1 && k%2 == 1 { // k + 0.5 rounds to the even neighbour
		k++
	}
	return k
}

// geometry places the output frame on the resized image: output pixel (x, y) is resized
// pixel (x+ox, y+oy), or zero (padding) where that falls outside rw×rh.
type geometry struct {
	rw, rh int // resized image size (the source size when there is no resize)
	ow, oh int // output frame size
	ox, oy int // offset of the output frame in the resized image; negative when padded
}

// visible returns the output rectangle [x0,x1)×[y0,y1) that lies on the resized image.
func (g geometry) visible() (x0, y0, x1, y1 int) {
	x0, y0 = max(0, -g.ox), max(0, -g.oy)
	x1, y1 = min(g.ow, g.rw-g.ox), min(g.oh, g.rh-g.oy)
	return
}

func (g geometry) padded() bool {
	x0, y0, x1, y1 := g.visible()
	return x0 != 0 || y0 != 0 || x1 != g.ow || y1 != g.oh
}

// sourceRect returns the source rectangle the visible output reads, for a fullW×fullH source.
func (g geometry) sourceRect(f Filter, fullW, fullH int) (x0, y0, x1, y1 int) {
	if g.rw == fullW && g.rh == fullH {
		return g.sourceRectWeights(nil, nil)
	}
	return g.sourceRectWeights(CachedWeights(fullW, g.rw, f), CachedWeights(fullH, g.rh, f))
}

// sourceRectWeights is sourceRect with the weights given (nil: no resize).
func (g geometry) sourceRectWeights(wx, wy *Weights) (x0, y0, x1, y1 int) {
	vx0, vy0, vx1, vy1 := g.visible()
	if vx1 <= vx0 || vy1 <= vy0 {
		return 0, 0, 0, 0
	}
	x0, y0, x1, y1 = vx0+g.ox, vy0+g.oy, vx1+g.ox, vy1+g.oy
	if wx == nil || (wx.Identity && wy.Identity) {
		return x0, y0, x1, y1
	}
	x0, x1 = sourceSpan(wx, x0, x1)
	y0, y1 = sourceSpan(wy, y0, y1)
	if x1 <= x0 || y1 <= y0 {
		return 0, 0, 0, 0
	}
	return x0, y0, x1, y1
}
