package gpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/packer-dev/packer/transforms"
)

// kernelTime runs the two kernels of one device batch iters times back to back on a
// Resizer's first stream (inputs and weights uploaded once) and returns
// the device time per batch, measured with events, and the batch's plan.
func kernelTime(rs *Resizer, imgs []transforms.Image, iters int) (time.Duration, *batchPlan, error) {
	var rec recordPool
	plan, err := planBatch(rs.spec, imgs, nil, &rec, rs.luts)
	if err != nil {
		return 0, nil, err
	}
	var wts hostPool
	if err := plan.placeWeights(&rec, &wts); err != nil {
		return 0, nil, err
	}
	d := rs.dev
	s := <-rs.slots
	defer func() { rs.slots <- s }()
	jobBytes := 4 * len(plan.jobs)
	tableBytes := jobBytes + 4*len(wts.words)
	var dWts DevicePtr
	var ms float32
	err = d.Do(func() error {
		if err := rs.grow(s, plan.hostBytes, plan.srcBytes, tableBytes, plan.midBytes, plan.dstBytes); err != nil {
			return err
		}
		dWts = s.dJobs + DevicePtr(jobBytes)
		plan.stageSources(imgs, s.hSrc)
		putInt32s(s.hJobs, plan.jobs)
		putInt32s(s.hJobs[jobBytes:], wts.words)
		if err := d.CopyHtoDAsync(s.dSrc, s.hSrc[:plan.srcBytes], s.stream); err != nil {
			return err
		}
		if err := d.CopyHtoDAsync(s.dJobs, s.hJobs[:tableBytes], s.stream); err != nil {
			return err
		}
		start, err := d.NewEvent()
		if err != nil {
			return err
		}
		defer d.DestroyEvent(start)
		end, err := d.NewEvent()
		if err != nil {
			return err
		}
		defer d.DestroyEvent(end)
		if err := d.RecordEvent(start, s.stream); err != nil {
			return err
		}
		block := Dim{BlockSize, 1, 1}
		for i := 0; i < iters; i++ {
			if err := d.Launch(kernelHPass, plan.grid(plan.maxHWork), block, s.stream,
				hpassParams(s.dJobs, s.dSrc, dWts, s.dMid)); err != nil {
				return err
			}
			if err := d.Launch(kernelVPass, plan.grid(plan.maxVWork), block, s.stream,
				vpassParams(s.dJobs, s.dMid, dWts, rs.dLUT, s.dDst, plan.layout, plan.esize)); err != nil {
				return err
			}
		}
		if err := d.RecordEvent(end, s.stream); err != nil {
			return err
		}
		if err := d.EventSynchronize(end); err != nil {
			return err
		}
		ms, err = d.ElapsedMs(start, end)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return time.Duration(float64(ms) * 1e6 / float64(iters)), plan, nil
}

// BenchmarkDevice measures, on a real GPU, the kernels alone (images/s and the fraction of
// the device's peak memory bandwidth that the bytes they must move represent) and Run end to
// end (pinned staging, both copies, kernels, scatter) for batches of 64 1080p images through
// Resize(256) + CenterCrop(224). It skips without a GPU.
func BenchmarkDevice(b *testing.B) {
	info, err := Probe()
	if err != nil {
		skipNoGPU(b, "no CUDA device: %v", err)
	}
	d, err := Open(0)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	r := rand.New(rand.NewPCG(9, 9))
	imgs := make([]transforms.Image, 64)
	for i := range imgs {
		imgs[i] = randomImage(r, 1920, 1080, 3)
	}
	for _, f := range []transforms.Filter{transforms.Bilinear, transforms.Lanczos} {
		spec := transforms.Spec{Resize: 256, CropW: 224, CropH: 224, Filter: f}
		rs, err := NewResizer(d, spec.MustCompile(), ResizerOptions{MaxBatchBytes: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		dsts := make([][]byte, len(imgs))
		for i := range dsts {
			dsts[i] = make([]byte, 224*224*3)
		}
		b.Run(fmt.Sprintf("kernels/%s/1080p_256_224", f), func(b *testing.B) {
			if err := rs.Run(imgs, dsts); err != nil { // warm up: buffers, weights, JIT
				b.Fatal(err)
			}
			b.ResetTimer()
			per, plan, err := kernelTime(rs, imgs, b.N)
			if err != nil {
				b.Fatal(err)
			}
			_, dram := plan.traffic()
			kernelBytes := dram - int64(plan.srcBytes) - int64(plan.dstBytes) // without the copies' DMA
			b.ReportMetric(float64(len(imgs))/per.Seconds(), "images/s")
			b.ReportMetric(float64(kernelBytes)/per.Seconds()/info.MemoryBandwidth(), "bw_fraction")
		})
		b.Run(fmt.Sprintf("run/%s/1080p_256_224", f), func(b *testing.B) {
			b.SetBytes(int64(len(imgs) * 1920 * 1080 * 3))
			for range b.N {
				if err := rs.Run(imgs, dsts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(imgs))/b.Elapsed().Seconds(), "images/s")
		})
		if err := rs.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// testKernelTiming runs the benchmark's timing path once (on the fake driver it checks the
// calls, not the speed).
func testKernelTiming(t *testing.T, d *Device) {
	r := rand.New(rand.NewPCG(10, 10))
	rs, err := NewResizer(d, transforms.Spec{Resize: 64, CropW: 56, CropH: 56}.MustCompile(), ResizerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	imgs := []transforms.Image{randomImage(r, 300, 200, 3), randomImage(r, 123, 321, 3)}
	per, plan, err := kernelTime(rs, imgs, 3)
	if err != nil {
		t.Fatal(err)
	}
	link, dram := plan.traffic()
	t.Logf("kernels: %v per batch of %d; %d bytes over the link, %d through device memory", per, len(imgs), link, dram)
	if per <= 0 {
		t.Errorf("kernel time %v", per)
	}
}
