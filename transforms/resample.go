package transforms

import (
	"fmt"
	"math"
	"sync"
)

// Filter is a resampling filter with Pillow's semantics. Its zero value is no filter chosen:
// a Spec that resizes with it gets Bilinear, torchvision's default (Spec.Compile). In text
// (flags, manifests) a filter is its name, "bilinear" and so on; [Filter.Pillow] is Pillow's
// own number for it (Image.Resampling), for comparisons across languages.
type Filter int

// The filters of Pillow's Image.resize, in the order of Pillow's numbers.
const (
	Nearest  Filter = 1 + iota // Image.Resampling.NEAREST: affine nearest-neighbour mapping
	Lanczos                    // Image.Resampling.LANCZOS: windowed sinc, a = 3
	Bilinear                   // Image.Resampling.BILINEAR: triangle, support 1
	Bicubic                    // Image.Resampling.BICUBIC: Keys cubic, a = -0.5, support 2
	Box                        // Image.Resampling.BOX: box, support 0.5
	Hamming                    // Image.Resampling.HAMMING: Hamming-windowed sinc, support 1
)

var filterNames = [...]string{
	Nearest: "nearest", Lanczos: "lanczos", Bilinear: "bilinear",
	Bicubic: "bicubic", Box: "box", Hamming: "hamming",
}

// String returns the filter's name ("bilinear", ...), the empty string for the zero Filter.
func (f Filter) String() string {
	if f >= 0 && int(f) < len(filterNames) {
		return filterNames[f]
	}
	return fmt.Sprintf("Filter(%d)", int(f))
}

// Valid reports whether f is one of the six filters (not the zero Filter).
func (f Filter) Valid() bool { return f >= Nearest && int(f) < len(filterNames) }

// Pillow returns Pillow's number for the filter (Image.Resampling: NEAREST is 0, LANCZOS 1,
// ...), or -1 when f is not valid.
func (f Filter) Pillow() int {
	if !f.Valid() {
		return -1
	}
	return int(f - Nearest)
}

// MarshalText returns the filter's name; the zero Filter is the empty text.
func (f Filter) MarshalText() ([]byte, error) {
	if f != 0 && !f.Valid() {
		return nil, fmt.Errorf("transforms: invalid filter %d", int(f))
	}
	return []byte(f.String()), nil
}

// UnmarshalText sets f from a filter name, as ParseFilter; the empty text is the zero Filter.
func (f *Filter) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*f = 0
		return nil
	}
	v, err := ParseFilter(string(text))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// ParseFilter returns the filter named s (nearest|box|bilinear|hamming|bicubic|lanczos).
func ParseFilter(s string) (Filter, error) {
	for i, n := range filterNames {
		if n == s && Filter(i).Valid() {
			return Filter(i), nil
		}
	}
	return 0, fmt.Errorf("transforms: unknown filter %q (want nearest, box, bilinear, hamming, bicubic or lanczos)", s)
}

// PrecisionBits is the number of fractional bits of the fixed-point coefficients: Pillow's
// PRECISION_BITS = 32 - 8 - 2 for 8-bit images.
const PrecisionBits = 22

// Weights are the fixed-point resampling coefficients of one axis, for one (input size,
// output size, filter). They are exactly the integers Pillow 9.4's Resample.c computes, and
// every implementation of packer's resize (the CPU code here, the GPU kernels) must use them
// with the arithmetic of [Weights.Apply]; that is what makes their outputs byte-identical.
//
// For output index o, the taps are source indices Bounds[2*o] ... Bounds[2*o]+Bounds[2*o+1]-1,
// with coefficients Coeffs[o*KSize : o*KSize+Bounds[2*o+1]]; Bounds[2*o+1] is between 0 and
// KSize, and the unused coefficients of a row are zero, so a kernel may also run MaxTaps (or
// KSize) taps for every output when it clamps the source index (a zero coefficient adds
// nothing). A tap count of 0 produces 0 (Pillow's NEAREST writes black where the mapping
// falls outside the source). [Compiled.Plan] gives the weights and crop geometry of a whole
// transform.
//
// The per-sample formula, for one channel, with 32-bit two's-complement integers:
//
//	acc := int32(1) << (Precision - 1)                      // rounding offset
//	for t := int32(0); t < Bounds[2*o+1]; t++ {
//		acc += int32(in[Bounds[2*o]+t]) * Coeffs[o*KSize+t]  // in[] is 0..255
//	}
//	out := acc >> Precision                                  // arithmetic shift
//	out = min(max(out, 0), 255)                              // clip8
//
// A resize is two such passes: horizontal first, into an 8-bit intermediate image, then
// vertical on that intermediate (Pillow's order; the intermediate rounding matters). A pass
// whose Identity is true is skipped by Pillow; applying its unit weights is also an exact copy.
// The sum never overflows int32: |coefficients| sum to well under 2^31/255/2^22.
type Weights struct {
	InSize, OutSize int
	Filter          Filter
	KSize           int     // coefficients stored per output sample
	MaxTaps         int     // largest tap count of any output sample (<= KSize)
	Bounds          []int32 // per output sample: first source index, number of taps
	Coeffs          []int32 // KSize per output sample, fixed point with Precision fractional bits
	Precision       uint    // always PrecisionBits
	Identity        bool    // InSize == OutSize: the pass is a copy (Pillow skips it)

	split16 bool // set by ComputeWeights: every coefficient fits the AVX2 pass's 16-bit split
}

