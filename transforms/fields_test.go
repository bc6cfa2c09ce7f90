package transforms

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"
)

// fieldCase is one random transform and source size for the field geometry tests.
type fieldCase struct {
	Spec Spec
	W, H int
}

func randomFieldCase(r *rand.Rand) fieldCase {
	fc := fieldCase{W: 1 + r.IntN(300), H: 1 + r.IntN(300)}
	switch r.IntN(4) {
	case 0: // shorter side
		fc.Spec.Resize = 1 + r.IntN(200)
	case 1: // exact size
		fc.Spec.Width, fc.Spec.Height = 1+r.IntN(200), 1+r.IntN(200)
	case 2: // no resize
	case 3:
		fc.Spec.Resize = 1 + r.IntN(200)
		fc.Spec.MaxSize = fc.Spec.Resize + 1 + r.IntN(100)
	}
	if r.IntN(3) > 0 { // crop, sometimes larger than the resized image (padding)
		fc.Spec.CropW, fc.Spec.CropH = 1+r.IntN(250), 1+r.IntN(250)
	}
	if r.IntN(2) == 0 {
		fc.Spec.Layout = CHW
	}
	return fc
}

func mustCompile(t testing.TB, s Spec) Compiled {
	t.Helper()
	c, err := s.Compile()
	if err != nil {
		t.Fatalf("compile %+v: %v", s, err)
	}
	return c
}

// boxesRef is the independent NumPy implementation of the box arithmetic: it gets the resized
// and output sizes and computes the crop offsets itself, as torchvision's CenterCrop does
// (round half to even of (size - crop) / 2, or left padding (crop - size) // 2).
const boxesRef = `import sys, json, numpy as np
out = []
for job in json.load(sys.stdin):
    w, h, rw, rh, ow, oh = job["w"], job["h"], job["rw"], job["rh"], job["ow"], job["oh"]
    def off(size, crop):
        if crop > size:
            return -((crop - size) // 2)
        return int(round((size - crop) / 2.0))
    ox, oy = (off(rw, ow), off(rh, oh)) if job["crop"] else (0, 0)
    b = np.array(job["boxes"], dtype=np.float32).reshape(-1, 4).astype(np.float64)
    b[:, [0, 2]] = np.clip(b[:, [0, 2]] * (rw / w) - ox, 0, ow)
    b[:, [1, 3]] = np.clip(b[:, [1, 3]] * (rh / h) - oy, 0, oh)
    b = b.astype(np.float32)
    keep = (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])
    out.append({"boxes": [float(v) for v in b[keep].reshape(-1)], "kept": np.nonzero(keep)[0].tolist()})
json.dump(out, sys.stdout)
`

func requireNumPy(t testing.TB) {
	t.Helper()
	requirePillow(t)
	if out, err := exec.Command(pythonPath, "-c", "import numpy").CombinedOutput(); err != nil {
		t.Fatalf("the field geometry tests need NumPy (Debian's python3-numpy): %v\n%s", err, out)
	}
}

