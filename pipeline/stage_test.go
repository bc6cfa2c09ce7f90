package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// stagingBatch is cpuWindowBatch with frames (a FrameStager): it checks that every image it
// is given is one of its frames, not yet released (so the batch worker made no second copy
// and released nothing early), and poisons each frame on release, so that a frame read after
// its release would change the output.
type stagingBatch struct {
	cpuWindowBatch
	fail error // when set, Run and RunWindows fail (after the checks)

	mu       sync.Mutex
	live     map[*byte]bool // frames handed out and not released
	frames   int            // Frame calls
	released int
	images   int // images given to Run or RunWindows
	errs     []error
}

func (s *stagingBatch) Frame(n int) ([]byte, func()) {
	pix := make([]byte, n+1)[:n] // never empty, so it has a first byte to name it by
	key := unsafe.SliceData(pix)
	s.mu.Lock()
	if s.live == nil {
		s.live = make(map[*byte]bool)
	}
	s.live[key] = true
	s.frames++
	s.mu.Unlock()
	done := false
	return pix, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if done {
			s.errs = append(s.errs, errors.New("a frame released twice"))
			return
		}
		done = true
		delete(s.live, key)
		s.released++
		for i := range pix {
			pix[i] = 0x6B
		}
	}
}

func (s *stagingBatch) check(imgs []transforms.Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, im := range imgs {
		if !s.live[unsafe.SliceData(im.Pix)] {
			s.errs = append(s.errs, fmt.Errorf("image %d of a call is not a live frame", i))
		}
	}
	s.images += len(imgs)
}

func (s *stagingBatch) Run(imgs []transforms.Image, dsts [][]byte) error {
	s.check(imgs)
	if s.fail != nil {
		return s.fail
	}
	err := s.cpuWindowBatch.Run(imgs, dsts)
	s.check(imgs) // still live when the call returns
	return err
}

func (s *stagingBatch) RunWindows(imgs []transforms.Image, wins []source.Window, dsts [][]byte) error {
	s.check(imgs)
	if s.fail != nil {
		return s.fail
	}
	err := s.cpuWindowBatch.RunWindows(imgs, wins, dsts)
	s.check(imgs)
	return err
}

// reusingSource decodes each item's frames into one buffer of its own, which it overwrites
// after each emit returns, as sources that reuse their buffers may.
type reusingSource struct{ source.Source }

func (s reusingSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	var bufs [][]byte // one per frame of a clip, reused by the next clip
	return s.Source.Decode(ctx, it, func(c source.Clip) error {
		c.Frames = slices.Clone(c.Frames)
		for f, fr := range c.Frames {
			if f == len(bufs) {
				bufs = append(bufs, nil)
			}
			bufs[f] = append(bufs[f][:0], fr.Pix...)
			c.Frames[f].Pix = bufs[f]
		}
		err := emit(c)
		for _, b := range bufs {
			for i := range b {
				b[i] = 0x5A
			}
		}
		return err
	})
}

// TestBuildFrameStager: with a FrameStager, the batch worker copies each decoded frame or
// window once, into a frame of the resizer's, and hands the resizer exactly that memory (no
// second copy); every frame is released once, after the call that read it; the output is the
// CPU path's, whole frames (a source reusing its buffer, clips, failing items) and windows.
func TestBuildFrameStager(t *testing.T) {
	tmp := t.TempDir()
	spec := transforms.Spec{Resize: 24, CropW: 16, CropH: 20, Filter: transforms.Bicubic}
	for _, windowed := range []bool{false, true} {
		var outs []string
		for _, staged := range []bool{false, true} {
			out := filepath.Join(tmp, fmt.Sprint(windowed, staged))
			sp := transforms.Spec{}
			if windowed {
				sp = spec
			}
			st := &stagingBatch{cpuWindowBatch: cpuWindowBatch{cpuBatch: cpuBatch{spec: sp.MustCompile()}}}
			var src source.Source = &windowSource{n: 70}
			if !windowed {
				src = reusingSource{&genSource{n: 90, bad: map[int]bool{5: true}, odd: map[int]bool{33: true}, late: map[int]bool{21: true},
					delay: true, clips: 2, frame: source.FrameShape{C: 1}}}
			}
			_, err := build(t, src, out, func(o *Options) {
				o.Workers = 3
				o.Transform = sp.MustCompile()
				if staged {
					o.Resizer = st
				} else {
					o.Resizer = &st.cpuWindowBatch
				}
			})
			if err != nil {
				t.Fatalf("windowed %v, staged %v: %v", windowed, staged, err)
			}
			outs = append(outs, out)
			if !staged {
				continue
			}
			if err := errors.Join(st.errs...); err != nil {
				t.Errorf("windowed %v: %v", windowed, err)
			}
			if st.frames == 0 || st.images == 0 || st.images/2 > st.frames {
				t.Errorf("windowed %v: %d frames staged for %d images run (each checked twice)", windowed, st.frames, st.images)
			}
			if windowed && (st.frames != 70 || st.images != 2*70) {
				// One item, one frame: each copied once into a frame, and run from there.
				t.Errorf("windowed: %d frames staged and %d run for 70 one-frame items", st.frames, st.images/2)
			}
			if st.released != st.frames || len(st.live) != 0 {
				t.Errorf("windowed %v: %d of %d frames released, %d live", windowed, st.released, st.frames, len(st.live))
			}
		}
		if err := sameTree(outs[0], outs[1]); err != nil {
			t.Errorf("windowed %v: frames staged by the resizer differ from the copied ones: %v", windowed, err)
		}
	}
}

// TestBuildFrameStagerFailure: when the resizer fails, the build fails and every frame is
// still released exactly once.
func TestBuildFrameStagerFailure(t *testing.T) {
	st := &stagingBatch{cpuWindowBatch: cpuWindowBatch{cpuBatch: cpuBatch{spec: transforms.Spec{}.MustCompile()}}, fail: errors.New("device lost")}
	_, err := build(t, &genSource{n: 40, frame: source.FrameShape{C: 1}}, filepath.Join(t.TempDir(), "out"), func(o *Options) {
		o.Workers = 2
		o.Resizer = st
	})
	if err == nil || !errors.Is(err, st.fail) {
		t.Fatalf("err = %v, want the resizer's", err)
	}
	if err := errors.Join(st.errs...); err != nil {
		t.Error(err)
	}
	if st.frames == 0 || st.released != st.frames || len(st.live) != 0 {
		t.Errorf("%d of %d frames released, %d live", st.released, st.frames, len(st.live))
	}
}
