package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// windowSource is a PlannedSource of n RGB images of varied sizes that, when the plan asks
// for windows, decodes of each only the region the transform reads (with a margin on some),
// as the image-folder source does for JPEGs.
type windowSource struct {
	n       int
	plan    source.DecodePlan
	planned atomic.Bool
	windows atomic.Int64 // frames emitted as windows
}

func (s *windowSource) Info() source.SourceInfo {
	return source.SourceInfo{Kind: "win", Classes: []string{"a", "b"}, Spec: map[string]any{"kind": "win"}, Count: int64(s.n), Frame: source.FrameShape{C: 3}}
}

func (s *windowSource) PlanDecode(p source.DecodePlan) { s.plan = p; s.planned.Store(true) }

func (s *windowSource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	for i := 0; i < s.n; i++ {
		if err := emit(source.Item{Seq: int64(i), Name: fmt.Sprintf("w-%03d", i), Label: int64(i % 2)}); err != nil {
			return err
		}
	}
	return nil
}

func (s *windowSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	i := int(it.Seq)
	w, h := 20+i*7%53, 15+i*11%61
	im := transforms.Image{W: w, H: h, C: 3, Pix: make([]byte, w*h*3)}
	for k := range im.Pix {
		im.Pix[k] = byte(k*31 + i*17 + k/(w*3)*5)
	}
	if !s.plan.Windows {
		return emit(source.Clip{Frames: []transforms.Image{im}, Label: it.Label})
	}
	r := s.plan.Transform.Region(w, h)
	if r.Empty() {
		return emit(source.Clip{Frames: []transforms.Image{im}, Label: it.Label})
	}
	m := i % 3 // a margin on some, none on others: the window's edges on the region's
	x0, y0 := max(r.Min.X-m, 0), max(r.Min.Y-m, 0)
	x1, y1 := min(r.Max.X+m, w), min(r.Max.Y+m, h)
	win := transforms.Image{W: x1 - x0, H: y1 - y0, C: 3, Pix: make([]byte, (x1-x0)*(y1-y0)*3)}
	for y := y0; y < y1; y++ {
		copy(win.Pix[(y-y0)*win.W*3:(y-y0+1)*win.W*3], im.Pix[(y*w+x0)*3:(y*w+x1)*3])
	}
	s.windows.Add(1)
	return emit(source.Clip{Frames: []transforms.Image{win}, Windows: []source.Window{{X: x0, Y: y0, FullW: w, FullH: h}}, Label: it.Label})
}

// cpuWindowBatch is cpuBatch that also takes windows (transforms.Worker.ApplyWindow), as
// the GPU resizer does through cmd/packer's adapter.
type cpuWindowBatch struct {
	cpuBatch
	windowCalls atomic.Int64
}

func (c *cpuWindowBatch) RunWindows(imgs []transforms.Image, wins []source.Window, dsts [][]byte) error {
	c.windowCalls.Add(1)
	w := c.spec.NewWorker()
	for i := range imgs {
		if err := w.ApplyWindow(imgs[i], wins[i].X, wins[i].Y, wins[i].FullW, wins[i].FullH, dsts[i]); err != nil {
			return err
		}
	}
	return nil
}

// TestBuildBatchResizerWindows: with a WindowResizer, the batch path keeps region decoding
// on the CPU (the source is asked for windows and the resizer gets them with their offsets),
// and the output is byte for byte the CPU path's and the whole-frame batch path's.
func TestBuildBatchResizerWindows(t *testing.T) {
	tmp := t.TempDir()
	spec := transforms.Spec{Resize: 24, CropW: 16, CropH: 20, Filter: transforms.Bicubic}
	var outs []string
	for _, mode := range []string{"cpu", "batch", "batch-windows"} {
		out := filepath.Join(tmp, mode)
		src := &windowSource{n: 70}
		var plain *cpuBatch
		var win *cpuWindowBatch
		_, err := build(t, src, out, func(o *Options) {
			o.Workers = 3
			o.Transform = spec.MustCompile()
			switch mode {
			case "batch":
				plain = &cpuBatch{spec: spec.MustCompile()}
				o.Resizer = plain
			case "batch-windows":
				win = &cpuWindowBatch{cpuBatch: cpuBatch{spec: spec.MustCompile()}}
				o.Resizer = win
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if !src.planned.Load() {
			t.Fatalf("%s: PlanDecode not called", mode)
		}
		switch mode {
		case "batch":
			if src.plan.Windows || src.windows.Load() != 0 {
				t.Errorf("batch without a WindowResizer: the source was asked for windows")
			}
		default:
			if !src.plan.Windows || src.windows.Load() != 70 {
				t.Errorf("%s: %d windows decoded (plan %v), want 70", mode, src.windows.Load(), src.plan.Windows)
			}
		}
		if win != nil && (win.windowCalls.Load() == 0 || win.calls.Load() != 0) {
			t.Errorf("batch-windows: %d RunWindows and %d Run calls", win.windowCalls.Load(), win.calls.Load())
		}
		outs = append(outs, out)
	}
	for _, other := range outs[1:] {
		if err := sameTree(outs[0], other); err != nil {
			t.Errorf("%s differs from the CPU path: %v", filepath.Base(other), err)
		}
	}
}

// sameTree reports how two output folders differ, if they do.
func sameTree(a, b string) error {
	var names []string
	err := filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no files in %s", a)
	}
	for _, n := range names {
		x, err := os.ReadFile(filepath.Join(a, n))
		if err != nil {
			return err
		}
		y, err := os.ReadFile(filepath.Join(b, n))
		if err != nil {
			return err
		}
		if !bytes.Equal(x, y) {
			return fmt.Errorf("%s differs", n)
		}
	}
	return nil
}

// TestBuildDeviceGroupsByCount: pre-read items of 200 KiB (HD JPEGs) reach a BatchResizer 16
// to a call, not 1 or 2 as the CPU path's 256 KiB raw group budget would give.
func TestBuildDeviceGroupsByCount(t *testing.T) {
	rs := &cpuBatch{spec: transforms.Spec{}.MustCompile()}
	_, err := build(t, &genSource{n: 64, raw: 200 << 10}, filepath.Join(t.TempDir(), "out"), func(o *Options) {
		o.Workers = 2
		o.Resizer = rs
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := rs.calls.Load(); n != 64/deviceGroup {
		t.Errorf("%d resizer calls for 64 items of 200 KiB, want %d", n, 64/deviceGroup)
	}
}
