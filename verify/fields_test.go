package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/shard"
)

// buildFieldsShard writes a one-shard dataset of 3 records with a text and a json field, the
// text of record 1 being "caption 1 zzQzz", and returns its directory and manifest.
func buildFieldsShard(t *testing.T) (string, *shard.Manifest) {
	t.Helper()
	dir := t.TempDir()
	spec := shard.SampleSpec{Shape: []int{-1, -1, 3}, DType: shard.Uint8, Layout: "hwc"}
	fields := []shard.Field{
		{Name: "caption", Kind: shard.KindText, Encoding: shard.EncodingRaw},
		{Name: "info", Kind: shard.KindJSON, Encoding: shard.EncodingRaw},
		{Name: "labels", Kind: shard.KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: shard.EncodingRaw},
	}
	m := &shard.Manifest{Packer: "test", Format: "shards", FormatVersion: 3, Sample: spec, Fields: fields,
		Label: shard.LabelSpec{DType: "int64", Aux: []string{}}}
	fw, err := testfix.CreateFile(filepath.Join(dir, "shard-00000.pks"), shard.WriterOptions{Sample: spec, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		text := []byte("caption " + string(rune('0'+i)))
		if i == 1 {
			text = append(text, " zzQzz"...)
		}
		if err := fw.AppendFields(make([]byte, 2*(i+1)*3), []int{2, i + 1, 3}, 1, nil, nil, [][]byte{text, []byte(`{"k":[1,2]}`), make([]byte, 8*i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Commit(); err != nil {
		t.Fatal(err)
	}
	m.Files = []shard.FileEntry{{Path: "shard-00000.pks", Size: fw.FileSize(), SHA256: fw.SHA256(), IndexSHA256: fw.IndexSHA256(), Records: 3}}
	m.Count, m.Inputs = 3, 3
	writeManifest(t, dir, m)
	return dir, m
}

// rewriteSealed replaces old by new in the shard's record data (same length) and makes the
// shard whole again as a writer would: the record's block CRC, the index and footer CRCs and
// the manifest's sha256 and index_sha256. Only a check of the values themselves can tell.
func rewriteSealed(t *testing.T, dir string, m *shard.Manifest, old, new string, record int) {
	t.Helper()
	path := filepath.Join(dir, "shard-00000.pks")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte(old))
	if at < 0 || len(old) != len(new) {
		t.Fatalf("%q not in the shard", old)
	}
	copy(b[at:], new)
	le := binary.LittleEndian
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	foot := b[len(b)-shard.FooterSize:]
	n, dataOff := le.Uint64(foot[0:]), le.Uint64(foot[16:])
	idxOff, idxLen := le.Uint64(foot[32:]), le.Uint64(foot[40:])
	index := b[idxOff : idxOff+idxLen]
	offs := func(i uint64) uint64 { return le.Uint64(index[i*8:]) } // the offsets part comes first
	rec := b[dataOff+offs(uint64(record)) : dataOff+offs(uint64(record)+1)]
	le.PutUint32(index[idxLen-n*4+uint64(record)*4:], crc32.Checksum(rec, castagnoli)) // one record a block
	le.PutUint32(foot[52:], crc32.Checksum(index, castagnoli))
	le.PutUint32(foot[56:], crc32.Checksum(foot[:56], castagnoli))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, isum := sha256.Sum256(b), sha256.Sum256(index)
	m.Files[0].SHA256, m.Files[0].IndexSHA256 = hex.EncodeToString(sum[:]), hex.EncodeToString(isum[:])
	writeManifest(t, dir, m)
}

// TestFieldsVerify: a dataset with fields verifies; a shard whose text is not UTF-8, or whose
// json is not JSON, though every checksum and hash agrees, is reported naming the record and
// the field; a manifest whose schema differs from the shard's is reported.
func TestFieldsVerify(t *testing.T) {
	dir, m := buildFieldsShard(t)
	if rep, _ := run(t, dir); !rep.OK {
		t.Fatalf("clean dataset: %v", rep.Faults)
	}
	rewriteSealed(t, dir, m, "zzQzz", "zz\xffzz", 1)
	rep, _ := run(t, dir)
	if rep.OK || len(rep.Faults) != 1 || rep.Faults[0].Kind != KindStructure || rep.Faults[0].First != 1 ||
		!strings.Contains(rep.Faults[0].Message, `field "caption": text is not valid UTF-8`) {
		t.Fatalf("non-UTF-8 caption: faults %v", rep.Faults)
	}

	dir, m = buildFieldsShard(t)
	rewriteSealed(t, dir, m, `{"k":[1,2]}`, `{"k":[1,2}}`, 0)
	if rep, _ := run(t, dir); rep.OK || len(rep.Faults) != 1 || !strings.Contains(rep.Faults[0].Message, `record 0: field "info": not one valid JSON value`) {
		t.Fatalf("bad json: faults %v", rep.Faults)
	}

	dir, m = buildFieldsShard(t)
	m.Fields[2].DType = "int32"
	writeManifest(t, dir, m)
	if rep, _ := run(t, dir); rep.OK || !strings.Contains(rep.Faults[0].Message, "shard fields [caption:text, info:json, labels:ndarray int64[-1]] differ from the manifest's") {
		t.Fatalf("schema mismatch: faults %v", rep.Faults)
	}
}
