package shard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// buildCutDataset writes a dataset cut at fixed input positions (FORMAT.md "Dataset"): shard s
// holds counts[s] of recs and is the version-4 shard of cuts[s]. It returns the folder and the
// manifest.
func buildCutDataset(t *testing.T, opts WriterOptions, recs []testRecord, counts []int, cuts []ShardCut) (string, *Manifest) {
	t.Helper()
	dir := t.TempDir()
	m := &Manifest{Packer: "test", Format: FormatShards, FormatVersion: Version, Sample: opts.Sample, Label: opts.Label, CutInputs: 10}
	next := 0
	for s, c := range counts {
		o := opts
		o.Cut = &cuts[s]
		name := fmt.Sprintf("shard-%05d.pks", s)
		var buf bytes.Buffer
		w, err := NewWriter(&buf, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs[next : next+c] {
			if err := w.AppendShape(r.data, r.shape, r.label, r.aux, r.meta); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(buf.Bytes())
		m.Files = append(m.Files, FileEntry{Path: name, Size: int64(buf.Len()), SHA256: hex.EncodeToString(sum[:]), IndexSHA256: w.IndexSHA256(),
			Records: int64(c), FirstRecord: int64(next), Shard: &cuts[s]})
		next += c
	}
	m.Count = int64(next)
	writeTestManifest(t, dir, m)
	return dir, m
}

func writeTestManifest(t *testing.T, dir string, m *Manifest) {
	t.Helper()
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readAll opens dir and reads every record, returning the first error.
func readAll(dir string) error {
	d, err := OpenDataset(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	for i := range d.Len() {
		if _, err := d.Record(i); err != nil {
			return err
		}
	}
	return nil
}

// TestCutShards: version-4 shards (fixed and variable size) name their chunk and piece, follow
// their layout version otherwise, and read back; a mixed-up file is refused by its chunk and
// piece even where its entry's size and hashes were made to fit, and so are a manifest whose
// chunks are out of order and a version-4 header that holds an index.
func TestCutShards(t *testing.T) {
	varOpts := WriterOptions{Sample: SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}, Label: LabelSpec{DType: "int64", Aux: []string{}}}
	cuts := []ShardCut{{0, 0}, {0, 1}, {2, 0}}
	for _, opts := range []WriterOptions{fixedDatasetOpts, varOpts} {
		recs := randomRecords(opts, 30, 5)
		dir, m := buildCutDataset(t, opts, recs, []int{10, 5, 15}, cuts)
		d, err := OpenDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		for s := range 3 {
			r, err := d.Shard(s)
			if err != nil {
				t.Fatal(err)
			}
			wantLayout := 1
			if !opts.Sample.Fixed() {
				wantLayout = 2
			}
			if r.Version() != 4 || int(r.h.layout) != wantLayout || r.ShardIndex() != -1 || *r.Cut() != cuts[s] {
				t.Errorf("shard %d: version %d layout %d index %d cut %v", s, r.Version(), r.h.layout, r.ShardIndex(), r.Cut())
			}
		}
		for i := range d.Len() {
			got, err := d.Record(i)
			if err != nil || !bytes.Equal(got, recs[i].data) {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		d.Close()

		// Shards 0 and 1 swapped, their entries' size and hashes swapped too: only the chunk
		// and piece tell them apart.
		a, b := filepath.Join(dir, m.Files[0].Path), filepath.Join(dir, m.Files[1].Path)
		da, _ := os.ReadFile(a)
		db, _ := os.ReadFile(b)
		os.WriteFile(a, db, 0o644)
		os.WriteFile(b, da, 0o644)
		f0, f1 := m.Files[0], m.Files[1]
		m.Files[0].Size, m.Files[0].SHA256, m.Files[0].IndexSHA256, m.Files[0].Records = f1.Size, f1.SHA256, f1.IndexSHA256, f1.Records
		m.Files[1].Size, m.Files[1].SHA256, m.Files[1].IndexSHA256, m.Files[1].Records = f0.Size, f0.SHA256, f0.IndexSHA256, f0.Records
		m.Files[1].FirstRecord = f1.Records
		writeTestManifest(t, dir, m)
		if err := readAll(dir); err == nil || !strings.Contains(err.Error(), "shard-00000.pks") || !strings.Contains(err.Error(), "chunk 0 piece 1") {
			t.Errorf("mixed-up shards: %v, want a refusal naming shard-00000.pks and its chunk and piece", err)
		}

		// A manifest whose pieces skip one.
		m.Files[1].Shard = &ShardCut{0, 2}
		writeTestManifest(t, dir, m)
		if err := readAll(dir); err == nil || !strings.Contains(err.Error(), "out of order") {
			t.Errorf("pieces 0, 2: %v, want out of order", err)
		}
	}
	// A version-4 header with an index, and a version-3-or-lower header under an entry with a
	// chunk, are refused.
	recs := randomRecords(fixedDatasetOpts, 4, 1)
	data := buildShard(t, WriterOptions{Sample: fixedDatasetOpts.Sample, Label: fixedDatasetOpts.Label, Cut: &ShardCut{1, 0}}, recs)
	meta := bytes.Replace(data[HeaderFixed:HeaderFixed+le.Uint32(data[hdrMetaLenOff:])], []byte(`"chunk":1,"piece":0`), []byte(`"index":0,"piece":0`), 1)
	copy(data[HeaderFixed:], meta)
	le.PutUint32(data[hdrCRCOff:], crc32cUpdate(crc32c(data[:hdrCRCOff]), meta))
	p := filepath.Join(t.TempDir(), "x.pks")
	os.WriteFile(p, data, 0o644)
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "chunk and piece, not index") {
		t.Errorf("version-4 shard with an index: %v", err)
	}
	dir := buildDataset(t, fixedDatasetOpts, randomRecords(fixedDatasetOpts, 4, 1), []int{4})
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.CutInputs, m.FormatVersion, m.Files[0].Shard = 10, 4, &ShardCut{0, 0}
	writeTestManifest(t, dir, m)
	if err := readAll(dir); err == nil || !strings.Contains(err.Error(), "version-1 shard") {
		t.Errorf("version-1 shard listed as chunk 0 piece 0: %v", err)
	}
}
