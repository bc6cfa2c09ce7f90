package gpu

import (
	"fmt"
	"math"

	"github.com/packer-dev/packer/transforms"
)

// Job-table layout: the PK_J_* indices of kernels/resize_body.h. TestJobLayout checks them
// against the header through the CPU harness.
const (
	jC = iota
	jSrcW
	jSrcOff
	jXB
	jXC
	jXK
	jYB
	jYC
	jYK
	jX0
	jX1
	jY0
	jY1
	jRY0
	jRY1
	jMidOff
	jOutW
	jOutH
	jOffX
	jOffY
	jDstOff
	jHWork
	jVWork
	jLUTOff
	jSrcX0
	jobWords
)

// Kernel parameters: output layouts (PK_LAYOUT_*).
const (
	layoutHWC = 0
	layoutCHW = 1
)

// BlockSize is the threads per block of both kernels.
const BlockSize = 256

// maxGridY is the largest grid y dimension (one job per y): CUDA's limit is 65535.
const maxGridY = 65535

// maxBufferBytes bounds each batch buffer, since the job table holds int32 byte offsets.
const maxBufferBytes = math.MaxInt32

// Geometry is where one image's output pixels come from: the image is resized to RW×RH, and
// output pixel (x, y) of the OutW×OutH record is resized pixel (x+OffX, y+OffY), or padding
// (zero) where that lies outside the resized image.
type Geometry struct {
	RW, RH     int
	OutW, OutH int
	OffX, OffY int
}

// PlanGeometry returns the geometry of spec applied to a w×h image. It is the CPU path's own
// geometry (transforms.Spec.ResizedSize and transforms.CenterCropOffset: torchvision's
// Resize(N) with max_size, exact sizes, and CenterCrop with zero padding when the crop is
// larger), so both paths place every pixel identically.
func PlanGeometry(spec transforms.Compiled, w, h int) (Geometry, error) {
	if w < 1 || h < 1 {
		return Geometry{}, fmt.Errorf("gpu: invalid image size %dx%d", w, h)
	}
	rw, rh, err := spec.ResizedSize(w, h)
	if err != nil {
		return Geometry{}, err
	}
	if rw < 1 || rh < 1 || rw > transforms.MaxResampleSize || rh > transforms.MaxResampleSize {
		return Geometry{}, fmt.Errorf("gpu: resize %dx%d to %dx%d: size out of range", w, h, rw, rh)
	}
	g := Geometry{RW: rw, RH: rh, OutW: rw, OutH: rh}
	if s := spec.Spec(); s.CropW > 0 {
		g.OutW, g.OutH = s.CropW, s.CropH
		g.OffX = transforms.CenterCropOffset(rw, s.CropW)
		g.OffY = transforms.CenterCropOffset(rh, s.CropH)
	}
	return g, nil
}

// weightPool places weights in the device's weight buffer and returns the int32 offsets of
// their Bounds and Coeffs there.
type weightPool interface {
	place(w *transforms.Weights) (bounds, coeffs int32, err error)
}

// Window places a decoded image in its full image: the image's pixels are
// [X, X+W) × [Y, Y+H) of a FullW × FullH image (a decoder that skipped what the transform
// never reads; see transforms.Worker.ApplyWindow). The zero Window means the whole image.
type Window struct {
	X, Y, FullW, FullH int
}

// batchPlan is the job table of a batch and the buffer sizes it needs.
type batchPlan struct {
	jobs               []int32
	srcBytes           int // staged source regions, one after another
	midBytes           int
	dstBytes           int
	maxHWork, maxVWork int
	srcOffs, dstOffs   []int // per image
	regions            []region
	dstSizes           []int
	layout, esize      int32
	channels           []int
	srcRead            int // source bytes under the kept pixels' filter support (minimum device reads)
	// direct[i] is set when image i goes up straight from its own pinned memory (a
	// Resizer.Frame) rather than from the slot's staging: its region is then whole rows of
	// the image, one contiguous span. hostOffs are the staged images' offsets in the slot's
	// staging, packed (hostBytes in all); without direct images they equal srcOffs.
	direct    []bool
	hostOffs  []int
	hostBytes int
}

