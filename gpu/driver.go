package gpu

import "github.com/packer-dev/packer/gpu/internal/cuda"

// DriverLibrary is the shared library the binding opens on first use.
const DriverLibrary = cuda.DriverLibrary

// ErrNoDriver is returned (wrapped, with the dlopen or symbol error) when the CUDA driver
// library cannot be loaded: the machine has no NVIDIA driver. It does not mean bad input.
var ErrNoDriver = cuda.ErrNoDriver

// ErrNoDevice is returned (wrapped) when the driver loads but reports no usable device.
var ErrNoDevice = cuda.ErrNoDevice

// Result is a CUresult, the status code of every CUDA driver call.
type Result = cuda.Result

// Error is a failed CUDA driver call: the call's name and the CUresult it returned, plus
// details where the driver gives any (the JIT log of a module load).
type Error = cuda.Error

// DriverVersion returns the CUDA version the driver supports, as 1000*major + 10*minor.
func DriverVersion() (int, error) { return cuda.DriverVersion() }
