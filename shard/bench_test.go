package shard

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// benchOpts is a CIFAR-like record: 32×32×3 bytes.
var benchOpts = WriterOptions{Sample: SampleSpec{Shape: []int{32, 32, 3}, DType: Uint8, Layout: "hwc"}}

const benchRecords = 16384 // 48 MiB

// benchDataset builds a two-shard dataset of benchRecords records.
func benchDataset(b *testing.B) (string, []testRecord) {
	b.Helper()
	recs := randomRecords(benchOpts, benchRecords, 12)
	return buildDataset(b, benchOpts, recs, []int{benchRecords / 2, benchRecords / 2}), recs
}

func BenchmarkReader(b *testing.B) {
	dir, _ := benchDataset(b)
	total := int64(benchRecords) * benchOpts.Sample.Size()
	b.Run("ReadRecords", func(b *testing.B) {
		r, err := Open(filepath.Join(dir, "shard-00000.pks"))
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		buf := make([]byte, 256*r.RecordSize())
		b.SetBytes(r.DataSize())
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			for i := 0; i < r.Len(); i += 256 {
				if _, err := r.ReadRecords(i, min(i+256, r.Len()), buf); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, c := range []struct {
		name string
		opts LoaderOptions
	}{
		{"Loader", LoaderOptions{BatchSize: 256, SkipCRC: true}},
		{"LoaderDirect", LoaderOptions{BatchSize: 256, Direct: true, SkipCRC: true}},
		{"LoaderVerify", LoaderOptions{BatchSize: 256}},
		{"LoaderShuffle", LoaderOptions{BatchSize: 256, Shuffle: true, Seed: 1, SkipCRC: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			d, err := OpenDataset(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			b.SetBytes(total)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				l, err := d.NewLoader(c.opts)
				if err != nil {
					b.Fatal(err)
				}
				for l.Next() {
				}
				if err := l.Err(); err != nil {
					b.Fatal(err)
				}
				l.Close()
			}
		})
	}
}

func BenchmarkScan(b *testing.B) {
	dir, _ := benchDataset(b)
	path := filepath.Join(dir, "shard-00000.pks")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	report := func(e *CorruptionError) { b.Fatal(e) }
	b.Run("memory", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for range b.N {
			if err := Scan(bytes.NewReader(data), int64(len(data)), "bench", report); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("file", func(b *testing.B) {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for range b.N {
			if err := Scan(f, int64(len(data)), path, report); err != nil {
				b.Fatal(err)
			}
		}
	})
}
