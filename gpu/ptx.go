package gpu

import (
	_ "embed" // the kernels' PTX and cubins
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/packer-dev/packer/gpu/internal/cuda"
)

//go:embed kernels/resize.ptx
var resizePTX string

//go:generate kernels/build-cubin.sh

// The kernels assembled from resize.ptx by ptxas (gpu/kernels/build-cubin.sh), for the
// device architectures most nodes have. Machine code needs no JIT in the driver.
var (
	//go:embed kernels/resize_sm80.cubin
	resizeSM80 []byte
	//go:embed kernels/resize_sm90.cubin
	resizeSM90 []byte
)

// cubinFor returns the embedded machine code that runs on a device of compute capability
// major.minor, and its architecture's name, or nil. A cubin for sm_XY runs on sm_XZ for
// Z >= Y (same major version), except that sm_90 code is not forward compatible with 9.x
// variants other than 9.0.
func cubinFor(major, minor int) ([]byte, string) {
	switch {
	case major == 8:
		return resizeSM80, "sm_80"
	case major == 9 && minor == 0:
		return resizeSM90, "sm_90"
	}
	return nil, ""
}

// PTX returns the embedded PTX of packer's kernels (gpu/kernels/resize.ptx, generated from
// resize.cu by scripts/build-ptx.sh).
func PTX() string { return resizePTX }

// PTXParam is one parameter of a PTX .entry: its type (".u64", ".u32", ".b8", ...) and size
// in bytes.
type PTXParam struct {
	Type string
	Size int
}

// ParsePTXEntries returns the parameter lists of the .entry functions of a PTX module, by
// name. It understands the declarations clang and nvcc emit:
//
//	.visible .entry name(
//		.param .u64 name_param_0,
//		.param .align 8 .b8 name_param_1[16]
//	)
func ParsePTXEntries(ptx string) (map[string][]PTXParam, error) {
	entries := make(map[string][]PTXParam)
	rest := ptx
	for {
		i := strings.Index(rest, ".entry")
		if i < 0 {
			return entries, nil
		}
		rest = rest[i+len(".entry"):]
		open := strings.IndexByte(rest, '(')
		body := strings.IndexByte(rest, '{')
		if open < 0 || (body >= 0 && body < open) {
			return nil, fmt.Errorf("gpu: PTX: .entry without a parameter list")
		}
		name := strings.TrimSpace(rest[:open])
		if name == "" || strings.ContainsAny(name, " \t\n") {
			return nil, fmt.Errorf("gpu: PTX: bad .entry name %q", name)
		}
		end := strings.IndexByte(rest[open:], ')')
		if end < 0 {
			return nil, fmt.Errorf("gpu: PTX: .entry %s: unterminated parameter list", name)
		}
		list := rest[open+1 : open+end]
		rest = rest[open+end:]
		var params []PTXParam
		for _, decl := range strings.Split(list, ",") {
			decl = strings.TrimSpace(decl)
			if decl == "" {
				continue
			}
			p, err := parsePTXParam(decl)
			if err != nil {
				return nil, fmt.Errorf("gpu: PTX: .entry %s: %w", name, err)
			}
			params = append(params, p)
		}
		if _, dup := entries[name]; dup {
			return nil, fmt.Errorf("gpu: PTX: .entry %s defined twice", name)
		}
		entries[name] = params
	}
}

var ptxTypeSizes = map[string]int{
	".u8": 1, ".s8": 1, ".b8": 1, ".u16": 2, ".s16": 2, ".b16": 2, ".f16": 2,
	".u32": 4, ".s32": 4, ".b32": 4, ".f32": 4, ".u64": 8, ".s64": 8, ".b64": 8, ".f64": 8,
}