// Apply resamples one line of samples: in has InSize samples spaced stride bytes apart
// (stride 1 for grey, 3 for one channel of RGB), out receives OutSize samples spaced the
// same way. It is the reference form of the per-sample formula; the image code uses faster
// loops with the same arithmetic.
func (w *Weights) Apply(out, in []byte, stride int) {
	for o := 0; o < w.OutSize; o++ {
		out[o*stride] = w.sample(o, in, stride)
	}
}

func (w *Weights) sample(o int, in []byte, stride int) byte {
	x0, n := int(w.Bounds[2*o]), int(w.Bounds[2*o+1])
	k := w.Coeffs[o*w.KSize : o*w.KSize+n]
	acc := int32(1) << (w.Precision - 1)
	for t, c := range k {
		acc += int32(in[(x0+t)*stride]) * c
	}
	return clip8(acc >> w.Precision)
}

func clip8(v int32) byte {
	return byte(min(max(v, 0), 255)) // branch-free (conditional moves)
}

// MaxResampleSize bounds the sizes ComputeWeights accepts on either side.
const MaxResampleSize = 1 << 24

// ComputeWeights returns the weights that resize an axis of inSize samples to outSize with
// filter f, as Pillow 9.4's Image.resize(size, f) computes them (box = the whole image,
// no reducing_gap). For Nearest it returns one tap per output sample reproducing Pillow's
// affine nearest-neighbour mapping (ImagingScaleAffine), including its accumulated float
// positions and its black fill outside the source.
//
// The result is freshly allocated; see [CachedWeights] for the shared cache. It panics if a
// size is below 1 or above MaxResampleSize or f is not a valid filter (programmer error).
func ComputeWeights(inSize, outSize int, f Filter) *Weights {
	if inSize < 1 || outSize < 1 || inSize > MaxResampleSize || outSize > MaxResampleSize || !f.Valid() {
		panic(fmt.Sprintf("transforms: ComputeWeights(%d, %d, %v): invalid arguments", inSize, outSize, f))
	}
	var w *Weights
	switch {
	case inSize == outSize:
		w = unitWeights(inSize, f)
	case f == Nearest:
		w = nearestWeights(inSize, outSize)
	default:
		w = filterWeights(inSize, outSize, f, true)
	}
	w.split16 = w.coeffsSplit16()
	return w
}

// unitWeights is the identity pass: one tap of weight 1.0 per sample.
func unitWeights(n int, f Filter) *Weights {
	w := &Weights{InSize: n, OutSize: n, Filter: f, KSize: 1, MaxTaps: 1, Precision: PrecisionBits, Identity: true,
		Bounds: make([]int32, 2*n), Coeffs: make([]int32, n)}
	for i := 0; i < n; i++ {
		w.Bounds[2*i] = int32(i)
		w.Bounds[2*i+1] = 1
		w.Coeffs[i] = 1 << PrecisionBits
	}
	return w
}

