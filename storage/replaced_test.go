package storage_test

// The shard readers against a dataset replaced, renamed over or written in place while they
// read it. These tests live here, not in shard, because they replace OUT with the very publish
// that `packer build --force` runs (storage.LocalStage), and package shard, what trainers embed,
// imports only the standard library, tests included (internal/archtest).

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

var replacedSpec = shard.WriterOptions{
	Sample: shard.SampleSpec{Shape: []int{8, 8, 3}, DType: shard.Uint8, Layout: "hwc"},
	Label:  shard.LabelSpec{DType: "int64"},
}

// replacedRecord is record i of the dataset tagged tag: bytes no other (tag, i) has.
func replacedRecord(tag byte, i int) []byte {
	b := make([]byte, replacedSpec.Sample.Size())
	for k := range b {
		b[k] = byte(i*31+k*7) ^ tag
	}
	b[0], b[1], b[2] = tag, byte(i), byte(i>>8)
	return b
}

// writeReplacedDataset writes, in dir, a dataset of len(counts) shards holding the records of
// tag (labels i%5), named and numbered as packer names them. Datasets of different tags
// differ in their pixels only: same names, options, counts and labels. pin says whether the
// manifest pins each shard's index (index_sha256); without, it is a manifest of an older
// packer.
func writeReplacedDataset(t *testing.T, dir string, tag byte, counts []int, pin bool) [][]byte {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &shard.Manifest{Packer: "test", Format: shard.FormatShards, FormatVersion: 1, Sample: replacedSpec.Sample, Label: replacedSpec.Label}
	var recs [][]byte
	for s, c := range counts {
		o := replacedSpec
		o.ShardIndex = s
		name := fmt.Sprintf("shard-%05d.pks", s)
		fw, err := testfix.CreateFile(filepath.Join(dir, name), o)
		if err != nil {
			t.Fatal(err)
		}
		for range c {
			r := replacedRecord(tag, len(recs))
			if err := fw.Append(r, int64(len(recs)%5), nil, nil); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		if err := fw.Commit(); err != nil {
			t.Fatal(err)
		}
		fe := shard.FileEntry{Path: name, Size: fw.FileSize(), SHA256: fw.SHA256(), Records: int64(c), FirstRecord: int64(len(recs) - c)}
		if pin {
			fe.IndexSHA256 = fw.IndexSHA256()
		}
		m.Files = append(m.Files, fe)
	}
	m.Count = int64(len(recs))
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shard.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestDatasetReplacedWhileReading: a dataset is opened and read while packer build --force
// replaces it by a build of other content (storage.LocalStage.Publish: the staging folder is
// exchanged with OUT, then the old folder is removed). Every record the open Dataset serves,
// by the Loader (page cache and O_DIRECT) or by Record, must be one of the dataset it opened,
// or an error: never one of the new build.
func TestDatasetReplacedWhileReading(t *testing.T) {
	counts := []int{60, 60, 60, 60}
	for _, pin := range []bool{true, false} {
		for _, mode := range []string{"loader", "direct", "record"} {
			t.Run(fmt.Sprintf("pinned=%v/%s", pin, mode), func(t *testing.T) {
				root := t.TempDir()
				live := filepath.Join(root, "live")
				old := writeReplacedDataset(t, live, 'A', counts, pin)
				stage := &storage.LocalStage{Dir: filepath.Join(root, "live.partial"), Out: live, Old: filepath.Join(root, "live.old")}
				writeReplacedDataset(t, stage.Dir, 'B', counts, pin)

				d, err := shard.OpenDataset(live)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				served, bad := 0, 0
				check := func(i int64, rec []byte) {
					served++
					if !bytes.Equal(rec, old[i]) {
						bad++
					}
				}
				var readErr error
				replace := func() {
					if err := stage.Publish(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				if mode == "record" {
					if _, err := d.Record(0); err != nil {
						t.Fatal(err)
					}
					replace()
					for i := range d.Len() {
						rec, err := d.Record(i)
						if err != nil {
							readErr = err
							break
						}
						check(i, rec)
					}
				} else {
					l, err := d.NewLoader(shard.LoaderOptions{BatchSize: 4, ReadSize: 1, Prefetch: 2, Direct: mode == "direct"})
					if err != nil {
						t.Fatal(err)
					}
					defer l.Close()
					first := true
					for l.Next() {
						b := l.Batch()
						for k, i := range b.Indices {
							n := len(b.Data) / b.Len()
							check(i, b.Data[k*n:(k+1)*n])
						}
						if first {
							replace()
							first = false
						}
					}
					readErr = l.Err()
				}
				if bad > 0 {
					t.Fatalf("%d of %d records served after the dataset was replaced came from the new build (error at the end: %v)", bad, served, readErr)
				}
				if readErr != nil && !strings.Contains(readErr.Error(), "replaced since the dataset was opened") {
					t.Errorf("error %q does not say the dataset was replaced", readErr)
				}
				t.Logf("%d records served, all of the dataset opened; error: %v", served, readErr)
			})
		}
	}
}

// TestDatasetSiblingShard: a shard copied from a sibling build (another folder's build with the
// same names and options: same structure, other pixels), as an rsync of a rebuild leaves it,
// is refused when the dataset opens it, before any of its records is served, by the Loader
// (with and without the CRC check) and by Record, with an error naming the file. A manifest
// of an older packer, without index_sha256, cannot tell (the weaker check documented in
// FORMAT.md): it still reads.
func TestDatasetSiblingShard(t *testing.T) {
	counts := []int{60, 60, 60, 60}
	for _, mode := range []string{"loader", "loader-skipcrc", "record"} {
		t.Run(mode, func(t *testing.T) {
			root := t.TempDir()
			live, sib := filepath.Join(root, "live"), filepath.Join(root, "sibling")
			old := writeReplacedDataset(t, live, 'A', counts, true)
			writeReplacedDataset(t, sib, 'B', counts, true)
			data, err := os.ReadFile(filepath.Join(sib, "shard-00002.pks"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(live, "shard-00002.pks"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := shard.OpenDataset(live)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			bad, served := 0, 0
			var readErr error
			if mode == "record" {
				for i := range d.Len() {
					rec, err := d.Record(i)
					if err != nil {
						readErr = err
						break
					}
					served++
					if !bytes.Equal(rec, old[i]) {
						bad++
					}
				}
			} else {
				l, err := d.NewLoader(shard.LoaderOptions{BatchSize: 8, SkipCRC: mode == "loader-skipcrc"})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				for l.Next() {
					b := l.Batch()
					for k, i := range b.Indices {
						n := len(b.Data) / b.Len()
						served++
						if !bytes.Equal(b.Data[k*n:(k+1)*n], old[i]) {
							bad++
						}
					}
				}
				readErr = l.Err()
			}
			if bad > 0 || readErr == nil {
				t.Fatalf("%d of %d records served came from the sibling's shard; error: %v", bad, served, readErr)
			}
			if msg := readErr.Error(); !strings.Contains(msg, filepath.Join(live, "shard-00002.pks")) || !strings.Contains(msg, "index_sha256") {
				t.Errorf("error %q does not name the shard and what differs", msg)
			}
		})
	}
}

// TestLoaderFileRenamedOver: a shard file renamed over in place (as rsync does) after the
// Dataset opened that shard is not read by the Loader, which opens its own descriptors: they
// must be the file the Dataset checked, even with SkipCRC (nothing else would notice).
func TestLoaderFileRenamedOver(t *testing.T) {
	root := t.TempDir()
	live, sib := filepath.Join(root, "live"), filepath.Join(root, "sibling")
	old := writeReplacedDataset(t, live, 'A', []int{60, 60}, false)
	writeReplacedDataset(t, sib, 'B', []int{60, 60}, false)
	d, err := shard.OpenDataset(live)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, i := range []int64{0, 60} { // open both shards
		if _, err := d.Record(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(filepath.Join(sib, "shard-00001.pks"), filepath.Join(live, "shard-00001.pks")); err != nil {
		t.Fatal(err)
	}
	l, err := d.NewLoader(shard.LoaderOptions{BatchSize: 8, SkipCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bad := 0
	for l.Next() {
		b := l.Batch()
		n := len(b.Data) / b.Len()
		for k, i := range b.Indices {
			if !bytes.Equal(b.Data[k*n:(k+1)*n], old[i]) {
				bad++
			}
		}
	}
	if bad > 0 || l.Err() == nil || !strings.Contains(l.Err().Error(), "shard-00001.pks: the file was replaced") {
		t.Fatalf("%d records of the file renamed over served; error %v, want one naming the file", bad, l.Err())
	}
}

// TestDatasetFileWrittenInPlace: a shard file is written over in place (cp, rsync --inplace:
// the same inode, other bytes) after the dataset has read and checked all of it. Its blocks are
// checked already, so no CRC check would see the new bytes: the reads must notice that the
// file changed (size or modification time) and fail, by Record and by the Loader.
func TestDatasetFileWrittenInPlace(t *testing.T) {
	// shuffled*: a shuffled Loader reads each buffer with several reads in flight (Depth),
	// with O_DIRECT through native asynchronous I/O.
	for _, mode := range []string{"record", "loader", "direct", "shuffled", "shuffled-direct"} {
		t.Run(mode, func(t *testing.T) {
			root := t.TempDir()
			live, sib := filepath.Join(root, "live"), filepath.Join(root, "sibling")
			old := writeReplacedDataset(t, live, 'A', []int{60, 60}, true)
			writeReplacedDataset(t, sib, 'B', []int{60, 60}, true)
			d, err := shard.OpenDataset(live)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for i := range d.Len() { // every block read and checked once
				if _, err := d.Record(i); err != nil {
					t.Fatal(err)
				}
			}
			l, err := d.NewLoader(shard.LoaderOptions{BatchSize: 8, ReadSize: 1, Prefetch: 2,
				Direct: strings.HasSuffix(mode, "direct"), Shuffle: strings.HasPrefix(mode, "shuffled"), Seed: 5, Depth: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if !l.Next() { // the Loader has opened shard 0 and checked its first buffer
				t.Fatal(l.Err())
			}
			p := filepath.Join(live, "shard-00001.pks")
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(sib, "shard-00001.pks"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil { // same inode, same size
				t.Fatal(err)
			}
			// A modification time of its own: file times have a coarse clock, and a write in the
			// same tick as the build would keep it.
			if err := os.Chtimes(p, st.ModTime(), st.ModTime().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			bad, served := 0, 0
			var readErr error
			if mode == "record" {
				for i := range d.Len() {
					rec, err := d.Record(i)
					if err != nil {
						readErr = err
						break
					}
					served++
					if !bytes.Equal(rec, old[i]) {
						bad++
					}
				}
			} else {
				for l.Next() {
					b := l.Batch()
					n := len(b.Data) / b.Len()
					for k, i := range b.Indices {
						served++
						if !bytes.Equal(b.Data[k*n:(k+1)*n], old[i]) {
							bad++
						}
					}
				}
				readErr = l.Err()
			}
			if bad > 0 || readErr == nil || !strings.Contains(readErr.Error(), "shard-00001.pks: the file was changed") {
				t.Fatalf("%d of %d records served were the bytes written in place; error %v, want one naming the file", bad, served, readErr)
			}
		})
	}
}
