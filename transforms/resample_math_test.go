package transforms

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// libmScript prints, for each hex float64 on stdin, the hex bits of the C library's sin and cos
// (Python's math module calls them directly).
const libmScript = `
import math, struct, sys
for line in sys.stdin:
    x = struct.unpack('<d', bytes.fromhex(line.strip()))[0]
    s = struct.pack('<d', math.sin(x)).hex()
    c = struct.pack('<d', math.cos(x)).hex()
    sys.stdout.write(s + ' ' + c + '\n')
`

func hexFloat(x float64) string {
	var b [8]byte
	u := math.Float64bits(x)
	for i := range b {
		b[i] = byte(u >> (8 * i))
	}
	return fmt.Sprintf("%x", b[:])
}

func parseHexFloat(t *testing.T, s string) float64 {
	u, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	// little-endian bytes printed in order: reverse.
	var v uint64
	for i := 0; i < 8; i++ {
		v |= (u >> (8 * (7 - i)) & 0xff) << (8 * i)
	}
	return math.Float64frombits(v)
}

// TestSinCosAgainstLibm: our correctly rounded sin/cos never differ from the C library's by
// more than one unit in the last place, and rarely at all (glibc is not correctly rounded
// for about 0.2% of these arguments; Go's math.Sin differs for about 15%).
func TestSinCosAgainstLibm(t *testing.T) {
	requirePillow(t) // same Python
	r := rand.New(rand.NewPCG(5, 5))
	var xs []float64
	for i := 0; i < 20000; i++ {
		xs = append(xs, float64(float64(r.Float64()*6-3)*math.Pi))
	}
	xs = append(xs, math.Pi, -math.Pi, math.Pi/2, 3*math.Pi, 1e-300, 0.5, 1, 2, 3)
	var in bytes.Buffer
	for _, x := range xs {
		in.WriteString(hexFloat(x) + "\n")
	}
	cmd := exec.Command(pythonPath, "-c", libmScript)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	diffs := 0
	for i := 0; sc.Scan(); i++ {
		f := strings.Fields(sc.Text())
		ws, wc := parseHexFloat(t, f[0]), parseHexFloat(t, f[1])
		gs, gc := libmSin(xs[i]), libmCos(xs[i])
		for _, p := range [][2]float64{{gs, ws}, {gc, wc}} {
			if p[0] == p[1] {
				continue
			}
			diffs++
			if d := int64(math.Float64bits(p[0])) - int64(math.Float64bits(p[1])); d > 1 || d < -1 {
				t.Errorf("x=%v: got %v, libm %v (%d ulp)", xs[i], p[0], p[1], d)
			}
		}
	}
	if rate := float64(diffs) / float64(2*len(xs)); rate > 0.01 {
		t.Errorf("%.2f%% of sin/cos values differ from libm", 100*rate)
	}
	t.Logf("%d of %d values differ from libm by one ulp", diffs, 2*len(xs))
}