// parsePTXParam parses ".param .u64 name" or ".param .align A .b8 name[N]".
func parsePTXParam(decl string) (PTXParam, error) {
	f := strings.Fields(decl)
	if len(f) < 3 || f[0] != ".param" {
		return PTXParam{}, fmt.Errorf("bad parameter %q", decl)
	}
	f = f[1:]
	if f[0] == ".ptr" || strings.HasPrefix(f[0], ".space") { // nvcc's pointer annotations come after the type
		return PTXParam{}, fmt.Errorf("unsupported parameter %q", decl)
	}
	if f[0] == ".align" {
		if len(f) < 4 {
			return PTXParam{}, fmt.Errorf("bad parameter %q", decl)
		}
		f = f[2:]
	}
	size, ok := ptxTypeSizes[f[0]]
	if !ok {
		return PTXParam{}, fmt.Errorf("unknown type in parameter %q", decl)
	}
	name := f[len(f)-1]
	if lb := strings.IndexByte(name, '['); lb >= 0 {
		if !strings.HasSuffix(name, "]") {
			return PTXParam{}, fmt.Errorf("bad array parameter %q", decl)
		}
		n, err := strconv.Atoi(name[lb+1 : len(name)-1])
		if err != nil || n < 1 {
			return PTXParam{}, fmt.Errorf("bad array parameter %q", decl)
		}
		size *= n
	}
	return PTXParam{Type: f[0], Size: size}, nil
}

// CUjit_option values (cuda.h).
const (
	jitInfoLogBuffer       = 3
	jitInfoLogBufferBytes  = 4
	jitErrorLogBuffer      = 5
	jitErrorLogBufferBytes = 6
	jitLogVerbose          = 12
)

// loadKernels loads the kernels: the embedded cubin for the device's compute capability if
// there is one and the driver takes it, else the PTX, JIT-compiled by the driver. It returns
// the module and what was loaded ("sm_90 cubin" or "PTX"). Runs on the owner goroutine.
func (d *Device) loadKernels() (uintptr, string, error) {
	var cubinErr error
	if bin, arch := cubinFor(d.info.Major, d.info.Minor); bin != nil {
		mod, err := d.loadModule(bin)
		if err == nil {
			return mod, arch + " cubin", nil
		}
		cubinErr = fmt.Errorf("%s cubin: %w", arch, err)
	}
	mod, err := d.loadModule(append([]byte(PTX()), 0))
	if err != nil {
		if cubinErr != nil {
			return 0, "", errors.Join(cubinErr, fmt.Errorf("PTX: %w", err))
		}
		return 0, "", err
	}
	return mod, "PTX", nil
}

// loadModule loads a module image, a cubin or NUL-terminated PTX (cuModuleLoadDataEx). On
// failure the error carries the JIT's error and info logs. Runs on the owner goroutine.
func (d *Device) loadModule(image []byte) (uintptr, error) {
	const logSize = 16 << 10
	infoLog := make([]byte, logSize)
	errLog := make([]byte, logSize)
	opts := []int32{jitInfoLogBuffer, jitInfoLogBufferBytes, jitErrorLogBuffer, jitErrorLogBufferBytes, jitLogVerbose}
	// Option values are void*: buffer addresses, or integers passed in the pointer's place.
	// They are uintptrs here, and every buffer they name is pinned for the call.
	vals := []uintptr{
		uintptr(unsafe.Pointer(&infoLog[0])), logSize,
		uintptr(unsafe.Pointer(&errLog[0])), logSize,
		0,
	}
	var pin runtime.Pinner
	pin.Pin(&image[0])
	pin.Pin(&infoLog[0])
	pin.Pin(&errLog[0])
	pin.Pin(&opts[0])
	pin.Pin(&vals[0])
	var mod uintptr
	r := d.drv.ModuleLoadDataEx(&mod, unsafe.Pointer(&image[0]), uint32(len(opts)),
		unsafe.Pointer(&opts[0]), unsafe.Pointer(&vals[0]))
	pin.Unpin()
	runtime.KeepAlive(image)
	if r != 0 {
		e := &Error{Call: "cuModuleLoadDataEx", Code: Result(r), Desc: cuda.Describe(r)}
		if s := logText(errLog); s != "" {
			e.Detail = "JIT error log: " + s
		}
		if s := logText(infoLog); s != "" {
			if e.Detail != "" {
				e.Detail += "; "
			}
			e.Detail += "JIT info log: " + s
		}
		return 0, e
	}
	return mod, nil
}

func logText(b []byte) string {
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	return strings.TrimSpace(string(b))
}
