package main

import "errors"

// errNoGPU is returned for --device gpu when no usable CUDA driver and device are present.
var errNoGPU = errors.New("--device gpu: no usable GPU: GPU resizing is not available in this build")

// resolveDevice decides where resizing runs and names it for the summary.
func resolveDevice(want string) (string, error) {
	switch want {
	case "gpu":
		return "", errNoGPU
	case "auto":
		return "cpu (auto: no GPU support)", nil
	}
	return "cpu", nil
}
