package shard_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/packer-dev/packer/shard"
)

// Write three 2×2 grey images to a shard file and read them back.
func Example() {
	dir, err := os.MkdirTemp("", "shard-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "shard-00000.pks")

	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	w, err := shard.NewWriter(f, shard.WriterOptions{
		Sample: shard.SampleSpec{Shape: []int{2, 2, 1}, DType: shard.Uint8, Layout: "hwc"},
		Label:  shard.LabelSpec{DType: "int64"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i, img := range [][]byte{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}} {
		if err := w.Append(img, int64(i%2), nil, nil); err != nil {
			log.Fatal(err)
		}
	}
	if err := errors.Join(w.Close(), f.Close()); err != nil {
		log.Fatal(err)
	}

	r, err := shard.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Println("records:", r.Len(), "record size:", r.RecordSize(), "shape:", r.Spec().Shape)
	for i := 0; i < r.Len(); i++ {
		data, err := r.Record(i)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(i, data, "label", r.Label(i))
	}
	// Records 1 and 2 are one contiguous range of the file.
	off, n := r.DataRange(1, 3)
	fmt.Println("records 1-2 at offset", off, "length", n)
	// Output:
	// records: 3 record size: 4 shape: [2 2 1]
	// 0 [0 1 2 3] label 0
	// 1 [4 5 6 7] label 1
	// 2 [8 9 10 11] label 0
	// records 1-2 at offset 4100 length 8
}

// Check a shard and report every fault.
func ExampleScan() {
	dir, _ := os.MkdirTemp("", "shard-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "s.pks")
	out, _ := os.Create(path)
	w, _ := shard.NewWriter(out, shard.WriterOptions{Sample: shard.SampleSpec{Shape: []int{-1}, DType: shard.Uint8, Layout: "hwc"}})
	for i := 0; i < 4; i++ {
		w.Append([]byte("record"), 0, nil, nil)
	}
	if err := errors.Join(w.Close(), out.Close()); err != nil {
		log.Fatal(err)
	}
	// Damage records 1 and 3 (variable-size records are one checksum block each).
	b, _ := os.ReadFile(path)
	b[shard.Align+6+2] ^= 1
	b[shard.Align+18+2] ^= 1
	os.WriteFile(path, b, 0o644)

	f, _ := os.Open(path)
	defer f.Close()
	err := shard.Scan(f, int64(len(b)), "s.pks", func(e *shard.CorruptionError) {
		fmt.Println(e.Record, e.Records, e)
	})
	fmt.Println("scan error:", err)
	// Output:
	// 1 1 s.pks: record 1 at offset 4102: shard: checksum mismatch: block 1 CRC 0xa4d3066c, stored 0x7996acd4
	// 3 1 s.pks: record 3 at offset 4114: shard: checksum mismatch: block 3 CRC 0xa4d3066c, stored 0x7996acd4
	// scan error: <nil>
}

// Stream one epoch of a dataset in shuffled batches, as a trainer would.
func ExampleDataset_NewLoader() {
	dir, _ := os.MkdirTemp("", "shard-example")
	defer os.RemoveAll(dir)
	spec := shard.SampleSpec{Shape: []int{1}, DType: shard.Uint8, Layout: "hwc"}
	m := &shard.Manifest{Packer: "example", Format: "shards", FormatVersion: shard.DatasetVersion(spec, nil), Sample: spec, Label: shard.LabelSpec{DType: "int64", Aux: []string{}}}
	for s := 0; s < 2; s++ {
		name := fmt.Sprintf("shard-%05d.pks", s)
		f, _ := os.Create(filepath.Join(dir, name))
		sum := sha256.New()
		w, _ := shard.NewWriter(io.MultiWriter(f, sum), shard.WriterOptions{Sample: spec, ShardIndex: s})
		for i := 0; i < 5; i++ {
			w.Append([]byte{byte(10*s + i)}, int64(5*s+i), nil, nil)
		}
		if err := errors.Join(w.Close(), f.Close()); err != nil {
			log.Fatal(err)
		}
		m.Files = append(m.Files, shard.FileEntry{Path: name, Size: w.Size(), SHA256: hex.EncodeToString(sum.Sum(nil)), Records: 5, FirstRecord: int64(5 * s)})
	}
	m.Count = 10
	data, _ := m.Marshal()
	os.WriteFile(filepath.Join(dir, shard.ManifestName), data, 0o644)

	d, err := shard.OpenDataset(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	l, err := d.NewLoader(shard.LoaderOptions{BatchSize: 4, Shuffle: true, Seed: 42})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for l.Next() {
		b := l.Batch() // valid until the next call to Next
		fmt.Println(b.Position, b.Data, b.Labels)
	}
	if err := l.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 0 [10 0 1 4] [5 0 1 4]
	// 4 [11 12 14 2] [6 7 9 2]
	// 8 [3 13] [3 8]
}
