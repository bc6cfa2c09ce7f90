package gpu

// Tests that need a CUDA driver and device. They skip, saying why, on machines without one,
// and run by themselves where `go test ./gpu/` finds libcuda.so.1 and a device.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/transforms"
)

// openTestDevice opens device 0, or skips the test when there is no usable driver or device
// (fails instead with PACKER_REQUIRE_GPU=1). Once a device is reported, every failure is a
// test failure.
func openTestDevice(t *testing.T) *Device {
	t.Helper()
	info, err := Probe()
	if err != nil {
		skipNoGPU(t, "no CUDA device, skipping the device test: %v", err)
	}
	d, err := Open(0)
	if err != nil {
		t.Fatalf("Probe found %v but Open failed: %v", info, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

func TestDeviceInfo(t *testing.T)             { testInfo(t, openTestDevice(t)) }
func TestDeviceThreadRule(t *testing.T)       { testThreadRule(t, openTestDevice(t)) }
func TestDeviceJITErrorLog(t *testing.T)      { testJITErrorLog(t, openTestDevice(t)) }
func TestDevicePinnedRoundTrip(t *testing.T)  { testPinnedRoundTrip(t, openTestDevice(t)) }
func TestDeviceResizeMatchesCPU(t *testing.T) { testResizeMatchesCPU(t, openTestDevice(t)) }
func TestDeviceManySizes(t *testing.T)        { testManySizes(t, openTestDevice(t)) }
func TestDeviceKernelTiming(t *testing.T)     { testKernelTiming(t, openTestDevice(t)) }
func TestDeviceSelfCheck(t *testing.T)        { testSelfCheckResizer(t, openTestDevice(t)) }
func TestDeviceRegionEdges(t *testing.T)      { testRegionEdges(t, openTestDevice(t)) }
func TestDeviceByteBudget(t *testing.T)       { testByteBudget(t, openTestDevice(t)) }

// deviceTests are the device tests, run on a real GPU by the TestDevice* functions and on
// the fake driver by TestFakeDriver.
var deviceTests = []struct {
	name string
	fn   func(*testing.T, *Device)
}{
	{"Info", testInfo},
	{"ThreadRule", testThreadRule},
	{"JITErrorLog", testJITErrorLog},
	{"PinnedRoundTrip", testPinnedRoundTrip},
	{"ResizeMatchesCPU", testResizeMatchesCPU},
	{"SelfCheck", testSelfCheckResizer},
	{"ManySizes", testManySizes},
	{"KernelTiming", testKernelTiming},
	{"RunErrors", testRunErrors},
	{"RegionEdges", testRegionEdges},
	{"ByteBudget", testByteBudget},
}

func testInfo(t *testing.T, d *Device) {
	info := d.Info()
	t.Logf("device: %v, %d SMs, %d-bit bus at %d kHz", info, info.SMs, info.MemoryBusBits, info.MemoryClockKHz)
	if info.Name == "" || info.Memory <= 0 || info.Major < 5 {
		t.Errorf("implausible device info %+v", info)
	}
	err := d.Do(func() error {
		free, total, err := d.MemInfo()
		t.Logf("memory: %d MiB free of %d MiB", free>>20, total>>20)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeviceThreadRule: driver methods outside Do are refused, inside they work, and a Do
// nested in a Do runs inline instead of deadlocking.
func testThreadRule(t *testing.T, d *Device) {
	if _, err := d.MemAlloc(16); !errors.Is(err, ErrWrongThread) {
		t.Errorf("MemAlloc outside Do: %v, want ErrWrongThread", err)
	}
	err := d.Do(func() error {
		p, err := d.MemAlloc(16)
		if err != nil {
			return err
		}
		if err := d.Do(func() error { return d.MemFree(p) }); err != nil {
			return fmt.Errorf("nested Do: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Do(func() error { return d.Wait(0) }); !errors.Is(err, ErrWrongThread) {
		t.Errorf("Wait inside Do: %v, want ErrWrongThread", err)
	}
}

// TestDeviceJITErrorLog: a module the JIT rejects gives an error naming the call, the
// CUresult and the JIT's log.
func testJITErrorLog(t *testing.T, d *Device) {
	bad := ".version 4.1\n.target sm_52\n.address_size 64\n.visible .entry broken(\n)\n{\n\tnot_an_instruction %r1;\n}\n"
	err := d.Do(func() error {
		mod, err := d.loadModule(append([]byte(bad), 0))
		if err == nil {
			d.drv.ModuleUnload(mod)
		}
		return err
	})
	var ce *Error
	if !errors.As(err, &ce) || ce.Call != "cuModuleLoadDataEx" {
		t.Fatalf("loading bad PTX: %v", err)
	}
	t.Logf("%v", err)
	if !strings.Contains(err.Error(), "JIT error log") {
		t.Errorf("error carries no JIT log: %v", err)
	}
}

// TestDevicePinnedRoundTrip: pinned buffers from PinnedAllocator go to the device with
// CopyBatchAsync and come back unchanged, and HostRegister works on mmapped reader buffers.
func testPinnedRoundTrip(t *testing.T, d *Device) {
	a := NewPinnedAllocator(d)
	const n = 8<<20 + 123
	in, err := a.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 5))
	for i := range in {
		in[i] = byte(r.Uint32())
	}
	var buf DevicePtr
	var s Stream
	var ev Event
	err = d.Do(func() error {
		var err error
		if buf, err = d.MemAlloc(n); err != nil {
			return err
		}
		if s, err = d.NewStream(); err != nil {
			return err
		}
		ev, err = d.NewEvent()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyBatchAsync(buf, in, s, 0); err != nil {
		t.Fatal(err)
	}
	err = d.Do(func() error {
		if err := d.CopyDtoHAsync(out, buf, s); err != nil {
			return err
		}
		return d.RecordEvent(ev, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ev); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, out) {
		t.Fatalf("pinned round trip changed the data at byte %d", firstDiff(in, out))
	}

	// A reader buffer from shard's mmap allocator, registered with the driver.
	var mm shard.MmapAllocator
	reg, err := mm.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Free(reg)
	copy(reg, in)
	back := out[:1<<20]
	clear(back)
	err = d.Do(func() error {
		if err := d.HostRegister(reg); err != nil {
			return err
		}
		defer d.HostUnregister(reg)
		if err := d.CopyHtoDAsync(buf, reg, s); err != nil {
			return err
		}
		if err := d.CopyDtoHAsync(back, buf, s); err != nil {
			return err
		}
		return d.StreamSynchronize(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, reg) {
		t.Fatal("registered round trip changed the data")
	}

	err = d.Do(func() error {
		return errors.Join(d.MemFree(buf), d.DestroyEvent(ev), d.DestroyStream(s))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(a.Free(in), a.Free(out)); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(make([]byte, 10)); err == nil {
		t.Error("Free of a foreign buffer: no error")
	}
}

// TestDeviceResizeMatchesCPU: the GPU's records equal transforms.Worker.Apply's, byte for
// byte, over every filter, layout and dtype, random and real images, mixed sizes in one
// batch, batches split by MaxBatchBytes, and concurrent Run calls.
func testResizeMatchesCPU(t *testing.T, d *Device) {
	r := rand.New(rand.NewPCG(6, 6))
	var imgs []transforms.Image
	sizes := [][2]int{{1, 1}, {17, 9}, {333, 500}, {640, 480}, {1920, 1080}, {7, 300}}
	if d.Info().Name == fakeDeviceName { // the fake runs the kernels on one core
		sizes = [][2]int{{1, 1}, {17, 9}, {333, 500}, {7, 300}}
	}
	for _, sz := range sizes {
		imgs = append(imgs, randomImage(r, sz[0], sz[1], 3))
	}
	imgs = append(imgs, randomImage(r, 100, 80, 1))
	if paths := wallpapers(2); len(paths) > 0 && d.Info().Name == fakeDeviceName {
		im := loadWallpaper(t, paths[0])
		imgs = append(imgs, crop(im, 1000, 800, 500, 400))
	} else {
		for _, p := range paths {
			imgs = append(imgs, loadWallpaper(t, p))
		}
	}
	imagenet := [2][]float64{{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}}
	var specs []transforms.Spec
	for _, f := range allFilters {
		specs = append(specs,
			transforms.Spec{Resize: 256, CropW: 224, CropH: 224, Filter: f},
			transforms.Spec{Width: 300, Height: 200, CropW: 320, CropH: 180, Filter: f, Layout: transforms.CHW, DType: transforms.Float16},
			transforms.Spec{Resize: 64, Filter: f, Layout: transforms.CHW, DType: transforms.Float32, Mean: []float64{0.5}, Std: []float64{0.25}},
		)
	}
	specs = append(specs, transforms.Spec{Resize: 256, CropW: 224, CropH: 224, DType: transforms.Float32, Mean: imagenet[0], Std: imagenet[1]})
	for _, spec := range specs {
		rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{MaxBatchBytes: 8 << 20})
		if err != nil {
			t.Fatalf("%+v: %v", spec, err)
		}
		var want [][]byte
		var ok []transforms.Image
		for _, im := range imgs {
			sz, err := rs.OutputSize(im.W, im.H, im.C)
			if err != nil {
				t.Fatal(err)
			}
			w := make([]byte, sz)
			if err := spec.MustCompile().NewWorker().Apply(im, w); err != nil {
				continue // the CPU refuses it (a grey image with 3 means): so must the GPU
			}
			want = append(want, w)
			ok = append(ok, im)
		}
		// Three concurrent callers, each with the whole batch.
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for g := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([][]byte, len(ok))
				for i := range got {
					got[i] = make([]byte, len(want[i]))
				}
				if err := rs.Run(ok, got); err != nil {
					errs[g] = err
					return
				}
				for i := range got {
					if !bytes.Equal(got[i], want[i]) {
						errs[g] = fmt.Errorf("image %d (%dx%dx%d): GPU differs from CPU at byte %d", i, ok[i].W, ok[i].H, ok[i].C, firstDiff(got[i], want[i]))
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Errorf("%+v: %v", spec, err)
		}
		if err := rs.Close(); err != nil {
			t.Fatal(err)
		}
		if err := rs.Run(ok[:1], [][]byte{make([]byte, len(want[0]))}); !errors.Is(err, ErrClosed) {
			t.Errorf("Run after Close: %v", err)
		}
	}
}

// TestDeviceManySizes: batches of images of many sizes, each batch with its own weights,
// several batches in flight on their own streams, give the CPU path's bytes.
func testManySizes(t *testing.T, d *Device) {
	r := rand.New(rand.NewPCG(7, 7))
	spec := transforms.Spec{Resize: 96, CropW: 80, CropH: 80, Filter: transforms.Lanczos}
	rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{Streams: 3, MaxBatchBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rounds, n, span := 3, 40, 800
	if d.Info().Name == fakeDeviceName { // the fake runs the kernels on one core
		rounds, n, span = 2, 16, 300
	}
	for round := 0; round < rounds; round++ {
		var imgs []transforms.Image
		var want, got [][]byte
		for i := 0; i < n; i++ {
			im := randomImage(r, 200+r.IntN(span), 200+r.IntN(span), 3)
			w := make([]byte, 80*80*3)
			if err := spec.MustCompile().NewWorker().Apply(im, w); err != nil {
				t.Fatal(err)
			}
			imgs, want, got = append(imgs, im), append(want, w), append(got, make([]byte, len(w)))
		}
		if err := rs.Run(imgs, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("round %d image %d: GPU differs from CPU", round, i)
			}
		}
	}
}

// skipNoGPU skips a test or benchmark that needs a GPU, or fails it when PACKER_REQUIRE_GPU=1,
// so that a GPU machine whose driver is broken cannot pass the GPU checks by skipping them.
func skipNoGPU(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("PACKER_REQUIRE_GPU") == "1" {
		tb.Fatalf("PACKER_REQUIRE_GPU=1: "+format, args...)
	}
	tb.Skipf(format, args...)
}
