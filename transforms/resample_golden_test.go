package transforms

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// goldenImage is a fixed test image from a self-contained generator (no dependence on
// math/rand's algorithms), smooth areas, noise and hard edges.
func goldenImage(w, h, c int) Image {
	img := Image{W: w, H: h, C: c, Pix: make([]byte, w*h*c)}
	s := uint32(2463534242)
	for i := range img.Pix {
		s ^= s << 13
		s ^= s >> 17
		s ^= s << 5
		px := i / c
		x, y := px%w, px/w
		switch (x/5 + y/4) % 3 {
		case 0:
			img.Pix[i] = byte(s >> 24)
		case 1:
			img.Pix[i] = byte(x*7 + y*3 + i%c*60)
		default:
			if (x/2+y/3)%2 == 0 {
				img.Pix[i] = 255
			}
		}
	}
	return img
}

// TestGoldenHashes pins the bytes of resizes and full specs (TestGoldenInputsMatchPillow
// checks the same cases against Pillow). It runs without Pillow, so every machine and
// architecture checks that it produces the reference bytes.
func TestGoldenHashes(t *testing.T) {
	src3, src1 := goldenImage(97, 61, 3), goldenImage(61, 97, 1)
	want := map[Filter]string{
		Nearest:  "10c8a517f07e6e84edbd9f1284a8726bc574884e824939b200fd82fba4b01542",
		Box:      "57237783191933d56fd4648755571f1ba17e693e20601f84ecb9254607a0143e",
		Bilinear: "b5d8f48e4d1b25057993199f3890f38cf2d6038340f8c2285e23eac2de61f49e",
		Hamming:  "a172430098251165399d289da7d0b7c971fdc4b5eac009a67185d0aad5358d46",
		Bicubic:  "838ffa2c8cb39aca4f87f10f120902dd63b8f28a1e3291277a9aaa4355ae1896",
		Lanczos:  "fdaf6690f501f504175062aa06fb032031a0d97890d8b11e6a029b575a63bf6c",
	}
	for _, f := range allFilters {
		h := sha256.New()
		for _, src := range []Image{src3, src1} {
			for _, sz := range [][2]int{{50, 33}, {150, 100}, {97, 20}, {13, 61}, {1, 1}} {
				out, err := Resize(src, sz[0], sz[1], f)
				if err != nil {
					t.Fatal(err)
				}
				h.Write(out.Pix)
			}
			for _, s := range []Spec{
				{Resize: 40, CropW: 32, CropH: 32, Filter: f},
				{Resize: 20, CropW: 24, CropH: 30, Filter: f, Layout: CHW, DType: Float16, Mean: []float64{0.5}, Std: []float64{0.2}},
				{Width: 64, Height: 48, Filter: f, DType: Float32, Mean: []float64{0.485, 0.456, 0.406}[:src.C], Std: []float64{0.229, 0.224, 0.225}[:src.C]},
			} {
				h.Write(applySpec(t, s, src))
			}
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != want[f] {
			t.Errorf("%v: golden hash %s, want %s", f, got, want[f])
		}
	}
}

// TestGoldenInputsMatchPillow: the pinned cases are Pillow's and torchvision's bytes.
func TestGoldenInputsMatchPillow(t *testing.T) {
	src3, src1 := goldenImage(97, 61, 3), goldenImage(61, 97, 1)
	var rc []resizeCase
	var pc []pipelineCase
	for _, f := range allFilters {
		for _, src := range []Image{src3, src1} {
			for _, sz := range [][2]int{{50, 33}, {150, 100}, {97, 20}, {13, 61}, {1, 1}} {
				rc = append(rc, resizeCase{src, sz[0], sz[1], f})
			}
			c := pipelineJob(Spec{Resize: 40, CropW: 32, CropH: 32, Filter: f})
			c.src = src
			pc = append(pc, c)
		}
	}
	checkResizeCases(t, rc)
	checkPipeline(t, pc)
}
