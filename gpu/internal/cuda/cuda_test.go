package cuda

import (
	"errors"
	"strings"
	"testing"
)

// TestOpenMissing: without the library the binding reports a clear, typed error (and never
// crashes or exits, unlike a binary linked with -lcuda).
func TestOpenMissing(t *testing.T) {
	_, err := Open("libpacker-no-such-driver.so.1")
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Open of a missing library: %v, want ErrNoDriver", err)
	}
	if !strings.HasPrefix(err.Error(), "gpu: CUDA driver not available: dlopen libpacker-no-such-driver.so.1: ") {
		t.Errorf("error message: %q", err)
	}
}

// TestErrorNames: CUresults print by their cuda.h names, and a failed call is an *Error naming
// the call and the result.
func TestErrorNames(t *testing.T) {
	for code, want := range map[Result]string{
		0: "CUDA_SUCCESS", 2: "CUDA_ERROR_OUT_OF_MEMORY", 100: "CUDA_ERROR_NO_DEVICE",
		218: "CUDA_ERROR_INVALID_PTX", 700: "CUDA_ERROR_ILLEGAL_ADDRESS", 999: "CUDA_ERROR_UNKNOWN",
	} {
		if got := code.String(); got != want {
			t.Errorf("Result(%d) = %q, want %q", code, got, want)
		}
	}
	err := Check("cuMemAlloc_v2", 2)
	// With a driver loaded (an earlier test on a GPU machine), its cuGetErrorString text follows
	// in parentheses.
	if text, want := err.Error(), "gpu: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)"; text != want &&
		!(errorString.Load() != nil && strings.HasPrefix(text, want+" (") && strings.HasSuffix(text, ")")) {
		t.Errorf("error text %q, want %q (and the driver's description in parentheses when one is loaded)", text, want)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Call != "cuMemAlloc_v2" || ce.Code != 2 {
		t.Errorf("errors.As: %+v", ce)
	}
	if !errors.Is(Check("cuDeviceGetCount", 100), ErrNoDevice) {
		t.Error("CUDA_ERROR_NO_DEVICE is not ErrNoDevice")
	}
	if Check("cuInit", 0) != nil {
		t.Error("CUDA_SUCCESS is an error")
	}
	e := &Error{Call: "cuModuleLoadDataEx", Code: 218, Detail: "JIT error log: ptxas fatal"}
	if !strings.Contains(e.Error(), "CUDA_ERROR_INVALID_PTX (218): JIT error log: ptxas fatal") {
		t.Errorf("detail missing: %q", e)
	}
}
