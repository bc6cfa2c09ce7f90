package gpu

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/transforms"
)

// cpuRunner is a BatchRunner on the CPU reference, with an optional fault.
type cpuRunner struct {
	spec  transforms.Spec
	flip  bool          // change one output byte
	fail  error         // return this error
	stall time.Duration // sleep before answering
}

func (c cpuRunner) Run(imgs []transforms.Image, dsts [][]byte) error {
	time.Sleep(c.stall)
	if c.fail != nil {
		return c.fail
	}
	w := c.spec.NewWorker()
	for i, img := range imgs {
		if err := w.Apply(img, dsts[i]); err != nil {
			return err
		}
	}
	if c.flip {
		dsts[len(dsts)/2][len(dsts[len(dsts)/2])/3] ^= 1
	}
	return nil
}

var selfCheckSpecs = []transforms.Spec{
	{Resize: 64, CropW: 56, CropH: 56, Filter: "bilinear", Layout: "hwc", DType: "uint8"},
	{Width: 300, Height: 200, Filter: "lanczos", Layout: "chw", DType: "float16", Mean: []float64{0.5, 0.4, 0.3}, Std: []float64{0.2, 0.2, 0.2}},
	{Resize: 17, Filter: "nearest", Layout: "hwc", DType: "float32"},
}

func TestSelfCheckCatches(t *testing.T) {
	for _, spec := range selfCheckSpecs {
		if err := spec.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := SelfCheck(cpuRunner{spec: spec}, spec, 0); err != nil {
			t.Errorf("%+v: a faithful runner failed: %v", spec, err)
		}
		err := SelfCheck(cpuRunner{spec: spec, flip: true}, spec, 0)
		if !errors.Is(err, ErrSelfCheck) || !strings.Contains(err.Error(), "on the device") {
			t.Errorf("%+v: one flipped byte: got %v", spec, err)
		}
		if err := SelfCheck(cpuRunner{spec: spec, fail: errors.New("launch failed")}, spec, 0); !errors.Is(err, ErrSelfCheck) || !strings.Contains(err.Error(), "launch failed") {
			t.Errorf("%+v: device error: got %v", spec, err)
		}
	}
	spec := selfCheckSpecs[0]
	if err := SelfCheck(cpuRunner{spec: spec, stall: time.Second}, spec, 50*time.Millisecond); !errors.Is(err, ErrSelfCheck) || !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("stalled device: got %v", err)
	}
}

// testSelfCheckResizer runs the self-check on a real Resizer (the fake driver on the CPU, a
// GPU where there is one): it must pass for every filter.
func testSelfCheckResizer(t *testing.T, d *Device) {
	for _, f := range []string{"nearest", "box", "bilinear", "hamming", "bicubic", "lanczos"} {
		spec := transforms.Spec{Resize: 48, CropW: 40, CropH: 44, Filter: f, Layout: "hwc", DType: "uint8"}
		rs, err := NewResizer(d, spec, ResizerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := SelfCheck(rs, spec, 0); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		rs.Close()
	}
}
