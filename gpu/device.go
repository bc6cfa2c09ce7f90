package gpu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/packer-dev/packer/gpu/internal/cuda"
)

// Info describes a CUDA device.
type Info struct {
	Ordinal        int    // device index, as cuDeviceGet takes it
	Name           string // for example "NVIDIA H100 80GB HBM3"
	Memory         int64  // total device memory in bytes
	Major, Minor   int    // compute capability
	SMs            int    // multiprocessors
	Driver         int    // CUDA version the driver supports, 1000*major + 10*minor
	MemoryBusBits  int    // global memory bus width
	MemoryClockKHz int    // peak memory clock
}

// MemoryBandwidth is the peak device memory bandwidth in bytes/s, from the memory clock and
// bus width (double data rate), as the CUDA samples compute it.
func (i Info) MemoryBandwidth() float64 {
	return 2 * float64(i.MemoryClockKHz) * 1e3 * float64(i.MemoryBusBits) / 8
}

// String returns a one-line description for build summaries.
func (i Info) String() string {
	return fmt.Sprintf("%s (sm_%d%d, %d MiB, CUDA driver %d.%d)", i.Name, i.Major, i.Minor,
		i.Memory>>20, i.Driver/1000, i.Driver%1000/10)
}

// CUdevice_attribute values used here (cuda.h).
const (
	attrMultiprocessorCount  = 16
	attrMemoryClockRate      = 36
	attrGlobalMemoryBusWidth = 37
	attrComputeCapMajor      = 75
	attrComputeCapMinor      = 76
)

// Probe reports the first CUDA device, loading the driver on first use. It returns an error
// wrapping ErrNoDriver when libcuda.so.1 cannot be loaded, one matching ErrNoDevice when the
// driver reports no device, and an *Error for any other failed call. It creates no context
// and is safe for concurrent use; --device auto uses the GPU exactly when Probe succeeds.
func Probe() (Info, error) {
	d, err := cuda.Load()
	if err != nil {
		return Info{}, err
	}
	var n int32
	if err := cuda.Check("cuDeviceGetCount", d.DeviceGetCount(&n)); err != nil {
		return Info{}, err
	}
	if n < 1 {
		return Info{}, fmt.Errorf("%w: cuDeviceGetCount reports 0 devices", ErrNoDevice)
	}
	return deviceInfo(d, 0)
}

func deviceInfo(d *cuda.Driver, ordinal int) (Info, error) {
	var dev int32
	if err := cuda.Check("cuDeviceGet", d.DeviceGet(&dev, int32(ordinal))); err != nil {
		return Info{}, err
	}
	info := Info{Ordinal: ordinal}
	name := make([]byte, 256)
	if err := cuda.Check("cuDeviceGetName", d.DeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return Info{}, err
	}
	for i, c := range name {
		if c == 0 {
			name = name[:i]
			break
		}
	}
	info.Name = string(name)
	var mem uintptr
	if err := cuda.Check("cuDeviceTotalMem_v2", d.DeviceTotalMem(&mem, dev)); err != nil {
		return Info{}, err
	}
	info.Memory = int64(mem)
	for _, a := range []struct {
		attr     int32
		dst      *int
		cosmetic bool // only reported or used for estimates: unreadable reads as 0
	}{
		{attrComputeCapMajor, &info.Major, false}, {attrComputeCapMinor, &info.Minor, false},
		{attrMultiprocessorCount, &info.SMs, true}, {attrGlobalMemoryBusWidth, &info.MemoryBusBits, true},
		{attrMemoryClockRate, &info.MemoryClockKHz, true},
	} {
		var v int32
		if err := cuda.Check("cuDeviceGetAttribute", d.DeviceGetAttribute(&v, a.attr, dev)); err != nil {
			if a.cosmetic {
				continue
			}
			return Info{}, fmt.Errorf("attribute %d: %w", a.attr, err)
		}
		*a.dst = int(v)
	}
	var ver int32
	if err := cuda.Check("cuDriverGetVersion", d.DriverGetVersion(&ver)); err != nil {
		return Info{}, err
	}
	info.Driver = int(ver)
	return info, nil
}

