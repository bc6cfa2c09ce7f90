// Package cuda is the binding of the CUDA driver API that package gpu uses: it opens
// libcuda.so.1 with dlopen through purego on first use (never at package initialisation, so a
// binary without a driver still runs), binds every entry point gpu calls (Driver, one field per
// function, named without the cu prefix), names CUresults and turns a failed call into an
// *Error. It is the only package of the module that imports purego, and it holds no state but
// the loaded library; contexts, memory, streams and launches are package gpu's. Errors read
// "gpu: ...", as gpu has always worded them: gpu re-exports ErrNoDriver, ErrNoDevice, Error
// and Result.
package cuda

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DriverLibrary is the shared library the binding opens on first use.
const DriverLibrary = "libcuda.so.1"

// ErrNoDriver is returned (wrapped, with the dlopen or symbol error) when the CUDA driver
// library cannot be loaded: the machine has no NVIDIA driver. It does not mean bad input.
var ErrNoDriver = errors.New("gpu: CUDA driver not available")

// ErrNoDevice is returned (wrapped) when the driver loads but reports no usable device.
var ErrNoDevice = errors.New("gpu: no CUDA device")

// Result is a CUresult, the status code of every CUDA driver call.
type Result int32

// resultNames are the CUresult names of cuda.h (CUDA 12). Codes not listed here are named
// through cuGetErrorName when the driver is loaded, and by number otherwise.
var resultNames = map[Result]string{
	0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
	3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 5: "CUDA_ERROR_PROFILER_DISABLED",
	6: "CUDA_ERROR_PROFILER_NOT_INITIALIZED", 7: "CUDA_ERROR_PROFILER_ALREADY_STARTED",
	8: "CUDA_ERROR_PROFILER_ALREADY_STOPPED", 34: "CUDA_ERROR_STUB_LIBRARY",
	46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
	102: "CUDA_ERROR_DEVICE_NOT_LICENSED", 200: "CUDA_ERROR_INVALID_IMAGE", 201: "CUDA_ERROR_INVALID_CONTEXT",
	202: "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", 205: "CUDA_ERROR_MAP_FAILED", 206: "CUDA_ERROR_UNMAP_FAILED",
	207: "CUDA_ERROR_ARRAY_IS_MAPPED", 208: "CUDA_ERROR_ALREADY_MAPPED", 209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	210: "CUDA_ERROR_ALREADY_ACQUIRED", 211: "CUDA_ERROR_NOT_MAPPED", 212: "CUDA_ERROR_NOT_MAPPED_AS_ARRAY",
	213: "CUDA_ERROR_NOT_MAPPED_AS_POINTER", 214: "CUDA_ERROR_ECC_UNCORRECTABLE",
	215: "CUDA_ERROR_UNSUPPORTED_LIMIT", 216: "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
	217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", 218: "CUDA_ERROR_INVALID_PTX",
	219: "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", 220: "CUDA_ERROR_NVLINK_UNCORRECTABLE",
	221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	223: "CUDA_ERROR_JIT_COMPILATION_DISABLED", 224: "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY",
	225: "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", 300: "CUDA_ERROR_INVALID_SOURCE",
	301: "CUDA_ERROR_FILE_NOT_FOUND", 302: "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND",
	303: "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", 304: "CUDA_ERROR_OPERATING_SYSTEM",
	400: "CUDA_ERROR_INVALID_HANDLE", 401: "CUDA_ERROR_ILLEGAL_STATE", 402: "CUDA_ERROR_LOSSY_QUERY",
	500: "CUDA_ERROR_NOT_FOUND", 600: "CUDA_ERROR_NOT_READY", 700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", 702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	703: "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", 704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	705: "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", 708: "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
	709: "CUDA_ERROR_CONTEXT_IS_DESTROYED", 710: "CUDA_ERROR_ASSERT", 711: "CUDA_ERROR_TOO_MANY_PEERS",
	712: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", 713: "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	714: "CUDA_ERROR_HARDWARE_STACK_ERROR", 715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	716: "CUDA_ERROR_MISALIGNED_ADDRESS", 717: "CUDA_ERROR_INVALID_ADDRESS_SPACE", 718: "CUDA_ERROR_INVALID_PC",
	719: "CUDA_ERROR_LAUNCH_FAILED", 720: "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
	800: "CUDA_ERROR_NOT_PERMITTED", 801: "CUDA_ERROR_NOT_SUPPORTED", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
	803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	999: "CUDA_ERROR_UNKNOWN",
}

