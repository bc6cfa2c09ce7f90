package shard

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// TestBatchViews: a batch's typed view is the little-endian decoding of its bytes, of the
// dataset's dtype only, and BatchShape is [B, sample...] for fixed-size records.
func TestBatchViews(t *testing.T) {
	for _, dt := range []DType{Uint8, Float16, Float32} {
		opts := WriterOptions{Sample: SampleSpec{Shape: []int{2, 3}, DType: dt, Layout: "hw"}, Label: LabelSpec{DType: "int64"}}
		recs := randomRecords(opts, 10, 3)
		d, err := OpenDataset(buildDataset(t, opts, recs, []int{4, 6}))
		if err != nil {
			t.Fatal(err)
		}
		l, err := d.NewLoader(LoaderOptions{BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		for l.Next() {
			b := l.Batch()
			if b.DType() != dt || !slices.Equal(b.BatchShape(), []int{b.Len(), 2, 3}) {
				t.Fatalf("%s: dtype %s, batch shape %v", dt, b.DType(), b.BatchShape())
			}
			u8, err8 := b.Uint8()
			f16, err16 := b.Float16Bits()
			f32, err32 := b.Float32()
			switch dt {
			case Uint8:
				if err8 != nil || !slices.Equal(u8, b.Data) || err16 == nil || err32 == nil {
					t.Fatalf("uint8 views: %v %v %v", err8, err16, err32)
				}
			case Float16:
				if err16 != nil || err8 == nil || err32 == nil || len(f16) != len(b.Data)/2 {
					t.Fatalf("float16 views: %v %v %v", err8, err16, err32)
				}
				for i, v := range f16 {
					if v != binary.LittleEndian.Uint16(b.Data[2*i:]) {
						t.Fatalf("float16 element %d: %#x", i, v)
					}
				}
			case Float32:
				if err32 != nil || err8 == nil || err16 == nil || len(f32) != len(b.Data)/4 {
					t.Fatalf("float32 views: %v %v %v", err8, err16, err32)
				}
				for i, v := range f32 {
					if math.Float32bits(v) != binary.LittleEndian.Uint32(b.Data[4*i:]) {
						t.Fatalf("float32 element %d: %v", i, v)
					}
				}
			}
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
		l.Close()
		d.Close()
	}
	if _, err := view[float32](make([]byte, 6)); err == nil {
		t.Fatal("a 6-byte slice viewed as float32")
	}
}
