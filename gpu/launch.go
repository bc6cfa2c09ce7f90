package gpu

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/packer-dev/packer/gpu/internal/cuda"
)

// Param is one kernel argument, as its bytes (little-endian, the byte order of every GPU
// host). Build them with PtrArg, Int32Arg and Uint32Arg.
type Param struct {
	b    [8]byte
	size int
}

// Size is the argument's size in bytes.
func (p Param) Size() int { return p.size }

// PtrArg is a device pointer argument (.u64).
func PtrArg(p DevicePtr) Param {
	var a Param
	binary.LittleEndian.PutUint64(a.b[:], uint64(p))
	a.size = 8
	return a
}

// Int32Arg is an int argument (.u32/.s32).
func Int32Arg(v int32) Param { return Uint32Arg(uint32(v)) }

// Uint32Arg is an unsigned int argument (.u32).
func Uint32Arg(v uint32) Param {
	var a Param
	binary.LittleEndian.PutUint32(a.b[:], v)
	a.size = 4
	return a
}

// Kernel names an entry point of the embedded PTX and the argument sizes its Go launcher
// passes. TestPTXParams checks these against the .entry signatures parsed from the PTX, and
// Device setup checks them again before loading the module, so a kernel edited without its
// launcher fails loudly instead of reading garbage.
type Kernel struct {
	Name   string
	params func() []Param // the launcher's argument list, with zero values
}

// ParamSizes returns the sizes of the arguments the Go launcher passes.
func (k Kernel) ParamSizes() []int {
	var s []int
	for _, p := range k.params() {
		s = append(s, p.size)
	}
	return s
}

// The kernels of resize.cu and their launchers' argument lists.
var (
	kernelHPass = Kernel{Name: "packer_hpass", params: func() []Param { return hpassParams(0, 0, 0, 0) }}
	kernelVPass = Kernel{Name: "packer_vpass", params: func() []Param { return vpassParams(0, 0, 0, 0, 0, 0, 0) }}
	launchers   = []Kernel{kernelHPass, kernelVPass}
)

// Kernels lists the kernels packer launches.
func Kernels() []Kernel { return append([]Kernel(nil), launchers...) }

func hpassParams(jobs, src, wts, mid DevicePtr) []Param {
	return []Param{PtrArg(jobs), PtrArg(src), PtrArg(wts), PtrArg(mid)}
}

func vpassParams(jobs, mid, wts, lut, dst DevicePtr, layout, esize int32) []Param {
	return []Param{PtrArg(jobs), PtrArg(mid), PtrArg(wts), PtrArg(lut), PtrArg(dst), Int32Arg(layout), Int32Arg(esize)}
}

// checkKernelSignatures compares every launcher's argument sizes with the PTX.
func checkKernelSignatures(ptx string) error {
	entries, err := ParsePTXEntries(ptx)
	if err != nil {
		return err
	}
	for _, k := range launchers {
		if err := k.CheckAgainst(entries); err != nil {
			return err
		}
	}
	return nil
}

// CheckAgainst reports whether the launcher's argument list matches the kernel's .entry
// signature in entries (from ParsePTXEntries): same count, same size for each.
func (k Kernel) CheckAgainst(entries map[string][]PTXParam) error {
	want, ok := entries[k.Name]
	if !ok {
		return fmt.Errorf("gpu: kernel %s: no such .entry in the PTX", k.Name)
	}
	got := k.ParamSizes()
	if len(got) != len(want) {
		return fmt.Errorf("gpu: kernel %s: launcher passes %d arguments, PTX declares %d", k.Name, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i].Size {
			return fmt.Errorf("gpu: kernel %s: argument %d is %d bytes, PTX declares %s (%d bytes)",
				k.Name, i, got[i], want[i].Type, want[i].Size)
		}
	}
	return nil
}

// Dim is a grid or block size.
type Dim struct{ X, Y, Z uint32 }

// Launch enqueues kernel k on stream s (cuLaunchKernel). The argument list must match the
// kernel's signature (its sizes are checked against the launcher's). Call it inside Do.
func (d *Device) Launch(k Kernel, grid, block Dim, s Stream, args []Param) error {
	if err := d.call("cuLaunchKernel"); err != nil {
		return err
	}
	fn, ok := d.funcs[k.Name]
	if !ok {
		return fmt.Errorf("gpu: kernel %s is not loaded", k.Name)
	}
	want := k.ParamSizes()
	if len(args) != len(want) {
		return fmt.Errorf("gpu: launch %s: %d arguments, want %d", k.Name, len(args), len(want))
	}
	for i, a := range args {
		if a.size != want[i] {
			return fmt.Errorf("gpu: launch %s: argument %d is %d bytes, want %d", k.Name, i, a.size, want[i])
		}
	}
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return nil // nothing to run
	}
	// kernelParams is an array of pointers, one per argument, to the argument's bytes. Both
	// live in Go memory pinned for the call (the driver copies the values before returning).
	vals := make([]uint64, len(args))
	ptrs := make([]uintptr, len(args))
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(args) > 0 {
		pin.Pin(&vals[0])
		pin.Pin(&ptrs[0])
	}
	for i, a := range args {
		vals[i] = binary.LittleEndian.Uint64(a.b[:])
		ptrs[i] = uintptr(unsafe.Pointer(&vals[i]))
	}
	var params unsafe.Pointer
	if len(args) > 0 {
		params = unsafe.Pointer(&ptrs[0])
	}
	r := d.drv.LaunchKernel(fn, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, 0, uintptr(s), params, nil)
	runtime.KeepAlive(vals)
	runtime.KeepAlive(ptrs)
	return cuda.Check("cuLaunchKernel", r)
}
