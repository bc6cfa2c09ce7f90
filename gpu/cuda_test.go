package gpu

import (
	"errors"
	"strings"
	"testing"
)

// TestNoDriver: on a machine without libcuda.so.1, Probe, Open and DriverVersion report a
// clear error wrapping ErrNoDriver (the binding's own case, a library that is not there, is
// TestOpenMissing in gpu/internal/cuda).
func TestNoDriver(t *testing.T) {
	info, err := Probe()
	if err == nil {
		t.Skipf("a CUDA device is present (%v): the no-driver path is covered by gpu/internal/cuda's TestOpenMissing", info)
	}
	t.Logf("Probe: %v", err)
	if errors.Is(err, ErrNoDriver) {
		if !strings.HasPrefix(err.Error(), "gpu: CUDA driver not available: dlopen libcuda.so.1: ") {
			t.Errorf("Probe error message: %q", err)
		}
		if _, err := Open(0); !errors.Is(err, ErrNoDriver) {
			t.Errorf("Open without a driver: %v", err)
		}
		if _, err := DriverVersion(); !errors.Is(err, ErrNoDriver) {
			t.Errorf("DriverVersion without a driver: %v", err)
		}
	}
}

// TestParamSizes checks the argument encodings the launcher passes to cuLaunchKernel.
func TestParamSizes(t *testing.T) {
	p := PtrArg(0x1122334455667788)
	if p.Size() != 8 || p.b != [8]byte{0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11} {
		t.Errorf("PtrArg: %+v", p)
	}
	q := Int32Arg(-2)
	if q.Size() != 4 || q.b != [8]byte{0xfe, 0xff, 0xff, 0xff} {
		t.Errorf("Int32Arg: %+v", q)
	}
}

// TestSelect: --device auto falls back to the CPU saying why, --device gpu fails clearly.
func TestSelect(t *testing.T) {
	if _, err := Probe(); err == nil {
		t.Skip("a CUDA device is present: Select would pick it (covered by the device tests)")
	}
	d, summary, err := Select("cpu")
	if d != nil || summary != "cpu" || err != nil {
		t.Errorf("Select(cpu) = %v, %q, %v", d, summary, err)
	}
	d, summary, why, err := SelectWhy("auto")
	if d != nil || err != nil || why == nil || summary != map[bool]string{true: "cpu (no CUDA driver)", false: "cpu (no GPU)"}[errors.Is(why, ErrNoDriver)] {
		t.Errorf("SelectWhy(auto) = %v, %q, %v, %v", d, summary, why, err)
	}
	t.Logf("auto: %s: %v", summary, why)
	d, _, err = Select("gpu")
	if d != nil || err == nil || !strings.HasPrefix(err.Error(), "--device gpu: no usable GPU: gpu: ") {
		t.Errorf("Select(gpu) = %v, %v", d, err)
	}
	if errors.Is(err, ErrNoDriver) {
		t.Logf("gpu: %v", err)
	} else if !errors.Is(err, ErrNoDevice) {
		t.Errorf("Select(gpu) error wraps neither ErrNoDriver nor ErrNoDevice: %v", err)
	}
	if _, _, err := Select("tpu"); err == nil {
		t.Error("Select(tpu): no error")
	}
}
