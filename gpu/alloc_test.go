package gpu

import (
	"testing"
	"unsafe"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/transforms"
)

// TestPinnedAllocatorFallback: without a device the allocator is shard's locked mmap
// allocator, with the reader's alignment.
func TestPinnedAllocatorFallback(t *testing.T) {
	a := NewPinnedAllocator(nil)
	if a.Pinned() {
		t.Error("Pinned() without a device")
	}
	b, err := a.Alloc(3 * shard.Align)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 3*shard.Align || uintptr(unsafe.Pointer(&b[0]))%shard.Align != 0 {
		t.Errorf("buffer of %d bytes at %p", len(b), &b[0])
	}
	b[len(b)-1] = 1
	if err := a.Free(b); err != nil {
		t.Fatal(err)
	}
}

// testRunErrors: bad calls to a Resizer are errors, never panics or device faults.
func testRunErrors(t *testing.T, d *Device) {
	if _, err := NewResizer(nil, transforms.Spec{}.MustCompile(), ResizerOptions{}); err == nil {
		t.Error("NewResizer without a device: no error")
	}
	rs, err := NewResizer(d, transforms.Spec{Resize: 8, CropW: 6, CropH: 6, DType: transforms.Float32, Mean: []float64{0.5, 0.5, 0.5}, Std: []float64{0.2, 0.2, 0.2}}.MustCompile(), ResizerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	good := transforms.Image{W: 10, H: 12, C: 3, Pix: make([]byte, 360)}
	n, err := rs.OutputSize(10, 12, 3)
	if err != nil || n != 6*6*3*4 {
		t.Fatalf("OutputSize = %d, %v", n, err)
	}
	for name, c := range map[string]struct {
		imgs []transforms.Image
		dsts [][]byte
	}{
		"count":       {[]transforms.Image{good}, nil},
		"size":        {[]transforms.Image{good}, [][]byte{make([]byte, n-1)}},
		"short image": {[]transforms.Image{{W: 10, H: 12, C: 3, Pix: make([]byte, 359)}}, [][]byte{make([]byte, n)}},
		"empty image": {[]transforms.Image{{W: 0, H: 12, C: 3}}, [][]byte{make([]byte, n)}},
		"grey with 3 means": {[]transforms.Image{{W: 10, H: 12, C: 1, Pix: make([]byte, 120)}},
			[][]byte{make([]byte, 6*6*4)}},
	} {
		if err := rs.Run(c.imgs, c.dsts); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	if err := rs.Run([]transforms.Image{good}, [][]byte{make([]byte, n)}); err != nil {
		t.Errorf("good batch after bad ones: %v", err)
	}
	if err := rs.Run(nil, nil); err != nil {
		t.Errorf("empty batch: %v", err)
	}
}