// region is the part of an image that is staged and uploaded: w×h pixels from (x, y) of the
// image's pixels (window coordinates).
type region struct{ x, y, w, h int }

// traffic returns the bytes a batch must move: over the host link (the source regions up,
// records down) and through device memory (the uploaded regions written, then read by the
// horizontal pass, the intermediate written and read, the records written, and read for the
// copy back).
func (p *batchPlan) traffic() (link, dram int64) {
	link = int64(p.srcBytes) + int64(p.dstBytes)
	dram = int64(p.srcBytes) + int64(p.srcRead) + 2*int64(p.midBytes) + 2*int64(p.dstBytes)
	return link, dram
}

// conversion is the layout and element size of a transform.
func conversion(spec transforms.Compiled) (layout, esize int32, err error) {
	switch spec.Layout() {
	case transforms.HWC:
		layout = layoutHWC
	case transforms.CHW:
		layout = layoutCHW
	default:
		return 0, 0, fmt.Errorf("gpu: unsupported layout %v", spec.Layout())
	}
	switch n := spec.DType().Size(); n {
	case 1, 2, 4:
		esize = int32(n)
	default:
		return 0, 0, fmt.Errorf("gpu: unsupported dtype %v", spec.DType())
	}
	return layout, esize, nil
}

// imagePlan is where one image's work lies, in full-image coordinates: kept resized columns
// [x0,x1) and rows [y0,y1); source rows [ry0,ry1) through the horizontal pass; source columns
// [cx0,cx1) under the kept columns' taps. The uploaded region is [cx0,cx1)×[ry0,ry1).
type imagePlan struct {
	g                        Geometry
	wx, wy                   *transforms.Weights
	x0, x1, y0, y1           int
	ry0, ry1, cx0, cx1       int
	fullW, fullH, winX, winY int
}

// planImage plans image im (the window win of its full image; the zero Window for all of it)
// under spec with filter f.
func planImage(spec transforms.Compiled, f transforms.Filter, im transforms.Image, win Window) (imagePlan, error) {
	if im.W < 1 || im.H < 1 || im.C < 1 || im.C > 4 || len(im.Pix) < im.W*im.H*im.C ||
		im.W > transforms.MaxResampleSize || im.H > transforms.MaxResampleSize {
		return imagePlan{}, fmt.Errorf("gpu: invalid %dx%dx%d with %d bytes", im.W, im.H, im.C, len(im.Pix))
	}
	ip := imagePlan{fullW: im.W, fullH: im.H}
	if win != (Window{}) {
		if win.X < 0 || win.Y < 0 || win.FullW > transforms.MaxResampleSize || win.FullH > transforms.MaxResampleSize ||
			win.X+im.W > win.FullW || win.Y+im.H > win.FullH {
			return imagePlan{}, fmt.Errorf("gpu: window %dx%d at (%d,%d) outside a %dx%d image", im.W, im.H, win.X, win.Y, win.FullW, win.FullH)
		}
		ip.fullW, ip.fullH, ip.winX, ip.winY = win.FullW, win.FullH, win.X, win.Y
	}
	g, err := PlanGeometry(spec, ip.fullW, ip.fullH)
	if err != nil {
		return imagePlan{}, err
	}
	ip.g = g
	ip.wx = transforms.CachedWeights(ip.fullW, g.RW, f)
	ip.wy = transforms.CachedWeights(ip.fullH, g.RH, f)
	x0, x1 := max(g.OffX, 0), min(g.OffX+g.OutW, g.RW)
	y0, y1 := max(g.OffY, 0), min(g.OffY+g.OutH, g.RH)
	if x1 <= x0 || y1 <= y0 {
		x0, x1, y0, y1 = 0, 0, 0, 0 // the whole record is padding
	}
	ip.x0, ip.x1, ip.y0, ip.y1 = x0, x1, y0, y1
	if err := checkWeights(ip.wx); err != nil {
		return imagePlan{}, err
	}
	if err := checkWeights(ip.wy); err != nil {
		return imagePlan{}, err
	}
	ry0, ry1 := ip.fullH, 0
	for y := y0; y < y1; y++ {
		s, n := int(ip.wy.Bounds[2*y]), int(ip.wy.Bounds[2*y+1])
		if n > 0 {
			ry0, ry1 = min(ry0, s), max(ry1, s+n)
		}
	}
	if ry1 <= ry0 {
		ry0, ry1 = 0, 0
	}
	cx0, cx1 := ip.fullW, 0
	for x := x0; x < x1; x++ {
		s, n := int(ip.wx.Bounds[2*x]), int(ip.wx.Bounds[2*x+1])
		if n > 0 {
			cx0, cx1 = min(cx0, s), max(cx1, s+n)
		}
	}
	if cx1 <= cx0 || ry1 <= ry0 {
		cx0, cx1 = 0, 0 // no tap reads the source
	}
	ip.ry0, ip.ry1, ip.cx0, ip.cx1 = ry0, ry1, cx0, cx1
	if cx1 > cx0 && (cx0 < ip.winX || cx1 > ip.winX+im.W || ry0 < ip.winY || ry1 > ip.winY+im.H) {
		return imagePlan{}, fmt.Errorf("gpu: window %dx%d at (%d,%d) of %dx%d does not cover the source region [%d,%d)x[%d,%d)",
			im.W, im.H, ip.winX, ip.winY, ip.fullW, ip.fullH, cx0, cx1, ry0, ry1)
	}
	return ip, nil
}

