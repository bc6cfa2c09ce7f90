package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/packer-dev/packer/gpu"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// selfCheckTimeout bounds the start-up self-check of a GPU.
var selfCheckTimeout = gpu.DefaultSelfCheckTimeout

// openDevice resolves --device: it returns the batch resizer to use (nil for the CPU), a line
// for the summary saying where resizing runs and why, and a function releasing the device.
// --device gpu fails with the reason when no GPU can be used; auto falls back to the CPU.
//
// A GPU is used only after it passed gpu.SelfCheck on this machine, for this build's transform:
// a small batch resized on the device and on the CPU must agree byte for byte. On any
// difference, error or timeout, auto falls back to the CPU with the reason in the summary and
// gpu fails. The bytes of the output are the CPU's either way; the check keeps an unproven
// device or driver from changing them.
func openDevice(want string, spec transforms.Compiled, verbose bool) (pipeline.BatchResizer, string, func(), error) {
	dev, summary, why, err := gpu.SelectWhy(want)
	if err != nil {
		return nil, "", func() {}, err
	}
	if dev == nil {
		if verbose && why != nil {
			summary += ": " + why.Error()
		}
		return nil, summary, func() {}, nil
	}
	fail := func(err error) (pipeline.BatchResizer, string, func(), error) {
		if want == "gpu" {
			return nil, "", func() {}, fmt.Errorf("--device gpu: %w", err)
		}
		return nil, "cpu (auto: " + err.Error() + ")", func() {}, nil
	}
	rs, err := gpu.NewResizer(dev, spec, gpu.ResizerOptions{})
	if err != nil {
		dev.Close()
		return fail(err)
	}
	start := time.Now()
	if err := gpu.SelfCheck(rs, spec, selfCheckTimeout); err != nil {
		if !errors.Is(err, gpu.ErrSelfCheck) || time.Since(start) < selfCheckTimeout {
			rs.Close()
			dev.Close()
		} // else: the device call may still run; leave the device to the process's exit
		return fail(err)
	}
	return windowResizer{rs}, summary + " (self-check passed)", func() { rs.Close(); dev.Close() }, nil
}

// windowResizer gives the pipeline gpu.Resizer as a pipeline.WindowResizer, so that region
// decoding stays on the CPU with --device gpu: sources decode only the part of each image the
// transform reads, and the device gets that window with its place in the image.
type windowResizer struct{ *gpu.Resizer }

var _ pipeline.WindowResizer = windowResizer{}

// The batch workers copy decoded frames straight into the Resizer's pinned frames.
var _ pipeline.FrameStager = windowResizer{}

func (w windowResizer) RunWindows(imgs []transforms.Image, wins []source.Window, dsts [][]byte) error {
	gw := make([]gpu.Window, len(wins))
	for i, x := range wins {
		gw[i] = gpu.Window(x)
	}
	return w.Resizer.RunWindows(imgs, gw, dsts)
}
