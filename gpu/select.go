package gpu

import (
	"errors"
	"fmt"
)

// Select resolves a --device choice. It returns the device to resize on (nil for the CPU) and
// a line for the build summary saying which was chosen and why:
//
//	"cpu"   nil, "cpu"
//	"auto"  the first GPU when Probe and Open succeed, "gpu: <Info>, kernels: <KernelImage>";
//	        otherwise nil and "cpu (no CUDA driver)", "cpu (no GPU)", or
//	        "cpu (auto: <why no GPU>)" for any other reason"
//	"gpu"   the first GPU, or an error wrapping the reason (ErrNoDriver, ErrNoDevice or an
//	        *Error), worded "--device gpu: no usable GPU: ..."
//
// The caller closes the returned Device when the build is done. SelectWhy also returns why
// --device auto fell back to the CPU (the full error, for a verbose summary).
func Select(want string) (*Device, string, error) {
	d, summary, _, err := SelectWhy(want)
	return d, summary, err
}

// SelectWhy is Select, with the reason --device auto chose the CPU (nil otherwise).
func SelectWhy(want string) (*Device, string, error, error) {
	switch want {
	case "cpu":
		return nil, "cpu", nil, nil
	case "auto", "gpu":
	default:
		return nil, "", nil, fmt.Errorf("gpu: unknown device %q (want auto, cpu or gpu)", want)
	}
	d, err := Open(0)
	if err != nil {
		if want == "gpu" {
			return nil, "", nil, fmt.Errorf("--device gpu: no usable GPU: %w", err)
		}
		switch {
		case errors.Is(err, ErrNoDriver):
			return nil, "cpu (no CUDA driver)", err, nil
		case errors.Is(err, ErrNoDevice):
			return nil, "cpu (no GPU)", err, nil
		}
		return nil, fmt.Sprintf("cpu (auto: %v)", err), err, nil
	}
	return d, "gpu: " + d.Info().String() + ", kernels: " + d.KernelImage(), nil, nil
}