// nearestWeights follows Pillow's ImagingScaleAffine (Geometry.c): the source position starts
// at a/2 with a = in/out, and is advanced by repeated addition of a, in float64; the index is
// that position truncated, and positions outside the source give black.
func nearestWeights(inSize, outSize int) *Weights {
	w := &Weights{InSize: inSize, OutSize: outSize, Filter: Nearest, KSize: 1, MaxTaps: 1, Precision: PrecisionBits,
		Bounds: make([]int32, 2*outSize), Coeffs: make([]int32, outSize)}
	// a[0] = (double)(box[2] - box[0]) / xsize, box in float32; a[2] = box[0] = 0.
	a := float64(float32(inSize)) / float64(outSize)
	pos := 0 + float64(a*0.5)
	for o := 0; o < outSize; o++ {
		xin := -1 // COORD(v): v < 0 ? -1 : (int)v
		if pos >= 0 {
			xin = int(pos)
		}
		if xin >= 0 && xin < inSize {
			w.Bounds[2*o] = int32(xin)
			w.Bounds[2*o+1] = 1
			w.Coeffs[o] = 1 << PrecisionBits
		}
		pos += a
	}
	return w
}

// Pillow's filter kernels (Resample.c). Every product is wrapped in float64(...) so that no
// architecture may fuse it with a following addition (Go spec, "Floating-point operators"):
// the reference (x86-64 Pillow) rounds every operation separately.

func filterSupport(f Filter) float64 {
	switch f {
	case Box:
		return 0.5
	case Bilinear, Hamming:
		return 1
	case Bicubic:
		return 2
	case Lanczos:
		return 3
	}
	return 0
}

func boxKernel(x float64) float64 {
	if x > -0.5 && x <= 0.5 {
		return 1
	}
	return 0
}

