package gpu

import "fmt"

// Select resolves a --device choice. It returns the device to resize on (nil for the CPU) and
// a line for the build summary saying which was chosen and why:
//
//	"cpu"   nil, "cpu"
//	"auto"  the first GPU when Probe and Open succeed, "gpu: <Info>, kernels: <KernelImage>";
//	        otherwise nil,
//	        "cpu (auto: <why no GPU>)"
//	"gpu"   the first GPU, or an error wrapping the reason (ErrNoDriver, ErrNoDevice or an
//	        *Error), worded "--device gpu: no usable GPU: ..."
//
// The caller closes the returned Device when the build is done.
func Select(want string) (*Device, string, error) {
	switch want {
	case "cpu":
		return nil, "cpu", nil
	case "auto", "gpu":
	default:
		return nil, "", fmt.Errorf("gpu: unknown device %q (want auto, cpu or gpu)", want)
	}
	d, err := Open(0)
	if err != nil {
		if want == "gpu" {
			return nil, "", fmt.Errorf("--device gpu: no usable GPU: %w", err)
		}
		return nil, fmt.Sprintf("cpu (auto: %v)", err), nil
	}
	return d, "gpu: " + d.Info().String() + ", kernels: " + d.KernelImage(), nil
}