// String returns the CUresult name, such as "CUDA_ERROR_OUT_OF_MEMORY".
func (r Result) String() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	if d, err := load(); err == nil && d.GetErrorName != nil {
		var p *byte
		if d.GetErrorName(int32(r), &p) == 0 && p != nil {
			return cString(p, 96)
		}
	}
	return fmt.Sprintf("CUresult(%d)", int32(r))
}

// cString copies the NUL-terminated C string at p, at most max bytes.
func cString(p *byte, max int) string {
	var b []byte
	for i := 0; i < max; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// Error is a failed CUDA driver call: the call's name and the CUresult it returned, plus
// details where the driver gives any (the JIT log of a module load).
type Error struct {
	Call   string // driver function, such as "cuMemAlloc_v2"
	Code   Result
	Desc   string // the driver's description of Code (cuGetErrorString), may be empty
	Detail string // extra context, may be empty
}

func (e *Error) Error() string {
	s := fmt.Sprintf("gpu: %s: %s (%d)", e.Call, e.Code, int32(e.Code))
	if e.Desc != "" {
		s += " " + e.Desc
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is makes errors.Is(err, ErrNoDevice) true for CUDA_ERROR_NO_DEVICE.
func (e *Error) Is(target error) bool {
	return target == ErrNoDevice && e.Code == 100
}

// Check turns a CUresult into nil or an *Error naming the call.
func Check(call string, r int32) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: Result(r), Desc: Describe(r)}
}

// errorString is cuGetErrorString of the driver loaded last, or nil (no driver, or one
// without it): Check asks it to describe every failed call's CUresult.
var errorString atomic.Pointer[func(r int32, s **byte) int32]

// Describe returns the driver's description of r in parentheses, or "".
func Describe(r int32) string {
	f := errorString.Load()
	if f == nil {
		return ""
	}
	var p *byte
	if (*f)(r, &p) != 0 || p == nil {
		return ""
	}
	if s := cString(p, 256); s != "" {
		return "(" + s + ")"
	}
	return ""
}

// Driver holds the driver entry points, resolved once per process by Load. The CUDA
// types map as: CUdevice int32; CUcontext, CUmodule, CUfunction, CUstream, CUevent uintptr
// (opaque pointers); CUdeviceptr uint64; size_t uintptr; enums and unsigned int 32-bit.
type Driver struct {
	Init               func(flags uint32) int32
	DriverGetVersion   func(v *int32) int32
	GetErrorName       func(r int32, s **byte) int32
	DeviceGetCount     func(n *int32) int32
	DeviceGet          func(dev *int32, ordinal int32) int32
	DeviceGetName      func(name *byte, n int32, dev int32) int32
	DeviceGetAttribute func(v *int32, attr int32, dev int32) int32
	DeviceTotalMem     func(b *uintptr, dev int32) int32
	CtxCreate          func(ctx *uintptr, flags uint32, dev int32) int32
	CtxDestroy         func(ctx uintptr) int32
	CtxSynchronize     func() int32
	MemGetInfo         func(free, total *uintptr) int32
	ModuleLoadDataEx   func(mod *uintptr, image unsafe.Pointer, n uint32, opts unsafe.Pointer, vals unsafe.Pointer) int32
	ModuleUnload       func(mod uintptr) int32
	ModuleGetFunction  func(fn *uintptr, mod uintptr, name string) int32
	LaunchKernel       func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra unsafe.Pointer) int32
	MemAlloc           func(p *uint64, n uintptr) int32
	MemFree            func(p uint64) int32
	MemcpyHtoD         func(dst uint64, src unsafe.Pointer, n uintptr) int32
	MemcpyHtoDAsync    func(dst uint64, src unsafe.Pointer, n uintptr, stream uintptr) int32
	MemcpyDtoHAsync    func(dst unsafe.Pointer, src uint64, n uintptr, stream uintptr) int32
	MemHostAlloc       func(p *unsafe.Pointer, n uintptr, flags uint32) int32
	MemFreeHost        func(p unsafe.Pointer) int32
	MemHostRegister    func(p unsafe.Pointer, n uintptr, flags uint32) int32
	MemHostUnregister  func(p unsafe.Pointer) int32
	StreamCreate       func(s *uintptr, flags uint32) int32
	StreamDestroy      func(s uintptr) int32
	StreamSynchronize  func(s uintptr) int32
	EventCreate        func(e *uintptr, flags uint32) int32
	EventDestroy       func(e uintptr) int32
	EventRecord        func(e, s uintptr) int32
	EventQuery         func(e uintptr) int32
	EventSynchronize   func(e uintptr) int32
	EventElapsedTime   func(ms *float32, start, end uintptr) int32
}