// stagedBytes is the source bytes of the image's uploaded region.
func (ip *imagePlan) stagedBytes(c int) int { return (ip.cx1 - ip.cx0) * (ip.ry1 - ip.ry0) * c }

// planBatch lays out a batch: every image's job, with its weights placed by pool. wins is
// nil (whole images) or has one Window per image.
func planBatch(spec transforms.Compiled, imgs []transforms.Image, wins []Window, pool weightPool, luts *lutSet) (*batchPlan, error) {
	return planBatchDirect(spec, imgs, wins, pool, luts, nil)
}

// planBatchDirect is planBatch where direct (nil, or one per image) marks the images uploaded
// straight from their own pinned memory: each uploads the full width of the rows its kept
// pixels read (the image's own rows [RY0, RY1), contiguous), not just the columns under the
// taps, and is not staged. The kernels read the same source pixels either way.
func planBatchDirect(spec transforms.Compiled, imgs []transforms.Image, wins []Window, pool weightPool, luts *lutSet, direct []bool) (*batchPlan, error) {
	layout, esize, err := conversion(spec)
	if err != nil {
		return nil, err
	}
	f := spec.ResampleFilter()
	if len(imgs) > maxGridY {
		return nil, fmt.Errorf("gpu: batch of %d images, at most %d", len(imgs), maxGridY)
	}
	if wins != nil && len(wins) != len(imgs) {
		return nil, fmt.Errorf("gpu: %d windows for %d images", len(wins), len(imgs))
	}
	p := &batchPlan{jobs: make([]int32, 0, len(imgs)*jobWords), layout: layout, esize: esize}
	for i, im := range imgs {
		var win Window
		if wins != nil {
			win = wins[i]
		}
		ip, err := planImage(spec, f, im, win)
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		if esize != 1 {
			if err := luts.errs[im.C]; err != nil {
				return nil, fmt.Errorf("image %d (%d channels): %w", i, im.C, err)
			}
		}
		xb, xc, err := pool.place(ip.wx)
		if err != nil {
			return nil, err
		}
		yb, yc, err := pool.place(ip.wy)
		if err != nil {
			return nil, err
		}
		g := ip.g
		C := im.C
		x0, x1, y0, y1, ry0, ry1 := ip.x0, ip.x1, ip.y0, ip.y1, ip.ry0, ip.ry1
		srcN := ip.stagedBytes(C)
		read := srcN
		reg := region{x: ip.cx0 - ip.winX, y: ry0 - ip.winY, w: ip.cx1 - ip.cx0, h: ry1 - ry0}
		srcX0 := ip.cx0
		isDirect := direct != nil && direct[i] && srcN > 0
		if isDirect {
			reg.x, reg.w, srcX0 = 0, im.W, ip.winX
			srcN = im.W * reg.h * C
		}
		midN := (ry1 - ry0) * (x1 - x0) * C
		dstN := g.OutW * g.OutH * C * int(esize)
		hwork := (ry1 - ry0) * (x1 - x0)
		vwork := g.OutW * g.OutH
		if int64(p.srcBytes)+int64(srcN) > maxBufferBytes || int64(p.midBytes)+int64(midN) > maxBufferBytes ||
			int64(p.dstBytes)+int64(dstN) > maxBufferBytes {
			return nil, fmt.Errorf("gpu: batch exceeds %d bytes per buffer at image %d", maxBufferBytes, i)
		}
		job := [jobWords]int32{
			jC: int32(C), jSrcW: int32(reg.w), jSrcOff: int32(p.srcBytes), jSrcX0: int32(srcX0),
			jXB: xb, jXC: xc, jXK: int32(ip.wx.KSize), jYB: yb, jYC: yc, jYK: int32(ip.wy.KSize),
			jX0: int32(x0), jX1: int32(x1), jY0: int32(y0), jY1: int32(y1), jRY0: int32(ry0), jRY1: int32(ry1),
			jMidOff: int32(p.midBytes), jOutW: int32(g.OutW), jOutH: int32(g.OutH),
			jOffX: int32(g.OffX), jOffY: int32(g.OffY), jDstOff: int32(p.dstBytes),
			jHWork: int32(hwork), jVWork: int32(vwork), jLUTOff: int32(lutOffset(C)),
		}
		p.jobs = append(p.jobs, job[:]...)
		p.srcOffs = append(p.srcOffs, p.srcBytes)
		p.regions = append(p.regions, reg)
		p.direct = append(p.direct, isDirect)
		p.hostOffs = append(p.hostOffs, p.hostBytes)
		if !isDirect {
			p.hostBytes += srcN
		}
		p.dstOffs = append(p.dstOffs, p.dstBytes)
		p.dstSizes = append(p.dstSizes, dstN)
		p.channels = append(p.channels, C)
		p.srcRead += read
		p.srcBytes += srcN
		p.midBytes += midN
		p.dstBytes += dstN
		p.maxHWork = max(p.maxHWork, hwork)
		p.maxVWork = max(p.maxVWork, vwork)
	}
	return p, nil
}

