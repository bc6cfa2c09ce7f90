package shard

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// memFS is an FS over files held in memory: a dataset that is not on the local file system.
type memFS map[string][]byte

func (m memFS) Open(name string) (File, error) {
	b, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return memFile{bytes.NewReader(b)}, nil
}

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

// loadMem reads the files of dir into a memFS and removes dir, so that nothing can read the
// dataset by path any more.
func loadMem(t *testing.T, dir string) memFS {
	t.Helper()
	m := memFS{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDatasetFS: a dataset read through an FS that is not local (its folder removed) gives the
// same records, labels and Loader batches as the one read by path, O_DIRECT asked or not.
func TestDatasetFS(t *testing.T) {
	recs := randomRecords(fixedDatasetOpts, 200, 9)
	dir := buildDataset(t, fixedDatasetOpts, recs, []int{64, 1, 135})
	local, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	localIdx, _ := runLoader(t, local, recs, LoaderOptions{BatchSize: 16, Shuffle: true, Seed: 3})
	if _, ok := local.fsys.(LocalFS); !ok {
		t.Fatal("OpenDataset's FS is not local")
	}
	if want := filepath.Join(dir, "shard-00001.pks"); local.ShardPath(1) != want {
		t.Fatalf("ShardPath = %s, want %s", local.ShardPath(1), want)
	}
	m := loadMem(t, dir)

	d, err := OpenDatasetFS(m, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Len() != 200 || d.NumShards() != 3 || d.ShardPath(2) != "shard-00002.pks" {
		t.Fatalf("Len %d, shards %d, ShardPath(2) %q", d.Len(), d.NumShards(), d.ShardPath(2))
	}
	for i := range int64(200) {
		got, err := d.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		if lab, _ := d.Label(i); !bytes.Equal(got, recs[i].data) || lab != recs[i].label {
			t.Fatalf("record %d differs", i)
		}
	}
	for _, direct := range []bool{false, true} {
		idx, _ := runLoader(t, d, recs, LoaderOptions{BatchSize: 16, Shuffle: true, Seed: 3, Direct: direct})
		if !slices.Equal(idx, localIdx) {
			t.Fatalf("direct %v: the Loader over the FS delivered another order", direct)
		}
	}
}

// TestDatasetFSErrors: a missing manifest or shard, and a damaged shard, are reported through
// the FS under the file's name, as errors, not panics.
func TestDatasetFSErrors(t *testing.T) {
	recs := randomRecords(fixedDatasetOpts, 20, 10)
	m := loadMem(t, buildDataset(t, fixedDatasetOpts, recs, []int{10, 10}))

	noManifest := memFS{"shard-00000.pks": m["shard-00000.pks"]}
	if _, err := OpenDatasetFS(noManifest, ReaderOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("without a manifest: %v, want a not-exist error", err)
	}
	noShard := memFS{ManifestName: m[ManifestName], "shard-00000.pks": m["shard-00000.pks"]}
	d, err := OpenDatasetFS(noShard, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Record(15); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "shard-00001.pks") {
		t.Fatalf("record of a missing shard: %v", err)
	}
	d.Close()

	bad := memFS{ManifestName: m[ManifestName], "shard-00000.pks": m["shard-00000.pks"]}
	b := bytes.Clone(m["shard-00001.pks"])
	b[len(b)-3] ^= 0xff // the footer
	bad["shard-00001.pks"] = b
	d, err = OpenDatasetFS(bad, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Record(15); err == nil || !strings.Contains(err.Error(), "shard-00001.pks") {
		t.Fatalf("record of a damaged shard: %v", err)
	}
	if _, err := ReadManifestFS(bad); err != nil {
		t.Fatalf("ReadManifestFS: %v", err)
	}
}

// TestDatasetFSObjectReplaced: objects of a dataset read through an FS that is not local are
// replaced after it was opened by those of a sibling build (same names and options, other
// bytes). A shard already open is read on from the file its Reader opened, by the Loader too
// (it must not open the object again, whose new bytes no check would catch with SkipCRC); a
// shard opened afterwards is refused by its index_sha256.
func TestDatasetFSObjectReplaced(t *testing.T) {
	recs := randomRecords(fixedDatasetOpts, 40, 11)
	m := loadMem(t, buildDataset(t, fixedDatasetOpts, recs, []int{20, 20}))
	sib := loadMem(t, buildDataset(t, fixedDatasetOpts, randomRecords(fixedDatasetOpts, 40, 12), []int{20, 20}))
	d, err := OpenDatasetFS(m, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Record(0); err != nil { // opens shard 0
		t.Fatal(err)
	}
	m["shard-00000.pks"], m["shard-00001.pks"] = sib["shard-00000.pks"], sib["shard-00001.pks"]
	l, err := d.NewLoader(LoaderOptions{BatchSize: 4, ReadSize: 1, Prefetch: 2, SkipCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := 0
	for l.Next() {
		b := l.Batch()
		for k, i := range b.Indices {
			if !bytes.Equal(b.Data[k*192:(k+1)*192], recs[i].data) {
				t.Fatalf("record %d: the replaced object's bytes served", i)
			}
			n++
		}
	}
	if err := l.Err(); n != 20 || err == nil || !strings.Contains(err.Error(), "shard-00001.pks") || !strings.Contains(err.Error(), "index_sha256") {
		t.Fatalf("%d records served, error %v; want shard 0's 20, then an error naming shard-00001.pks and index_sha256", n, err)
	}
}