// ErrClosed is returned by the methods of a closed Device.
var ErrClosed = errors.New("gpu: device is closed")

// ErrWrongThread is returned by a driver method called outside Device.Do: CUDA calls must
// run on the goroutine that owns the context. It is a programming error, not bad input.
var ErrWrongThread = errors.New("gpu: driver call outside Device.Do")

// pollInterval is how often the owner goroutine polls pending events while it has no work.
const pollInterval = 100 * time.Microsecond

// A Device is one CUDA context on one device, owned by one goroutine locked to its OS thread
// (CUDA contexts are current per thread). All driver calls run on that goroutine: pass them
// to Do. The methods that call the driver (MemAlloc, Launch, CopyHtoDAsync, ...) must be
// called from inside a function given to Do, and return ErrWrongThread otherwise. Do and Wait
// are safe for concurrent use.
type Device struct {
	info  Info
	drv   *cuda.Driver
	work  chan func()
	quit  chan struct{}
	exit  chan struct{}
	tid   int     // the owner's OS thread
	ctx   uintptr // CUcontext
	mod   uintptr // CUmodule of the embedded kernels
	image string  // what mod was loaded from: "sm_90 cubin", "PTX"
	funcs map[string]uintptr
	waits []pendingWait // owned by the loop

	closeOnce sync.Once
	closeErr  error
}

type pendingWait struct {
	ev   Event
	done chan error
}

// Open creates a context on the device with the given ordinal and loads the embedded
// kernels (JIT-compiled by the driver for the device). Close releases it.
func Open(ordinal int) (*Device, error) {
	drv, err := cuda.Load()
	if err != nil {
		return nil, err
	}
	return openDevice(drv, ordinal)
}

// openDevice is Open with a given driver (the tests' fake driver among them).
func openDevice(drv *cuda.Driver, ordinal int) (*Device, error) {
	var n int32
	if err := cuda.Check("cuDeviceGetCount", drv.DeviceGetCount(&n)); err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= int(n) {
		return nil, fmt.Errorf("%w: device %d requested, %d present", ErrNoDevice, ordinal, n)
	}
	info, err := deviceInfo(drv, ordinal)
	if err != nil {
		return nil, err
	}
	d := &Device{info: info, drv: drv, work: make(chan func()), quit: make(chan struct{}),
		exit: make(chan struct{}), funcs: make(map[string]uintptr)}
	started := make(chan error, 1)
	go d.loop(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return d, nil
}

// Info describes the device.
func (d *Device) Info() Info { return d.info }

// KernelImage says which embedded image of the kernels the device runs: "sm_80 cubin" or
// "sm_90 cubin" (machine code, loaded first where the compute capability has one), or "PTX"
// (compiled by the driver's JIT).
func (d *Device) KernelImage() string { return d.image }

// loop is the owner goroutine: it creates the context, then runs work and polls events.
func (d *Device) loop(started chan<- error) {
	// The goroutine exits still locked, so the runtime ends the thread with it: no other
	// goroutine ever runs on the thread whose id onThread compares with.
	runtime.LockOSThread()
	defer close(d.exit)
	d.tid = unix.Gettid()
	if err := d.setup(); err != nil {
		d.teardown()
		started <- err
		return
	}
	started <- nil
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		if len(d.waits) == 0 {
			select {
			case f := <-d.work:
				f()
			case <-d.quit:
				d.closeErr = d.teardown()
				return
			}
			continue
		}
		d.pollWaits()
		if len(d.waits) == 0 {
			continue
		}
		timer.Reset(pollInterval)
		select {
		case f := <-d.work:
			f()
		case <-timer.C:
		case <-d.quit:
			for _, w := range d.waits {
				w.done <- ErrClosed
			}
			d.waits = nil
			d.closeErr = d.teardown()
			return
		}
		timer.Stop()
	}
}

