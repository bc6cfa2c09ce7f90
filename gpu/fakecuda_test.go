package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/packer-dev/packer/gpu/internal/cuda"
	"github.com/packer-dev/packer/transforms"
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
var fakeDriver = sync.OnceValues(func() (*cuda.Driver, error) {
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
	args := []string{"-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-Wno-unused-parameter",
		"-Ikernels", "-o", lib, "testdata/fakecuda/fakecuda.c", "-lpthread"}
	if os.Getenv(fakeASanEnv) == "1" {
		args = append(args, "-fsanitize=address", "-fno-omit-frame-pointer", "-g")
	}
	out, err := exec.Command(cc, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("build the fake driver: %v\n%s", err, out)
	}
	return cuda.Open(lib)
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
		return cuda.Check("cuModuleGetFunction", d.drv.ModuleGetFunction(&fn, d.mod, "no_such_kernel"))
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
	if r := d.drv.ModuleGetFunction(new(uintptr), mod, "packer_hpass"); r != 201 {
		t.Errorf("the fake accepted a call from a thread that does not own the context (%d)", r)
	}
	if got := Result(4242).String(); got != "CUresult(4242)" && !strings.HasPrefix(got, "CUDA_ERROR") {
		t.Errorf("Result(4242) = %q", got)
	}
	if err := d.Do(func() error { return d.Launch(kernelVPass, Dim{1, 1, 1}, Dim{1, 1, 1}, 0, hpassParams(0, 0, 0, 0)) }); err == nil {
		t.Error("Launch with the wrong argument list: no error")
	}
}

// fakeControl binds the fake driver's test hooks: fakecuda_fail (make the nth next call of
// an entry point return a code) and fakecuda_queued (operations enqueued and not yet run).
var fakeControl = sync.OnceValues(func() (*fakeHooks, error) {
	if _, err := fakeDriver(); err != nil {
		return nil, err
	}
	h, err := purego.Dlopen(filepath.Join(fakeDir, "libfakecuda.so.1"), purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, err
	}
	var k fakeHooks
	purego.RegisterLibFunc(&k.fail, h, "fakecuda_fail")
	purego.RegisterLibFunc(&k.queued, h, "fakecuda_queued")
	purego.RegisterLibFunc(&k.calls, h, "fakecuda_calls")
	purego.RegisterLibFunc(&k.setDevice, h, "fakecuda_set_device")
	purego.RegisterLibFunc(&k.loaded, h, "fakecuda_loaded")
	purego.RegisterLibFunc(&k.scribbled, h, "fakecuda_scribbled")
	purego.RegisterLibFunc(&k.maxBusy, h, "fakecuda_max_busy")
	purego.RegisterLibFunc(&k.writeCombined, h, "fakecuda_write_combined")
	return &k, nil
})

type fakeHooks struct {
	fail      func(call string, nth int32, code int32)
	queued    func() int32
	calls     func(call string) int64
	setDevice func(major, minor, jit int32)
	loaded    func() int32
	scribbled func() int64
	maxBusy   func() int32
	// writeCombined reports whether [p, p+n) is write-combined pinned memory.
	writeCombined func(p *byte, n uintptr) int32
}

// TestFakeDriverFailures: a driver call that fails part-way through enqueueing a batch, or
// while waiting for it, makes Run fail with the call's name, and Run returns only once
// nothing it enqueued can still run (the fake's streams are idle), so the slot it gives back
// is safe to reuse; the next Run on the same slot gives the CPU path's bytes.
func TestFakeDriverFailures(t *testing.T) {
	d := openFakeDevice(t)
	k, err := fakeControl()
	if err != nil {
		t.Fatal(err)
	}
	spec := transforms.Spec{Resize: 40, CropW: 32, CropH: 32}
	rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	r := rand.New(rand.NewPCG(3, 3))
	imgs := []transforms.Image{randomImage(r, 90, 70, 3), randomImage(r, 64, 120, 3)}
	// Batches order their work by their own stream alone: no synchronous copy on the
	// legacy default stream, no context-wide wait.
	syncCopies, ctxSyncs := k.calls("cuMemcpyHtoD_v2"), k.calls("cuCtxSynchronize")
	defer func() {
		if n := k.calls("cuMemcpyHtoD_v2") - syncCopies; n != 0 {
			t.Errorf("Run made %d synchronous copies", n)
		}
		if n := k.calls("cuCtxSynchronize") - ctxSyncs; n != 0 {
			t.Errorf("Run called cuCtxSynchronize %d times", n)
		}
	}()
	want := make([][]byte, len(imgs))
	for i, im := range imgs {
		want[i] = make([]byte, 32*32*3)
		if err := spec.MustCompile().NewWorker().Apply(im, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		call string
		nth  int32
	}{
		{"cuMemcpyHtoDAsync_v2", 1}, {"cuMemcpyHtoDAsync_v2", 2}, {"cuLaunchKernel", 1},
		{"cuLaunchKernel", 2}, {"cuMemcpyDtoHAsync_v2", 1}, {"cuEventRecord", 1}, {"cuEventQuery", 1},
	} {
		k.fail(c.call, c.nth, 719)
		got := [][]byte{make([]byte, len(want[0])), make([]byte, len(want[1]))}
		err := rs.Run(imgs, got)
		k.fail("", 0, 0)
		var ce *Error
		if !errors.As(err, &ce) || ce.Call != c.call || ce.Code != 719 {
			t.Errorf("%s #%d failing: Run returned %v", c.call, c.nth, err)
		}
		if n := k.queued(); n != 0 {
			t.Errorf("%s #%d failing: Run returned with %d operations still queued", c.call, c.nth, n)
		}
		if err := rs.Run(imgs, got); err != nil {
			t.Fatalf("after %s #%d failed: %v", c.call, c.nth, err)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("after %s #%d failed: image %d differs from the CPU path", c.call, c.nth, i)
			}
		}
	}
	// A stream that cannot be waited for after a failure retires its slot: later Runs fail,
	// naming why, and Close still frees everything.
	k.fail("cuLaunchKernel", 1, 719)
	k.fail("cuStreamSynchronize", 1, 999)
	got := [][]byte{make([]byte, len(want[0])), make([]byte, len(want[1]))}
	if err := rs.Run(imgs, got); err == nil || !strings.Contains(err.Error(), "cuStreamSynchronize") {
		t.Errorf("launch and stream wait failing: Run returned %v", err)
	}
	k.fail("", 0, 0)
	if err := rs.Run(imgs, got); err == nil || !strings.Contains(err.Error(), "stream unusable") {
		t.Errorf("Run on a retired slot: %v", err)
	}
}

// fakeASanEnv, set to 1, builds the fake driver with AddressSanitizer. The test binary must
// then run with the sanitizer's runtime preloaded (TestFakeDriverASan does both).
const fakeASanEnv = "PACKER_FAKECUDA_ASAN"

// TestFakeDriverASan runs the fake-driver tests again in a child test process, with the fake
// built by AddressSanitizer and libasan preloaded (a sanitized library loaded by dlopen into
// an unsanitized Go program needs the runtime in place first): a kernel or copy that reads or
// writes outside a device or pinned buffer, or uses one after it is freed, aborts the child
// with the sanitizer's report. Skipped where the C compiler has no libasan, and under -race.
func TestFakeDriverASan(t *testing.T) {
	if os.Getenv(fakeASanEnv) == "1" {
		t.Skip("already the sanitized child")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	if raceEnabled {
		// The child would be a race-detector binary too, and ThreadSanitizer's and
		// AddressSanitizer's runtimes cannot share a process: run go test without -race.
		t.Skip("AddressSanitizer cannot run in a -race test binary; covered by go test without -race")
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	out, err := exec.Command(cc, "-print-file-name=libasan.so").Output()
	asan := strings.TrimSpace(string(out))
	if err != nil || !filepath.IsAbs(asan) {
		t.Skipf("no libasan from %s: %v", cc, err)
	}
	if _, err := os.Stat(asan); err != nil {
		t.Skipf("no libasan: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFakeDriver", "-test.count=1")
	cmd.Env = append(os.Environ(), fakeASanEnv+"=1", "LD_PRELOAD="+asan,
		// Go's runtime allocates outside malloc; leak checking would report the Go heap.
		"ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fake-driver tests under AddressSanitizer: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("fake-driver tests under AddressSanitizer did not pass:\n%s", out)
	}
	t.Logf("%s", out)
}

// TestFakeDriverKernelImage: Open loads the embedded cubin for the device's compute
// capability first (so a driver without a PTX JIT still runs the kernels), falls back to the
// PTX where there is no cubin or the driver refuses it, and fails with both reasons when
// neither loads. The fake says which image it was given.
func TestFakeDriverKernelImage(t *testing.T) {
	drv, err := fakeDriver()
	if err != nil {
		t.Skipf("fake CUDA driver unavailable: %v", err)
	}
	k, err := fakeControl()
	if err != nil {
		t.Fatal(err)
	}
	defer k.setDevice(9, 0, 1)
	for _, c := range []struct {
		major, minor, jit int32
		failCubin         bool
		image             string // "" for an error
		loaded            int32  // 1 cubin, 0 PTX
	}{
		{9, 0, 0, false, "sm_90 cubin", 1},
		{8, 0, 0, false, "sm_80 cubin", 1},
		{8, 6, 0, false, "sm_80 cubin", 1},
		{7, 5, 1, false, "PTX", 0},
		{9, 0, 1, true, "PTX", 0},
		{7, 5, 0, false, "", 0},
		{8, 9, 0, true, "", 0},
	} {
		k.setDevice(c.major, c.minor, c.jit)
		if c.failCubin {
			k.fail("cuModuleLoadDataEx", 1, 209) // CUDA_ERROR_NO_BINARY_FOR_GPU
		}
		d, err := openDevice(drv, 0)
		k.fail("", 0, 0)
		name := fmt.Sprintf("%d.%d jit=%d failCubin=%v", c.major, c.minor, c.jit, c.failCubin)
		if c.image == "" {
			if err == nil {
				d.Close()
				t.Errorf("%s: opened with %s, want an error", name, d.KernelImage())
			} else if !strings.Contains(err.Error(), "CUDA_ERROR_JIT_COMPILER_NOT_FOUND") {
				t.Errorf("%s: %v, want the JIT's absence named", name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := d.KernelImage(); got != c.image || k.loaded() != c.loaded {
			t.Errorf("%s: KernelImage %q, fake loaded kind %d; want %q, %d", name, got, k.loaded(), c.image, c.loaded)
		}
		if err := d.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
	}
}

// TestFakeDriverErrorText: a failed call's error carries the driver's description
// (cuGetErrorString), and a cosmetic attribute the driver cannot read leaves Info's field 0
// instead of failing Open.
func TestFakeDriverErrorText(t *testing.T) {
	d := openFakeDevice(t)
	k, err := fakeControl()
	if err != nil {
		t.Fatal(err)
	}
	err = cuda.Check("cuMemAlloc_v2", 4242)
	if err == nil || !strings.HasPrefix(err.Error(), "gpu: cuMemAlloc_v2: ") ||
		!strings.HasSuffix(err.Error(), " (4242) (the fake's own failure)") {
		t.Errorf("error text: %v", err)
	}
	k.fail("cuDeviceGetAttribute(cosmetic)", 1, 1)
	info, err := deviceInfo(d.drv, 0)
	k.fail("", 0, 0)
	if err != nil || info.SMs != 0 || info.Major != 9 || info.MemoryClockKHz == 0 {
		t.Errorf("an unreadable SM count: %+v, %v", info, err)
	}
}