func bilinearKernel(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

// The C source writes 0.54f and 0.46f: float32 constants widened to double.
var (
	hamming054 = float64(float32(0.54))
	hamming046 = float64(float32(0.46))
)

func hammingKernel(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x == 0 {
		return 1
	}
	if x >= 1 {
		return 0
	}
	x = float64(x * math.Pi)
	s := libmSin(x) / x
	return float64(s * (hamming054 + float64(hamming046*libmCos(x))))
}

func bicubicKernel(x float64) float64 {
	// a = -0.5: ((a+2)x - (a+3))x² + 1 for |x| < 1, (((x-5)x + 8)x - 4)a for |x| < 2.
	if x < 0 {
		x = -x
	}
	if x < 1 {
		t := float64(1.5*x) - 2.5
		t = float64(t * x)
		t = float64(t * x)
		return t + 1
	}
	if x < 2 {
		t := float64((x-5)*x) + 8
		t = float64(t*x) - 4
		return float64(t * -0.5)
	}
	return 0
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	x = float64(x * math.Pi)
	return libmSin(x) / x
}

func lanczosKernel(x float64) float64 {
	if -3 <= x && x < 3 {
		return float64(sinc(x) * sinc(x/3))
	}
	return 0
}

// fastKernelFunc returns the kernel evaluated with math.Sin/Cos, for the filters that use
// them (nil for the others, which are exact already).
func fastKernelFunc(f Filter) func(float64) float64 {
	switch f {
	case Hamming:
		return func(x float64) float64 {
			if x < 0 {
				x = -x
			}
			if x == 0 {
				return 1
			}
			if x >= 1 {
				return 0
			}
			x = float64(x * math.Pi)
			s := math.Sin(x) / x
			return float64(s * (hamming054 + float64(hamming046*math.Cos(x))))
		}
	case Lanczos:
		sinc := func(x float64) float64 {
			if x == 0 {
				return 1
			}
			x = float64(x * math.Pi)
			return math.Sin(x) / x
		}
		return func(x float64) float64 {
			if -3 <= x && x < 3 {
				return float64(sinc(x) * sinc(x/3))
			}
			return 0
		}
	}
	return nil
}

func kernelFunc(f Filter) func(float64) float64 {
	switch f {
	case Box:
		return boxKernel
	case Bilinear:
		return bilinearKernel
	case Hamming:
		return hammingKernel
	case Bicubic:
		return bicubicKernel
	case Lanczos:
		return lanczosKernel
	}
	return nil
}

// filterWeights is Pillow's precompute_coeffs followed by normalize_coeffs_8bpc, for the box
// (0, inSize) in float32 as Image.resize passes it.
func filterWeights(inSize, outSize int, f Filter, allowFast bool) *Weights {
	kernel, fast := kernelFunc(f), fastKernelFunc(f)
	if !allowFast {
		fast = nil
	}
	in0, in1 := float32(0), float32(inSize)
	scale := float64(in1-in0) / float64(outSize)
	filterscale := scale
	if filterscale < 1 {
		filterscale = 1
	}
	support := float64(filterSupport(f) * filterscale)
	ksize := int(math.Ceil(support))*2 + 1
	ss := 1.0 / filterscale

	w := &Weights{InSize: inSize, OutSize: outSize, Filter: f, KSize: ksize, Precision: PrecisionBits,
		Bounds: make([]int32, 2*outSize), Coeffs: make([]int32, outSize*ksize)}
	k := make([]float64, ksize)
	for xx := 0; xx < outSize; xx++ {
		center := float64(in0) + float64((float64(xx)+0.5)*scale)
		xmin := int(center - support + 0.5) // C (int) truncates toward zero, as Go does
		if xmin < 0 {
			xmin = 0
		}
		xmax := int(center + support + 0.5)
		if xmax > inSize {
			xmax = inSize
		}
		n := xmax - xmin
		if n < 0 {
			n = 0
		}
		if n > ksize { // cannot happen (support bounds the span); kept for memory safety
			n = ksize
		}
		row := w.Coeffs[xx*ksize : xx*ksize+ksize]
		// Kernels with sin/cos are first evaluated with the fast math.Sin/Cos; if any
		// coefficient then lands within a safe margin of a rounding boundary, the row is
		// recomputed with the correctly rounded versions (see resample_math.go). Outside
		// that margin, last-bit differences in sin/cos cannot change the integers.
		if fast == nil || !fixedRow(row, k[:n], fast, xmin, center, ss, true) {
			fixedRow(row, k[:n], kernel, xmin, center, ss, false)
		}
		w.Bounds[2*xx] = int32(xmin)
		w.Bounds[2*xx+1] = int32(n)
		w.MaxTaps = max(w.MaxTaps, n)
	}
	return w
}

// safeMargin is how far from a rounding boundary a fixed-point coefficient computed with the
// fast sin/cos must be to be trusted: their error (a few units in the last place of values
// at most ~1.2, then a division by the row sum) moves v·2^22 by less than 1e-8.
const safeMargin = 1e-6

// fixedRow computes one output sample's coefficients (Pillow's precompute_coeffs inner loop
// and normalize_coeffs_8bpc) into row, with k as scratch. With check, it reports false when
// a coefficient is within safeMargin of a rounding boundary.
func fixedRow(row []int32, k []float64, kernel func(float64) float64, xmin int, center, ss float64, check bool) bool {
	ww := 0.0
	for x := range k {
		v := kernel(float64((float64(x+xmin) - center + 0.5) * ss))
		k[x] = v
		ww += v
	}
	for x, v := range k {
		if ww != 0 {
			v /= ww
		}
		var t float64
		if v < 0 {
			t = -0.5 + float64(v*(1<<PrecisionBits))
		} else {
			t = 0.5 + float64(v*(1<<PrecisionBits))
		}
		if check {
			if d := t - math.Round(t); d < safeMargin && d > -safeMargin {
				return false
			}
		}
		row[x] = int32(t)
	}
	return true
}

// weightKey identifies cached weights.
type weightKey struct {
	in, out int
	f       Filter
}

// weightCache memoises ComputeWeights. It is a pure cache: its contents never change what
// any function returns, only how fast. It is bounded by entry count and by bytes (weights of
// a large downscale with a wide filter take megabytes): when full it is emptied and refilled.
type weightCache struct {
	mu    sync.RWMutex
	m     map[weightKey]*Weights
	bytes int
}

const (
	maxCachedWeights     = 4096
	maxCachedWeightBytes = 64 << 20
)

var sharedWeights = &weightCache{m: make(map[weightKey]*Weights)}

func (w *Weights) sizeBytes() int { return 4 * (len(w.Bounds) + len(w.Coeffs)) }

// CachedWeights is ComputeWeights through a concurrency-safe, bounded cache shared by all
// Workers, since image sizes repeat across a dataset. The returned Weights are shared and
// must not be modified.
func CachedWeights(inSize, outSize int, f Filter) *Weights {
	key := weightKey{inSize, outSize, f}
	c := sharedWeights
	c.mu.RLock()
	w := c.m[key]
	c.mu.RUnlock()
	if w != nil {
		return w
	}
	w = ComputeWeights(inSize, outSize, f)
	n := w.sizeBytes()
	if n > maxCachedWeightBytes/4 {
		return w // too large to keep
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedWeights || c.bytes+n > maxCachedWeightBytes {
		clear(c.m)
		c.bytes = 0
	}
	if c.m[key] == nil {
		c.m[key] = w
		c.bytes += n
	}
	c.mu.Unlock()
	return w
}
