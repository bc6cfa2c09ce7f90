package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/packer-dev/packer/transforms"
)

// ErrSelfCheck is wrapped by the error SelfCheck returns when the device's bytes differ from
// the CPU's, or the device failed or timed out on the check batch.
var ErrSelfCheck = errors.New("gpu self-check failed")

// DefaultSelfCheckTimeout bounds how long SelfCheck waits for the device.
const DefaultSelfCheckTimeout = 60 * time.Second

// selfCheckSizes are the frames of the check batch: odd and even sizes, up- and downscales
// for any target, portrait and landscape, greyscale and RGB.
var selfCheckSizes = []struct{ w, h, c int }{
	{97, 61, 3}, {640, 480, 3}, {33, 257, 3}, {256, 256, 3}, {1023, 7, 3}, {120, 90, 1},
}

// SelfCheckImages returns the deterministic frames SelfCheck resizes: pseudo-random pixels
// (a fixed xorshift sequence), so every filter tap and rounding step is exercised.
func SelfCheckImages() []transforms.Image {
	var imgs []transforms.Image
	x := uint32(0x9E3779B9)
	for _, s := range selfCheckSizes {
		pix := make([]byte, s.w*s.h*s.c)
		for i := range pix {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			pix[i] = byte(x >> 24)
		}
		imgs = append(imgs, transforms.Image{W: s.w, H: s.h, C: s.c, Pix: pix})
	}
	return imgs
}

// BatchRunner is what SelfCheck tests: Resizer, or anything with its Run.
type BatchRunner interface {
	Run(imgs []transforms.Image, dsts [][]byte) error
}

// frameRunner is a BatchRunner with Resizer.Frame: SelfCheck runs the batch from frames too.
type frameRunner interface {
	BatchRunner
	Frame(n int) (pix []byte, release func())
}

// SelfCheck resizes the check batch (SelfCheckImages) with r and with the CPU reference
// (transforms.Worker.Apply) for spec, and returns nil only if every byte agrees. It returns an
// error wrapping ErrSelfCheck naming the first difference, the device's error, or the timeout
// (0: DefaultSelfCheckTimeout). A build runs it before trusting a GPU it has never proven
// (--device auto falls back to the CPU on failure; --device gpu fails). A device call that
// never returns is abandoned with its goroutine: the caller must not use r afterwards. When r
// has Frame (a Resizer), the batch runs twice, from Go memory (staged) and then copied into
// frames (uploaded straight from them, as a build's frames are), and both must agree.
func SelfCheck(r BatchRunner, spec transforms.Compiled, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultSelfCheckTimeout
	}
	deadline := time.After(timeout)
	var imgs []transforms.Image
	for _, img := range SelfCheckImages() {
		if n := len(spec.Spec().Mean); n > 1 && n != img.C {
			continue // per-channel normalisation for another channel count: not a frame the build sees
		}
		imgs = append(imgs, img)
	}
	want := make([][]byte, len(imgs))
	got := make([][]byte, len(imgs))
	w := spec.NewWorker()
	for i, img := range imgs {
		n := spec.OutputSpec(img.W, img.H, img.C).Size()
		if n <= 0 {
			return fmt.Errorf("%w: no output size for a %dx%dx%d frame", ErrSelfCheck, img.W, img.H, img.C)
		}
		want[i], got[i] = make([]byte, n), make([]byte, n)
		if err := w.Apply(img, want[i]); err != nil {
			return fmt.Errorf("%w: CPU reference: %v", ErrSelfCheck, err)
		}
	}
	if err := selfCheckRun(r, imgs, got, want, deadline, timeout, ""); err != nil {
		return err
	}
	fr, ok := r.(frameRunner)
	if !ok {
		return nil
	}
	in := make([]transforms.Image, len(imgs))
	releases := make([]func(), len(imgs))
	for i, img := range imgs {
		pix, release := fr.Frame(len(img.Pix))
		copy(pix, img.Pix)
		in[i], releases[i] = img, release
		in[i].Pix = pix
		clear(got[i])
	}
	err := selfCheckRun(r, in, got, want, deadline, timeout, " from pinned frames")
	if err != nil && errors.Is(err, errSelfCheckTimeout) {
		return err // the device may still read the frames: they are not released
	}
	for _, release := range releases {
		release()
	}
	return err
}

// errSelfCheckTimeout marks a self-check run abandoned at its deadline.
var errSelfCheckTimeout = errors.New("timed out")

// selfCheckRun runs imgs on r into got and compares with want; what names the run in errors.
func selfCheckRun(r BatchRunner, imgs []transforms.Image, got, want [][]byte, deadline <-chan time.Time, timeout time.Duration, what string) error {
	done := make(chan error, 1)
	go func() { done <- r.Run(imgs, got) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%w%s: %v", ErrSelfCheck, what, err)
		}
	case <-deadline:
		return fmt.Errorf("%w%s: the device did not finish a %d-frame batch in %v (%w)", ErrSelfCheck, what, len(imgs), timeout, errSelfCheckTimeout)
	}
	for i := range imgs {
		if !bytes.Equal(got[i], want[i]) {
			at := 0
			for at < len(got[i]) && got[i][at] == want[i][at] {
				at++
			}
			return fmt.Errorf("%w%s: frame %d (%dx%dx%d): byte %d is %d on the device, %d on the CPU",
				ErrSelfCheck, what, i, imgs[i].W, imgs[i].H, imgs[i].C, at, got[i][at], want[i][at])
		}
	}
	return nil
}