// grid returns the grid of a pass whose largest job has work threads.
func (p *batchPlan) grid(work int) Dim {
	return Dim{X: uint32((work + BlockSize - 1) / BlockSize), Y: uint32(len(p.jobs) / jobWords), Z: 1}
}

// hostPool is a weightPool in a Go slice: the CPU harness's, and the staging copy of the
// device's pool.
type hostPool struct {
	words []int32
	at    map[weightKey][2]int32
	limit int // most words, 0 for no limit
}

// weightKey identifies weights: ComputeWeights is a function of these.
type weightKey struct {
	in, out int
	f       transforms.Filter
}

// errPoolFull is returned by hostPool.place when the weights do not fit.
var errPoolFull = fmt.Errorf("gpu: weight pool full")

func (h *hostPool) place(w *transforms.Weights) (int32, int32, error) {
	key := weightKey{w.InSize, w.OutSize, w.Filter}
	if off, ok := h.at[key]; ok {
		return off[0], off[1], nil
	}
	if err := checkWeights(w); err != nil {
		return 0, 0, err
	}
	n := len(w.Bounds) + len(w.Coeffs)
	if (h.limit > 0 && len(h.words)+n > h.limit) || len(h.words)+n > math.MaxInt32 {
		return 0, 0, errPoolFull
	}
	if h.at == nil {
		h.at = make(map[weightKey][2]int32)
	}
	b := int32(len(h.words))
	h.words = append(h.words, w.Bounds...)
	c := int32(len(h.words))
	h.words = append(h.words, w.Coeffs...)
	h.at[key] = [2]int32{b, c}
	return b, c, nil
}