// symbols lists every entry point with the exported name it is bound to. The _v2 names are
// what cuda.h's macros select for 64-bit builds since CUDA 4/7; drivers keep exporting them.
func (d *Driver) symbols() []struct {
	name string
	fn   any
} {
	return []struct {
		name string
		fn   any
	}{
		{"cuInit", &d.Init},
		{"cuDriverGetVersion", &d.DriverGetVersion},
		{"cuGetErrorName", &d.GetErrorName},
		{"cuDeviceGetCount", &d.DeviceGetCount},
		{"cuDeviceGet", &d.DeviceGet},
		{"cuDeviceGetName", &d.DeviceGetName},
		{"cuDeviceGetAttribute", &d.DeviceGetAttribute},
		{"cuDeviceTotalMem_v2", &d.DeviceTotalMem},
		{"cuCtxCreate_v2", &d.CtxCreate},
		{"cuCtxDestroy_v2", &d.CtxDestroy},
		{"cuCtxSynchronize", &d.CtxSynchronize},
		{"cuMemGetInfo_v2", &d.MemGetInfo},
		{"cuModuleLoadDataEx", &d.ModuleLoadDataEx},
		{"cuModuleUnload", &d.ModuleUnload},
		{"cuModuleGetFunction", &d.ModuleGetFunction},
		{"cuLaunchKernel", &d.LaunchKernel},
		{"cuMemAlloc_v2", &d.MemAlloc},
		{"cuMemFree_v2", &d.MemFree},
		{"cuMemcpyHtoD_v2", &d.MemcpyHtoD},
		{"cuMemcpyHtoDAsync_v2", &d.MemcpyHtoDAsync},
		{"cuMemcpyDtoHAsync_v2", &d.MemcpyDtoHAsync},
		{"cuMemHostAlloc", &d.MemHostAlloc},
		{"cuMemFreeHost", &d.MemFreeHost},
		{"cuMemHostRegister_v2", &d.MemHostRegister},
		{"cuMemHostUnregister", &d.MemHostUnregister},
		{"cuStreamCreate", &d.StreamCreate},
		{"cuStreamDestroy_v2", &d.StreamDestroy},
		{"cuStreamSynchronize", &d.StreamSynchronize},
		{"cuEventCreate", &d.EventCreate},
		{"cuEventDestroy_v2", &d.EventDestroy},
		{"cuEventRecord", &d.EventRecord},
		{"cuEventQuery", &d.EventQuery},
		{"cuEventSynchronize", &d.EventSynchronize},
		{"cuEventElapsedTime", &d.EventElapsedTime},
	}
}

// load opens libcuda.so.1, binds every entry point and calls cuInit(0), once per
// process, on first use (never at package initialisation). The result, success or error, is
// kept: the driver cannot be unloaded and loaded again safely.
var load = sync.OnceValues(func() (*Driver, error) {
	return Open(DriverLibrary)
})

// Open loads the driver from the named library.
func Open(lib string) (*Driver, error) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("%w: dlopen %s: %v", ErrNoDriver, lib, err)
	}
	d := &Driver{}
	for _, s := range d.symbols() {
		p, err := purego.Dlsym(h, s.name)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("%w: %s has no %s (driver too old?): %v", ErrNoDriver, lib, s.name, err)
		}
		purego.RegisterFunc(s.fn, p)
	}
	// cuGetErrorString (CUDA 6.0+) is optional: without it errors carry the name alone.
	if p, err := purego.Dlsym(h, "cuGetErrorString"); err == nil && p != 0 {
		var f func(r int32, s **byte) int32
		purego.RegisterFunc(&f, p)
		errorString.Store(&f)
	}
	if err := Check("cuInit", d.Init(0)); err != nil {
		return nil, err
	}
	return d, nil
}

// DriverVersion returns the CUDA version the driver supports, as 1000*major + 10*minor.
func DriverVersion() (int, error) {
	d, err := load()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := Check("cuDriverGetVersion", d.DriverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Load returns the driver, opening libcuda.so.1 on the first call (see load).
func Load() (*Driver, error) { return load() }