// weightsScript transliterates Pillow 9.4's precompute_coeffs + normalize_coeffs_8bpc in
// Python floats (IEEE doubles, libm sin/cos) and prints the fixed-point coefficients, so the
// weights themselves, not only the images they produce, are compared for many size pairs.
const weightsScript = `
import math, struct, sys
f32 = lambda v: struct.unpack('<f', struct.pack('<f', v))[0]
def box(x): return 1.0 if -0.5 < x <= 0.5 else 0.0
def bilinear(x):
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0
def hamming(x):
    x = abs(x)
    if x == 0.0: return 1.0
    if x >= 1.0: return 0.0
    x = x * math.pi
    return math.sin(x) / x * (f32(0.54) + f32(0.46) * math.cos(x))
def bicubic(x):
    a = -0.5
    x = abs(x)
    if x < 1.0: return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0: return (((x - 5) * x + 8) * x - 4) * a
    return 0.0
def sinc(x):
    if x == 0.0: return 1.0
    x = x * math.pi
    return math.sin(x) / x
def lanczos(x):
    return sinc(x) * sinc(x / 3) if -3.0 <= x < 3.0 else 0.0
F = {1: (lanczos, 3.0), 2: (bilinear, 1.0), 3: (bicubic, 2.0), 4: (box, 0.5), 5: (hamming, 1.0)}
for line in sys.stdin:
    insize, outsize, fid = map(int, line.split())
    filt, sup = F[fid]
    scale = float(insize) / outsize
    fs = max(scale, 1.0)
    support = sup * fs
    ss = 1.0 / fs
    out = []
    for xx in range(outsize):
        center = 0.0 + (xx + 0.5) * scale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), insize) - xmin
        k = [filt((x + xmin - center + 0.5) * ss) for x in range(xmax)]
        ww = 0.0
        for w in k: ww += w
        if ww != 0.0: k = [w / ww for w in k]
        out.append('%d %d ' % (xmin, xmax) + ' '.join(str(int(-0.5 + w * (1 << 22)) if w < 0 else int(0.5 + w * (1 << 22))) for w in k))
    sys.stdout.write('|'.join(out) + '\n')
`

func TestWeightsMatchPillowArithmetic(t *testing.T) {
	requirePillow(t)
	r := rand.New(rand.NewPCG(6, 6))
	type pair struct {
		in, out int
		f       Filter
	}
	var pairs []pair
	for _, f := range []Filter{Box, Bilinear, Hamming, Bicubic, Lanczos} {
		for _, p := range [][2]int{{500, 256}, {375, 256}, {333, 224}, {1920, 292}, {256, 224}, {7, 300}, {2, 3}, {4000, 1}} {
			pairs = append(pairs, pair{p[0], p[1], f})
		}
		for i := 0; i < 60; i++ {
			pairs = append(pairs, pair{1 + r.IntN(2000), 1 + r.IntN(400), f})
		}
	}
	var in bytes.Buffer
	for _, p := range pairs {
		fmt.Fprintf(&in, "%d %d %d\n", p.in, p.out, p.f.Pillow())
	}
	cmd := exec.Command(pythonPath, "-c", weightsScript)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<20), 64<<20)
	i := 0
	for ; sc.Scan(); i++ {
		p := pairs[i]
		w := ComputeWeights(p.in, p.out, p.f)
		if w.Identity {
			continue // Pillow skips the pass; the unit weights are packer's own
		}
		for o, row := range strings.Split(sc.Text(), "|") {
			f := strings.Fields(row)
			var got []string
			got = append(got, fmt.Sprint(w.Bounds[2*o]), fmt.Sprint(w.Bounds[2*o+1]))
			for _, c := range w.Coeffs[o*w.KSize : o*w.KSize+int(w.Bounds[2*o+1])] {
				got = append(got, fmt.Sprint(c))
			}
			if strings.Join(got, " ") != strings.Join(f, " ") {
				t.Fatalf("%d->%d %v output %d:\n got %v\nwant %v", p.in, p.out, p.f, o, got, f)
			}
		}
	}
	if i != len(pairs) {
		t.Fatalf("python answered %d of %d", i, len(pairs))
	}
}

// TestFastKernelsSafe: weights computed with math.Sin/Cos under the margin check equal those
// computed with the correctly rounded sin/cos only.
func TestFastKernelsSafe(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 17))
	for i := 0; i < 400; i++ {
		f := []Filter{Hamming, Lanczos}[i%2]
		in, out := 1+r.IntN(3000), 1+r.IntN(600)
		if in == out {
			continue
		}
		a, b := filterWeights(in, out, f, true), filterWeights(in, out, f, false)
		if fmt.Sprint(a.Bounds) != fmt.Sprint(b.Bounds) || fmt.Sprint(a.Coeffs) != fmt.Sprint(b.Coeffs) {
			t.Fatalf("%d->%d %v: fast path changes the weights", in, out, f)
		}
	}
}
