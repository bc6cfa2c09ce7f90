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
	flip  bool            // change one output byte
	fail  error           // return this error
	stall <-chan struct{} // when set, wait until it is closed before answering (a device that never finishes)
}

func (c cpuRunner) Run(imgs []transforms.Image, dsts [][]byte) error {
	if c.stall != nil {
		<-c.stall
	}
	if c.fail != nil {
		return c.fail
	}
	w := c.spec.MustCompile().NewWorker()
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

// framesRunner is cpuRunner with Frame (Go memory), which changes one output byte of every
// call after the first (the run from frames).
type framesRunner struct {
	cpuRunner
	calls  *int
	frames *int
}

func (f framesRunner) Run(imgs []transforms.Image, dsts [][]byte) error {
	*f.calls++
	c := f.cpuRunner
	c.flip = *f.calls > 1
	return c.Run(imgs, dsts)
}

func (f framesRunner) Frame(n int) ([]byte, func()) {
	*f.frames++
	return make([]byte, n), func() { *f.frames-- }
}

var selfCheckSpecs = []transforms.Spec{
	{Resize: 64, CropW: 56, CropH: 56, Filter: transforms.Bilinear, Layout: transforms.HWC, DType: transforms.Uint8},
	{Width: 300, Height: 200, Filter: transforms.Lanczos, Layout: transforms.CHW, DType: transforms.Float16, Mean: []float64{0.5, 0.4, 0.3}, Std: []float64{0.2, 0.2, 0.2}},
	{Resize: 17, Filter: transforms.Nearest, Layout: transforms.HWC, DType: transforms.Float32},
}

func TestSelfCheckCatches(t *testing.T) {
	for _, spec := range selfCheckSpecs {
		if _, err := spec.Compile(); err != nil {
			t.Fatal(err)
		}
		if err := SelfCheck(cpuRunner{spec: spec}, spec.MustCompile(), 0); err != nil {
			t.Errorf("%+v: a faithful runner failed: %v", spec, err)
		}
		err := SelfCheck(cpuRunner{spec: spec, flip: true}, spec.MustCompile(), 0)
		if !errors.Is(err, ErrSelfCheck) || !strings.Contains(err.Error(), "on the device") {
			t.Errorf("%+v: one flipped byte: got %v", spec, err)
		}
		if err := SelfCheck(cpuRunner{spec: spec, fail: errors.New("launch failed")}, spec.MustCompile(), 0); !errors.Is(err, ErrSelfCheck) || !strings.Contains(err.Error(), "launch failed") {
			t.Errorf("%+v: device error: got %v", spec, err)
		}
	}
	// A runner with frames runs the batch from them too: a difference there alone is caught,
	// and every frame is released.
	spec := selfCheckSpecs[0]
	calls, frames := 0, 0
	err := SelfCheck(framesRunner{cpuRunner: cpuRunner{spec: spec}, calls: &calls, frames: &frames}, spec.MustCompile(), 0)
	if !errors.Is(err, ErrSelfCheck) || !strings.Contains(err.Error(), "from pinned frames") || calls != 2 || frames != 0 {
		t.Errorf("a difference from frames: got %v after %d runs, %d frames not released", err, calls, frames)
	}
	stall := make(chan struct{})
	defer close(stall)
	if err := SelfCheck(cpuRunner{spec: spec, stall: stall}, spec.MustCompile(), 50*time.Millisecond); !errors.Is(err, ErrSelfCheck) || !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("stalled device: got %v", err)
	}
}

// testSelfCheckResizer runs the self-check on a real Resizer (the fake driver on the CPU, a
// GPU where there is one): it must pass for every filter.
func testSelfCheckResizer(t *testing.T, d *Device) {
	for _, f := range []transforms.Filter{transforms.Nearest, transforms.Box, transforms.Bilinear, transforms.Hamming, transforms.Bicubic, transforms.Lanczos} {
		spec := transforms.Spec{Resize: 48, CropW: 40, CropH: 44, Filter: f, Layout: transforms.HWC, DType: transforms.Uint8}
		rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		staged := hostStaged.Load()
		if err := SelfCheck(rs, spec.MustCompile(), 0); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		// Twice: staged from Go memory, then from pinned frames, which are not staged.
		if n := hostStaged.Load() - staged; n != int64(len(SelfCheckImages())) {
			t.Errorf("%s: %d images staged, want %d (the run from Go memory only)", f, n, len(SelfCheckImages()))
		}
		if _, used, _ := rs.frames.stats(); used != 0 {
			t.Errorf("%s: %d frame bytes not released", f, used)
		}
		rs.Close()
	}
}