func (d *Device) setup() error {
	var dev int32
	if err := cuda.Check("cuDeviceGet", d.drv.DeviceGet(&dev, int32(d.info.Ordinal))); err != nil {
		return err
	}
	// Flags 0: CU_CTX_SCHED_AUTO. The context becomes current on this thread.
	if err := cuda.Check("cuCtxCreate_v2", d.drv.CtxCreate(&d.ctx, 0, dev)); err != nil {
		return err
	}
	if err := checkKernelSignatures(PTX()); err != nil {
		return err
	}
	mod, image, err := d.loadKernels()
	if err != nil {
		return err
	}
	d.mod, d.image = mod, image
	for _, k := range launchers {
		var fn uintptr
		if err := cuda.Check("cuModuleGetFunction", d.drv.ModuleGetFunction(&fn, d.mod, k.Name)); err != nil {
			return fmt.Errorf("kernel %s: %w", k.Name, err)
		}
		d.funcs[k.Name] = fn
	}
	return nil
}

func (d *Device) teardown() error {
	var errs []error
	if d.mod != 0 {
		errs = append(errs, cuda.Check("cuModuleUnload", d.drv.ModuleUnload(d.mod)))
		d.mod = 0
	}
	if d.ctx != 0 {
		errs = append(errs, cuda.Check("cuCtxDestroy_v2", d.drv.CtxDestroy(d.ctx)))
		d.ctx = 0
	}
	return errors.Join(errs...)
}

func (d *Device) pollWaits() {
	keep := d.waits[:0]
	for _, w := range d.waits {
		r := d.drv.EventQuery(uintptr(w.ev))
		switch r {
		case 600: // CUDA_ERROR_NOT_READY
			keep = append(keep, w)
		default:
			w.done <- cuda.Check("cuEventQuery", r)
		}
	}
	clear(d.waits[len(keep):])
	d.waits = keep
}

// onThread reports whether the caller runs on the owner goroutine (whose OS thread is locked,
// so no other goroutine can run on it).
func (d *Device) onThread() bool {
	select {
	case <-d.exit:
		return false
	default:
	}
	return unix.Gettid() == d.tid
}

// Do runs f on the goroutine that owns the context and returns its error. A Do from inside
// another Do runs f directly. It returns ErrClosed after Close.
func (d *Device) Do(f func() error) error {
	if d.onThread() {
		return f()
	}
	done := make(chan error, 1)
	run := func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("gpu: panic in Device.Do: %v", p)
			}
		}()
		done <- f()
	}
	select {
	case d.work <- run:
	case <-d.exit:
		return ErrClosed
	}
	return <-done
}

// Wait blocks until the work recorded in ev is complete. The owner goroutine polls the event
// between other work, so Wait never holds up Do calls from other goroutines. It must not be
// called from inside Do.
func (d *Device) Wait(ev Event) error {
	if d.onThread() {
		return fmt.Errorf("%w: Wait inside Do", ErrWrongThread)
	}
	done := make(chan error, 1)
	reg := func() { d.waits = append(d.waits, pendingWait{ev: ev, done: done}) }
	select {
	case d.work <- reg:
	case <-d.exit:
		return ErrClosed
	}
	return <-done
}

// Close destroys the context and stops the owner goroutine. Memory, streams and events
// created on the device are released with the context. Close is idempotent.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		close(d.quit)
		<-d.exit
	})
	return d.closeErr
}

// call checks that the caller is the owner goroutine, for the driver methods.
func (d *Device) call(name string) error {
	if !d.onThread() {
		return fmt.Errorf("%w: %s", ErrWrongThread, name)
	}
	return nil
}

// MemInfo returns the free and total device memory. Call it inside Do.
func (d *Device) MemInfo() (free, total int64, err error) {
	if err := d.call("cuMemGetInfo_v2"); err != nil {
		return 0, 0, err
	}
	var f, t uintptr
	if err := cuda.Check("cuMemGetInfo_v2", d.drv.MemGetInfo(&f, &t)); err != nil {
		return 0, 0, err
	}
	return int64(f), int64(t), nil
}

// Synchronize waits for all work on the context. Call it inside Do.
func (d *Device) Synchronize() error {
	if err := d.call("cuCtxSynchronize"); err != nil {
		return err
	}
	return cuda.Check("cuCtxSynchronize", d.drv.CtxSynchronize())
}
