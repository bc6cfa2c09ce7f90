package main

import (
	"github.com/packer-dev/packer/gpu"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/transforms"
)

// openDevice resolves --device: it returns the batch resizer to use (nil for the CPU), a line
// for the summary saying where resizing runs and why, and a function releasing the device.
// --device gpu fails with the reason when no GPU can be used; auto falls back to the CPU.
func openDevice(want string, spec transforms.Spec) (pipeline.BatchResizer, string, func(), error) {
	dev, summary, err := gpu.Select(want)
	if err != nil {
		return nil, "", func() {}, err
	}
	if dev == nil {
		return nil, summary, func() {}, nil
	}
	rs, err := gpu.NewResizer(dev, spec, gpu.ResizerOptions{})
	if err != nil {
		dev.Close()
		if want == "gpu" {
			return nil, "", func() {}, err
		}
		return nil, "cpu (auto: " + err.Error() + ")", func() {}, nil
	}
	return rs, summary, func() { rs.Close(); dev.Close() }, nil
}