// TestMapBoxesAgainstNumPy: random sizes, resizes, crops and boxes (inside, across and outside
// the crop, inverted, degenerate) mapped by MapBoxes and by an independent NumPy version.
func TestMapBoxesAgainstNumPy(t *testing.T) {
	requireNumPy(t)
	r := rand.New(rand.NewPCG(26, 3))
	var jobs []map[string]any
	var cases []fieldCase
	var inputs [][]float32
	for len(cases) < 400 {
		fc := randomFieldCase(r)
		c := mustCompile(t, fc.Spec)
		rw, rh, err := c.ResizedSize(fc.W, fc.H)
		if err != nil {
			continue // an unusable resize (empty output): not a geometry case
		}
		ow, oh, _ := c.FrameSize(fc.W, fc.H)
		n := r.IntN(8)
		boxes := make([]float32, 0, 4*n)
		for i := 0; i < n; i++ {
			x0 := float32(r.Float64()*float64(fc.W)*1.4 - 0.2*float64(fc.W))
			y0 := float32(r.Float64()*float64(fc.H)*1.4 - 0.2*float64(fc.H))
			bw := float32(r.Float64() * float64(fc.W) * 0.6)
			bh := float32(r.Float64() * float64(fc.H) * 0.6)
			switch r.IntN(10) {
			case 0:
				bw = 0
			case 1:
				bw = -bw // inverted
			}
			boxes = append(boxes, x0, y0, x0+bw, y0+bh)
		}
		cases = append(cases, fc)
		inputs = append(inputs, boxes)
		jobs = append(jobs, map[string]any{"w": fc.W, "h": fc.H, "rw": rw, "rh": rh, "ow": ow, "oh": oh,
			"crop": fc.Spec.CropW > 0, "boxes": boxes})
	}
	in, _ := json.Marshal(jobs)
	cmd := exec.Command(pythonPath, "-c", boxesRef)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("numpy reference: %v", err)
	}
	var want []struct {
		Boxes []float64
		Kept  []int
	}
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for i, fc := range cases {
		got, kept, err := mustCompile(t, fc.Spec).MapBoxes(inputs[i], fc.W, fc.H)
		if err != nil {
			t.Fatalf("case %d %+v: %v", i, fc, err)
		}
		dropped += len(inputs[i])/4 - len(kept)
		if len(kept) != len(want[i].Kept) || len(got) != len(want[i].Boxes) {
			t.Fatalf("case %d %+v %dx%d boxes %v: kept %v, numpy %v", i, fc.Spec, fc.W, fc.H, inputs[i], kept, want[i].Kept)
		}
		for k := range kept {
			if kept[k] != want[i].Kept[k] {
				t.Fatalf("case %d: kept %v, numpy %v", i, kept, want[i].Kept)
			}
		}
		for k := range got {
			if got[k] != float32(want[i].Boxes[k]) {
				t.Fatalf("case %d %+v %dx%d: coordinate %d is %v, numpy %v (boxes %v)", i, fc.Spec, fc.W, fc.H, k, got[k], want[i].Boxes[k], inputs[i])
			}
		}
	}
	if dropped == 0 {
		t.Fatal("no box was dropped: the cases do not exercise the crop")
	}
}

func TestMapBoxesEdges(t *testing.T) {
	c := mustCompile(t, Spec{Resize: 10, CropW: 4, CropH: 4})
	// 20x10 source, shorter side 10: resized 20x10, crop 4x4 at (8, 3).
	out, kept, err := c.MapBoxes([]float32{
		8, 3, 12, 7, // exactly the crop
		0, 0, 8, 10, // ends on the crop's left edge: no area
		11, 6, 30, 30, // partly outside: clipped
	}, 20, 10)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := []float32{0, 0, 4, 4, 3, 3, 4, 4}
	if len(kept) != 2 || kept[0] != 0 || kept[1] != 2 {
		t.Fatalf("kept %v", kept)
	}
	for i := range wantOut {
		if out[i] != wantOut[i] {
			t.Fatalf("out %v, want %v", out, wantOut)
		}
	}
	if out, kept, err := c.MapBoxes(nil, 20, 10); err != nil || len(out) != 0 || len(kept) != 0 {
		t.Fatalf("no boxes: %v %v %v", out, kept, err)
	}
	if _, _, err := c.MapBoxes([]float32{1, 2, 3}, 20, 10); err == nil {
		t.Fatal("3 coordinates accepted")
	}
	if _, _, err := c.MapBoxes([]float32{1, 2, float32(math.NaN()), 4}, 20, 10); err == nil {
		t.Fatal("NaN accepted")
	}
	if _, _, err := c.MapBoxes([]float32{1, 2, float32(math.Inf(1)), 4}, 20, 10); err == nil {
		t.Fatal("Inf accepted")
	}
}

// maskRef resizes with Pillow's NEAREST and crops as torchvision's CenterCrop does (zero
// padding), for masks given as raw bytes.
const maskRef = `import sys, json, base64, numpy as np
from PIL import Image
out = []
for job in json.load(sys.stdin):
    w, h, c = job["w"], job["h"], job["c"]
    a = np.frombuffer(base64.b64decode(job["pix"]), dtype=np.uint8).reshape(h, w, c)
    chans = [Image.fromarray(a[:, :, k].copy(), mode="L").resize((job["rw"], job["rh"]), Image.NEAREST) for k in range(c)]
    r = np.stack([np.array(ch) for ch in chans], axis=2)
    ow, oh = job["ow"], job["oh"]
    if job["crop"]:
        rh, rw = r.shape[:2]
        pl, pt = max(0, (ow - rw) // 2), max(0, (oh - rh) // 2)
        pr, pb = max(0, ow - rw - pl), max(0, oh - rh - pt)
        r = np.pad(r, ((pt, pb), (pl, pr), (0, 0)))
        rh, rw = r.shape[:2]
        top, left = int(round((rh - oh) / 2.0)), int(round((rw - ow) / 2.0))
        r = r[top:top + oh, left:left + ow]
    if job["chw"]:
        r = r.transpose(2, 0, 1)
    out.append(base64.b64encode(np.ascontiguousarray(r).tobytes()).decode())
json.dump(out, sys.stdout)
`

