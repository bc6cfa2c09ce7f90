package gpu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeDeviceName is the device name testdata/fakecuda reports.
const fakeDeviceName = "Fake CUDA Device 0"

var fakeDir string // temporary directory of the fake driver, removed by TestMain

func TestMain(m *testing.M) {
	code := m.Run()
	if fakeDir != "" {
		os.RemoveAll(fakeDir)
	}
	os.Exit(code)
}

// fakeDriver compiles testdata/fakecuda/fakecuda.c (a host implementation of the driver
// entry points that runs the kernels' bodies) into a shared library and binds it exactly as
// libcuda.so.1 would be bound, once per test binary.
var fakeDriver = sync.OnceValues(func() (*driver, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return nil, fmt.Errorf("no C compiler to build the fake driver: %w", err)
	}
	dir, err := os.MkdirTemp("", "packer-fakecuda")
	if err != nil {
		return nil, err
	}
	fakeDir = dir
	lib := filepath.Join(dir, "libfakecuda.so.1")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-Wno-unused-parameter",
		"-Ikernels", "-o", lib, "testdata/fakecuda/fakecuda.c", "-lpthread").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("build the fake driver: %v\n%s", err, out)
	}
	return openDriver(lib)
})

// openFakeDevice opens the fake driver's device. Close reports leaked allocations.
func openFakeDevice(t *testing.T) *Device {
	t.Helper()
	drv, err := fakeDriver()
	if err != nil {
		t.Skipf("fake CUDA driver unavailable: %v", err)
	}
	d, err := openDevice(drv, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// TestFakeDriver runs every device test against the fake driver: the binding's calls
// (argument passing through purego, cuLaunchKernel's parameter array, the JIT log buffers),
// the owner-thread rule (the fake refuses calls from any other thread), event polling, the
// Resizer's batching, weight pool and buffers, and the pinned allocator, all on the CPU. Only
// the device itself is missing: the kernels run as the CPU harness does.
func TestFakeDriver(t *testing.T) {
	for _, c := range deviceTests {
		t.Run(c.name, func(t *testing.T) { c.fn(t, openFakeDevice(t)) })
	}
}

// TestFakeDriverErrors: calls that fail in the driver come back as *Error with the call and
// the CUresult name, from the table or from cuGetErrorName.
func TestFakeDriverErrors(t *testing.T) {
	d := openFakeDevice(t)
	if _, err := openDevice(d.drv, 1); !errors.Is(err, ErrNoDevice) {
		t.Errorf("device 1 of 1: %v, want ErrNoDevice", err)
	}
	// A second context on the fake is refused by cuCtxCreate.
	_, err := openDevice(d.drv, 0)
	var ce *Error
	if !errors.As(err, &ce) || ce.Call != "cuCtxCreate_v2" || ce.Code.String() != "CUDA_ERROR_CONTEXT_ALREADY_IN_USE" {
		t.Errorf("second context: %v", err)
	}
	err = d.Do(func() error {
		var fn uintptr
		return check("cuModuleGetFunction", d.drv.cuModuleGetFunction(&fn, d.mod, "no_such_kernel"))
	})
	if err == nil || err.Error() != "gpu: cuModuleGetFunction: CUDA_ERROR_NOT_FOUND (500)" {
		t.Errorf("missing kernel: %v", err)
	}
	// The driver is called from the owner thread only: the fake would refuse others.
	var free int64
	if err := d.Do(func() error { var err error; free, _, err = d.MemInfo(); return err }); err != nil || free <= 0 {
		t.Errorf("MemInfo: %d, %v", free, err)
	}
	var mod uintptr
	if r := d.drv.cuModuleGetFunction(new(uintptr), mod, "packer_hpass"); r != 201 {
		t.Errorf("the fake accepted a call from a thread that does not own the context (%d)", r)
	}
	if got := Result(4242).String(); got != "CUresult(4242)" && !strings.HasPrefix(got, "CUDA_ERROR") {
		t.Errorf("Result(4242) = %q", got)
	}
	if err := d.Do(func() error { return d.Launch(kernelVPass, Dim{1, 1, 1}, Dim{1, 1, 1}, 0, hpassParams(0, 0, 0, 0)) }); err == nil {
		t.Error("Launch with the wrong argument list: no error")
	}
}
