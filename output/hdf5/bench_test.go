package hdf5

import (
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// BenchmarkWrite writes 224×224×3 uint8 records (6 per 1 MiB chunk).
func BenchmarkWrite(b *testing.B) {
	rec := output.Record{Data: make([]byte, 224*224*3), Label: 3}
	for i := range rec.Data {
		rec.Data[i] = byte(i)
	}
	cfg := output.Config{Dir: b.TempDir(), Sample: shard.SampleSpec{Shape: []int{224, 224, 3}, DType: shard.Uint8}}
	out, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(rec.Data)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := out.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRead reads the same records back, 64 at a time, through Reader.
func BenchmarkRead(b *testing.B) {
	const n = 640
	dir := b.TempDir()
	cfg := output.Config{Dir: dir, Sample: shard.SampleSpec{Shape: []int{224, 224, 3}, DType: shard.Uint8}}
	out, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	rec := output.Record{Data: make([]byte, 224*224*3)}
	for range n {
		if err := out.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := out.Close(); err != nil {
		b.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 64*r.RecordSize())
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := range b.N {
		if err := r.Read(int64(i%(n/64))*64, 64, buf); err != nil {
			b.Fatal(err)
		}
	}
}