// TestMapMaskAgainstPillow: masks of 1 and 3 channels through random resizes and crops, byte
// for byte against Pillow's resize(NEAREST) and the same centre crop.
func TestMapMaskAgainstPillow(t *testing.T) {
	requireNumPy(t)
	r := rand.New(rand.NewPCG(26, 4))
	var jobs []map[string]any
	var cases []fieldCase
	var masks []Image
	// One-pixel edges first (sources, resizes and crops of 1), then random cases.
	edges := []fieldCase{
		{W: 1, H: 1, Spec: Spec{CropW: 1, CropH: 1}},
		{W: 1, H: 7, Spec: Spec{Resize: 1}},
		{W: 7, H: 1, Spec: Spec{Resize: 3, CropW: 1, CropH: 9}},
		{W: 60, H: 1, Spec: Spec{CropW: 1, CropH: 1}},
		{W: 300, H: 5, Spec: Spec{Width: 1, Height: 1}},
		{W: 2, H: 3, Spec: Spec{Resize: 1, CropW: 1, CropH: 1, Layout: CHW}},
	}
	for len(cases) < 150 {
		fc := randomFieldCase(r)
		if len(cases) < len(edges) {
			fc = edges[len(cases)]
		}
		c := mustCompile(t, fc.Spec)
		rw, rh, err := c.ResizedSize(fc.W, fc.H)
		if err != nil {
			continue
		}
		ow, oh, _ := c.FrameSize(fc.W, fc.H)
		ch := 1
		if r.IntN(4) == 0 {
			ch = 3
		}
		m := Image{W: fc.W, H: fc.H, C: ch, Pix: make([]byte, fc.W*fc.H*ch)}
		for i := range m.Pix {
			m.Pix[i] = byte(r.IntN(21)) // class indices, as a segmentation mask holds
		}
		cases = append(cases, fc)
		masks = append(masks, m)
		jobs = append(jobs, map[string]any{"w": fc.W, "h": fc.H, "c": ch, "pix": m.Pix, "rw": rw, "rh": rh,
			"ow": ow, "oh": oh, "crop": fc.Spec.CropW > 0, "chw": fc.Spec.Layout == CHW})
	}
	in, _ := json.Marshal(jobs) // []byte marshals as base64
	cmd := exec.Command(pythonPath, "-c", maskRef)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pillow reference: %v", err)
	}
	var want [][]byte
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for i, fc := range cases {
		c := mustCompile(t, fc.Spec)
		got, w, h, err := c.MapMask(masks[i])
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		ow, oh, _ := c.FrameSize(fc.W, fc.H)
		if w != ow || h != oh {
			t.Fatalf("case %d: mask %dx%d, frame %dx%d", i, w, h, ow, oh)
		}
		if !bytes.Equal(got, want[i]) {
			t.Fatalf("case %d %+v %dx%dx%d: mask differs from Pillow", i, fc.Spec, fc.W, fc.H, masks[i].C)
		}
	}
}

func TestMapMaskRefusesBadInput(t *testing.T) {
	c := mustCompile(t, Spec{Resize: 4})
	if _, _, _, err := c.MapMask(Image{W: 3, H: 3, C: 1, Pix: make([]byte, 8)}); err == nil {
		t.Fatal("a mask with too few bytes was accepted")
	}
	// The mask keeps uint8 and its own channel count whatever the transform's dtype.
	c = mustCompile(t, Spec{Resize: 4, DType: Float32, Mean: []float64{0.5, 0.5, 0.5}, Std: []float64{0.2, 0.2, 0.2}})
	pix, w, h, err := c.MapMask(Image{W: 8, H: 8, C: 1, Pix: bytes.Repeat([]byte{7}, 64)})
	if err != nil || w != 4 || h != 4 || !bytes.Equal(pix, bytes.Repeat([]byte{7}, 16)) {
		t.Fatalf("normalising transform changed the mask: %v %dx%d %v", pix, w, h, err)
	}
}
