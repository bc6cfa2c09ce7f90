package main

import (
	"encoding/binary"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/transforms"
)

// TestRecordImageFloat16: preview reads float16 records through the transforms' binary16
// decoder, negative zero, subnormals and values above 1 and unnormalised pixel values included.
func TestRecordImageFloat16(t *testing.T) {
	vals := []float32{0, 0.5, 1, 1.25, -0.25, 0x1p-20, 200}
	want := []uint8{0, 128, 255, 255, 0, 0, 200}
	data := make([]byte, 2*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint16(data[2*i:], transforms.Float16Bits(v))
	}
	m := &shard.Manifest{Sample: shard.SampleSpec{Shape: []int{1, len(vals), 1}, DType: shard.Float16, Layout: "hwc"}}
	img, err := recordImage(m, m.Sample.Shape, data)
	if err != nil {
		t.Fatal(err)
	}
	for x, w := range want {
		if c := img.RGBAAt(x, 0); c.R != w || c.G != w || c.B != w {
			t.Errorf("pixel %d (%v): %v, want grey %d", x, vals[x], c, w)
		}
	}
}
