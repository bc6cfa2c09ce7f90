package transforms

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"
)

func TestFloat16Edges(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{0, 0x0000}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000},
		{65504, 0x7bff}, {65519.996, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00}, {-1e10, 0xfc00},
		{float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{0x1p-14, 0x0400}, {0x1p-24, 0x0001}, {0x1p-25, 0x0000}, {0x1.000002p-25, 0x0001},
		{0x1.8p-24, 0x0002}, {0x1.4p-24, 0x0001}, {0x1.ffcp-15, 0x0400}, // subnormal rounding up to normal
		{1 + 0x1p-11, 0x3c00}, {1 + 0x1.8p-10, 0x3c02}, {1 + 0x1p-10 + 0x1p-11, 0x3c02}, // ties to even
		{float32(1.0 / 3), 0x3555}, {-0.0001, 0x868e},
	} {
		if got := Float16Bits(c.f); got != c.want {
			t.Errorf("Float16Bits(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if h := Float16Bits(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN -> %#04x, not a NaN", h)
	}
}

// TestFloat16Exhaustive: every half round-trips, and every midpoint between neighbouring
// halves (exact in float32) rounds to the even one, values just off it to the nearer one.
func TestFloat16Exhaustive(t *testing.T) {
	for h := 0; h < 0x7c00; h++ {
		for _, sign := range []uint16{0, 0x8000} {
			a := uint16(h) | sign
			fa := Float16ToFloat32(a)
			if got := Float16Bits(fa); got != a {
				t.Fatalf("%#04x -> %g -> %#04x", a, fa, got)
			}
			fb := Float16ToFloat32(a + 1) // next magnitude (0x7c00 = inf for the last)
			if h == 0x7bff {
				fb = 65536 * float32(1-2*int(sign>>15)) // where the next half would be
			}
			mid := (fa + fb) / 2
			even := a
			if a&1 == 1 {
				even = a + 1
			}
			if got := Float16Bits(mid); got != even {
				t.Fatalf("midpoint %g of %#04x: %#04x, want %#04x", mid, a, got, even)
			}
			below := math.Nextafter32(mid, fa)
			above := math.Nextafter32(mid, fb)
			if got := Float16Bits(below); got != a {
				t.Fatalf("%g just below midpoint of %#04x: %#04x", below, a, got)
			}
			if got := Float16Bits(above); got != a+1 {
				t.Fatalf("%g just above midpoint of %#04x: %#04x", above, a, got)
			}
		}
	}
}

// TestFloat16AgainstNumpy: random float32 bit patterns converted by numpy's astype(float16).
func TestFloat16AgainstNumpy(t *testing.T) {
	requirePillow(t)
	if exec.Command(pythonPath, "-c", "import numpy").Run() != nil {
		t.Skip("numpy not installed")
	}
	r := rand.New(rand.NewPCG(11, 11))
	in := make([]byte, 4*200000)
	for i := 0; i < len(in); i += 4 {
		var u uint32
		switch i % 3 {
		case 0:
			u = r.Uint32()
		default: // concentrate on the half range
			u = math.Float32bits(float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-25))))
		}
		binary.LittleEndian.PutUint32(in[i:], u)
	}
	cmd := exec.Command(pythonPath, "-c", `import sys, numpy as np
a = np.frombuffer(sys.stdin.buffer.read(), dtype='<f4')
with np.errstate(all='ignore'):
    sys.stdout.buffer.write(a.astype('<f2').tobytes())`)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(in)/4; i++ {
		f := math.Float32frombits(binary.LittleEndian.Uint32(in[4*i:]))
		want := binary.LittleEndian.Uint16(out[2*i:])
		got := Float16Bits(f)
		if f != f { // NaN payloads: only require a NaN of the same sign
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 || got&0x8000 != want&0x8000 {
				t.Fatalf("NaN %#08x -> %#04x", math.Float32bits(f), got)
			}
			continue
		}
		if got != want {
			t.Fatalf("Float16Bits(%g) = %#04x, numpy %#04x", f, got, want)
		}
	}
}

func TestNormLUTOrder(t *testing.T) {
	// (p/255 - mean) / std, each step rounded to float32.
	l := makeNormLUT(0.485, 0.229, true)
	for p := 0; p < 256; p++ {
		v := float32(p) / 255
		v -= float32(0.485)
		v /= float32(0.229)
		if l[p] != v {
			t.Fatalf("p=%d: %v, want %v", p, l[p], v)
		}
	}
}
