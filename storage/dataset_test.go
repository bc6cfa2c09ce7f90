package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/storagetest"
)

// opaque is a backend seen only through the storage.Backend interface: the shard readers take
// the path they take for a backend that is not the local file system.
type opaque struct{ storage.Backend }

// writeDataset writes a dataset of n records in shards of per records through the backend
// alone (shard.NewWriter into Create's Writer, the manifest last) and returns the records.
func writeDataset(t *testing.T, b storage.Backend, n, per int) [][]byte {
	t.Helper()
	ctx := context.Background()
	opts := shard.WriterOptions{Sample: shard.SampleSpec{Shape: []int{16, 16, 3}, DType: shard.Uint8, Layout: "hwc"}}
	m := &shard.Manifest{Packer: "test", Format: shard.FormatShards, FormatVersion: shard.Version, Sample: opts.Sample, Label: shard.LabelSpec{DType: "int64", Aux: []string{}}}
	var recs [][]byte
	for s := 0; s*per < n; s++ {
		name := fmt.Sprintf("shard-%05d.pks", s)
		w, err := b.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		o := opts
		o.ShardIndex = s
		sw, err := shard.NewWriter(io.MultiWriter(w, h), o)
		if err != nil {
			t.Fatal(err)
		}
		first := len(recs)
		for i := s * per; i < min(n, (s+1)*per); i++ {
			rec := bytes.Repeat([]byte{byte(i), byte(i >> 8), byte(s)}, 16*16)
			if err := sw.Append(rec, int64(i%10), nil, nil); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, rec)
		}
		if err := sw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, shard.FileEntry{Path: name, Size: sw.Size(), SHA256: hex.EncodeToString(h.Sum(nil)),
			Records: int64(len(recs) - first), FirstRecord: int64(first)})
	}
	m.Count = int64(len(recs))
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	storagetest.Put(t, b, shard.ManifestName, data)
	return recs
}

// TestDatasetThroughBackend: a dataset written through the local backend is read back through
// the seam, by the local path (O_DIRECT asked) and through Open as any backend would be, with
// the same records and Loader batches.
func TestDatasetThroughBackend(t *testing.T) {
	l := storage.NewLocal(t.TempDir())
	recs := writeDataset(t, l, 150, 64)
	for _, b := range []storage.Backend{l, opaque{l}} {
		fsys := storage.ShardFS(context.Background(), b)
		_, local := fsys.(shard.LocalFS)
		d, err := shard.OpenDatasetFS(fsys, shard.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Len() != 150 || d.NumShards() != 3 {
			t.Fatalf("local %v: Len %d, shards %d", local, d.Len(), d.NumShards())
		}
		for _, i := range []int64{149, 0, 64, 63, 100} {
			got, err := d.Record(i)
			if err != nil || !bytes.Equal(got, recs[i]) {
				t.Fatalf("local %v: record %d: %v", local, i, err)
			}
		}
		ld, err := d.NewLoader(shard.LoaderOptions{BatchSize: 32, Shuffle: true, Seed: 5, Direct: true})
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for ld.Next() {
			bt := ld.Batch()
			n := len(bt.Data) / bt.Len()
			for k, idx := range bt.Indices {
				if !bytes.Equal(bt.Data[k*n:(k+1)*n], recs[idx]) {
					t.Fatalf("local %v: loader record %d differs", local, idx)
				}
				seen++
			}
		}
		if err := ld.Err(); err != nil || seen != 150 {
			t.Fatalf("local %v: loader: %v after %d records", local, err, seen)
		}
		ld.Close()
		d.Close()
	}
}
