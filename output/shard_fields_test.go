package output_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/output/internal/fieldtest"
	"github.com/packer-dev/packer/shard"
)

// TestShardDatasetFields: a shards dataset with fields (one shard written by the shard
// package's writer) read through OpenShardDataset, the reader half of --format shards: Fields
// gives every record's values, Record the sample alone.
func TestShardDatasetFields(t *testing.T) {
	dir := t.TempDir()
	recs := fieldtest.Records(4)
	label := shard.LabelSpec{DType: "int64", Aux: []string{}}
	var buf bytes.Buffer
	w, err := shard.NewWriter(&buf, shard.WriterOptions{Sample: fieldtest.Sample, Label: label, Fields: fieldtest.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.AppendFields(r.Data, nil, r.Label, nil, nil, r.Fields); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	name := "shard-00000.pks"
	if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	m := &shard.Manifest{Format: shard.FormatShards, FormatVersion: 3, Count: int64(len(recs)), Sample: fieldtest.Sample,
		Label: label, Fields: fieldtest.Schema(), Files: []shard.FileEntry{{Path: name, Size: int64(buf.Len()),
			SHA256: hex.EncodeToString(sum[:]), Records: int64(len(recs)), IndexSHA256: w.IndexSHA256()}}}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shard.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := output.OpenShardDataset(dir, shard.DirFS(dir), m)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	fieldtest.CheckDataset(t, ds, recs)
	for i, r := range recs {
		if got, err := ds.Record(int64(i)); err != nil || !bytes.Equal(got, r.Data) {
			t.Fatalf("record %d: sample of %d bytes (%v), want the %d written", i, len(got), err, len(r.Data))
		}
	}
}
