package testfix

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// A FileWriter's shard appears under its final name only at Commit, holds what was appended,
// and matches the size and SHA-256 reported; Abort leaves nothing behind.
func TestFileWriter(t *testing.T) {
	dir := t.TempDir()
	opts := shard.WriterOptions{Sample: shard.SampleSpec{Shape: []int{3}, DType: shard.Uint8, Layout: "hwc"}}
	path := filepath.Join(dir, "shard-00000.pks")
	fw, err := CreateFile(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	recs := [][]byte{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}
	for i, r := range recs {
		if err := fw.Append(r, int64(i), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("final name exists before Commit: %v", err)
	}
	if err := fw.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fw.Commit(); err == nil {
		t.Error("a second Commit succeeded")
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if fw.SHA256() != hex.EncodeToString(sum[:]) || fw.FileSize() != int64(len(data)) || fw.Path() != path {
		t.Errorf("SHA256/FileSize/Path = %s/%d/%s, want %x/%d/%s", fw.SHA256(), fw.FileSize(), fw.Path(), sum, len(data), path)
	}
	r, err := shard.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != len(recs) {
		t.Fatalf("%d records, want %d", r.Len(), len(recs))
	}
	for i, want := range recs {
		got, err := r.Record(i)
		if err != nil || !bytes.Equal(got, want) || r.Label(i) != int64(i) {
			t.Errorf("record %d = %v label %d (%v), want %v label %d", i, got, r.Label(i), err, want, i)
		}
	}

	fw2, err := CreateFile(filepath.Join(dir, "b.pks"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := fw2.Abort(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("Abort left files: %v", ents)
	}
}
