package transforms

import "math"

// Correctly rounded sine and cosine for the filter kernels.
//
// Pillow evaluates its hamming and lanczos kernels with the C library's sin and cos. glibc's
// are correctly rounded in all but about 0.2% of the kernels' arguments, while Go's math.Sin
// and math.Cos differ from them in the last bit for about one argument in six (and differ
// between architectures: s390x has its own assembly). A last-bit difference can move a
// fixed-point coefficient across a rounding boundary. So the weights are defined by these
// double-double versions: about 106 bits of precision before the final rounding, correctly
// rounded except in cases far rarer than any dataset will meet, and identical on every
// architecture (math.FMA is exact everywhere; every other product is rounded explicitly).
// They are slow, so filterWeights first uses math.Sin/Cos and recomputes a row with these
// only when a coefficient lands within safeMargin of a rounding boundary, where the last
// bits could matter; elsewhere both give the same integers (TestFastKernelsSafe).
// They serve only the small arguments the kernels use (|x| <= 4π).

type dd struct{ hi, lo float64 }

func twoSum(a, b float64) dd {
	s := a + b
	bb := s - a
	return dd{s, (a - (s - bb)) + (b - bb)}
}

func quickTwoSum(a, b float64) dd {
	s := a + b
	return dd{s, b - (s - a)}
}

func twoProd(a, b float64) dd {
	p := float64(a * b)
	return dd{p, math.FMA(a, b, -p)}
}

func ddAdd(a, b dd) dd {
	s := twoSum(a.hi, b.hi)
	t := twoSum(a.lo, b.lo)
	s.lo += t.hi
	s = quickTwoSum(s.hi, s.lo)
	s.lo += t.lo
	return quickTwoSum(s.hi, s.lo)
}

func ddNeg(a dd) dd { return dd{-a.hi, -a.lo} }

func ddMul(a, b dd) dd {
	p := twoProd(a.hi, b.hi)
	p.lo += float64(a.hi*b.lo) + float64(a.lo*b.hi)
	return quickTwoSum(p.hi, p.lo)
}

// ddDivInt divides by a small positive integer n (exact as a float64).
func ddDivInt(a dd, n float64) dd {
	q1 := a.hi / n
	p := twoProd(q1, n)
	r := ddAdd(a, ddNeg(p))
	q2 := r.hi / n
	return quickTwoSum(q1, q2)
}

// π/2 as the unevaluated sum of three doubles.
var (
	pio2a = math.Float64frombits(0x3FF921FB54442D18)
	pio2b = math.Float64frombits(0x3C91A62633145C07)
	pio2c = math.Float64frombits(0xB91F1976B7ED8FBC)
)

// taylor holds the signed Taylor coefficients (-1)^i / n! of sine (odd n, from 3) and cosine
// (even n, from 2), as double-doubles; 14 terms each take the truncation error below 2^-105
// for |r| <= π/4.
var taylor = func() (t struct{ sin, cos [14]dd }) {
	f := dd{1, 0} // 1/n!, built by exact-enough divisions
	for n := 1; n <= 29; n++ {
		f = ddDivInt(f, float64(n))
		i := n/2 - 1
		v := f
		if (n/2)%2 == 1 {
			v = ddNeg(f)
		}
		if n >= 2 && i < 14 {
			if n%2 == 0 {
				t.cos[i] = v
			} else {
				t.sin[i] = v
			}
		}
	}
	return t
}()

// sinDD and cosDD evaluate the series by Horner's rule in double-double.
func sinDD(r dd) dd {
	r2 := ddMul(r, r)
	p := taylor.sin[13]
	for i := 12; i >= 0; i-- {
		p = ddAdd(ddMul(p, r2), taylor.sin[i])
	}
	p = ddAdd(ddMul(p, r2), dd{1, 0})
	return ddMul(p, r)
}

func cosDD(r dd) dd {
	r2 := ddMul(r, r)
	p := taylor.cos[13]
	for i := 12; i >= 0; i-- {
		p = ddAdd(ddMul(p, r2), taylor.cos[i])
	}
	return ddAdd(ddMul(p, r2), dd{1, 0})
}

// reduce returns r = x - k·π/2 in double-double and k mod 4, for 0 < x <= 4π; k·pio2a is
// exact as a double-double and the three-part π/2 carries ~160 bits.
func reduce(x float64) (dd, int) {
	k := math.Floor(float64(x/pio2a) + 0.5)
	r := ddAdd(dd{x, 0}, ddNeg(twoProd(k, pio2a)))
	r = ddAdd(r, ddNeg(twoProd(k, pio2b)))
	r = ddAdd(r, ddNeg(twoProd(k, pio2c)))
	return r, int(k) & 3
}

// libmSin returns the correctly rounded sine of x, for |x| <= 4π.
func libmSin(x float64) float64 {
	neg := x < 0
	if neg {
		x = -x
	}
	if x == 0 {
		return x
	}
	r, q := reduce(x)
	var v dd
	switch q {
	case 0:
		v = sinDD(r)
	case 1:
		v = cosDD(r)
	case 2:
		v = ddNeg(sinDD(r))
	default:
		v = ddNeg(cosDD(r))
	}
	s := v.hi + v.lo
	if neg {
		s = -s
	}
	return s
}

// libmCos returns the correctly rounded cosine of x, for |x| <= 4π.
func libmCos(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x == 0 {
		return 1
	}
	r, q := reduce(x)
	var v dd
	switch q {
	case 0:
		v = cosDD(r)
	case 1:
		v = ddNeg(sinDD(r))
	case 2:
		v = ddNeg(cosDD(r))
	default:
		v = sinDD(r)
	}
	return v.hi + v.lo
}