// checkWeights verifies that every tap of w lies inside its input, so that the kernels,
// which trust the table, never read outside a buffer.
func checkWeights(w *transforms.Weights) error {
	if w.Precision != transforms.PrecisionBits || w.KSize < 1 || len(w.Bounds) != 2*w.OutSize || len(w.Coeffs) != w.OutSize*w.KSize {
		return fmt.Errorf("gpu: malformed weights %d->%d", w.InSize, w.OutSize)
	}
	for o := 0; o < w.OutSize; o++ {
		s, n := int(w.Bounds[2*o]), int(w.Bounds[2*o+1])
		if n < 0 || n > w.KSize || (n > 0 && (s < 0 || s+n > w.InSize)) {
			return fmt.Errorf("gpu: weights %d->%d: output %d taps [%d,+%d) outside the input", w.InSize, w.OutSize, o, s, n)
		}
	}
	return nil
}

// lutSet holds the conversion tables of a spec for 1 to 4 channels, one after another
// (lutOffset), or why a channel count has none.
type lutSet struct {
	words []uint32 // nil for uint8
	errs  [5]error
}

// lutOffset is where the table for C channels starts in lutSet.words.
func lutOffset(C int) int { return 256 * C * (C - 1) / 2 }

// lutWords is the size of a full lutSet.
const lutWords = 256 * (1 + 2 + 3 + 4)

func newLUTSet(spec transforms.Compiled) (*lutSet, error) {
	_, esize, err := conversion(spec)
	if err != nil {
		return nil, err
	}
	l := &lutSet{}
	if esize == 1 {
		return l, nil
	}
	l.words = make([]uint32, lutWords)
	for c := 1; c <= 4; c++ {
		t, err := conversionLUT(spec, c)
		if err != nil {
			l.errs[c] = err
			continue
		}
		copy(l.words[lutOffset(c):], t)
	}
	return l, nil
}

// conversionLUT returns the float bits of every (channel, byte value) for spec's dtype and
// normalisation, computed by the CPU reference itself (transforms.Worker.Apply on a 256-pixel
// image holding every value), so the kernels' float output is the reference's by construction:
// the device never rounds a float. Nil for uint8.
func conversionLUT(spec transforms.Compiled, channels int) ([]uint32, error) {
	_, esize, err := conversion(spec)
	if err != nil || esize == 1 {
		return nil, err
	}
	conv := spec.Conversion()
	src := transforms.Image{W: 256, H: 1, C: channels, Pix: make([]byte, 256*channels)}
	for v := 0; v < 256; v++ {
		for c := 0; c < channels; c++ {
			src.Pix[v*channels+c] = byte(v)
		}
	}
	out := make([]byte, 256*channels*int(esize))
	if err := conv.NewWorker().Apply(src, out); err != nil {
		return nil, fmt.Errorf("gpu: dtype %s: %w", spec.DType(), err)
	}
	lut := make([]uint32, 256*channels)
	for v := 0; v < 256; v++ {
		for c := 0; c < channels; c++ {
			e := out[(v*channels+c)*int(esize):]
			bits := uint32(e[0]) | uint32(e[1])<<8
			if esize == 4 {
				bits |= uint32(e[2])<<16 | uint32(e[3])<<24
			}
			lut[c*256+v] = bits
		}
	}
	return lut, nil
}
