package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/shard"
)

const recSize = 64 << 10 // 64 KiB records: 16 to a checksum block

// buildShards writes 3 shards of 20 random records each and their manifest.
func buildShards(t *testing.T) string {
	t.Helper()
	return buildShardsSeed(t, 1)
}

// buildShardsSeed is buildShards with the records drawn from seed: datasets of different seeds
// are sibling builds (same names, options and structure, other bytes).
func buildShardsSeed(t *testing.T, seed uint64) string {
	t.Helper()
	dir := t.TempDir()
	spec := shard.SampleSpec{Shape: []int{64, 1024}, DType: shard.Uint8, Layout: "hwc"}
	m := &shard.Manifest{Packer: "test", Format: "shards", FormatVersion: 1, Sample: spec, Label: shard.LabelSpec{DType: "int64", Aux: []string{}}}
	rng := rand.New(rand.NewPCG(seed, 1))
	for s := range 3 {
		name := fmt.Sprintf("shard-%05d.pks", s)
		fw, err := testfix.CreateFile(filepath.Join(dir, name), shard.WriterOptions{Sample: spec, ShardIndex: s})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			d := make([]byte, recSize)
			for i := range d {
				d[i] = byte(rng.Uint32())
			}
			if err := fw.Append(d, 1, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := fw.Commit(); err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, shard.FileEntry{Path: name, Size: fw.FileSize(), SHA256: fw.SHA256(), IndexSHA256: fw.IndexSHA256(), Records: 20, FirstRecord: int64(20 * s)})
	}
	m.Count, m.Inputs = 60, 60
	writeManifest(t, dir, m)
	return dir
}

func writeManifest(t *testing.T, dir string, m *shard.Manifest) {
	t.Helper()
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shard.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x20
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, dir string) (*Report, int64) {
	t.Helper()
	var last atomic.Int64
	// The formats of this file's datasets: shards, and npy with no structure check here.
	known := map[string]FormatChecker{"npy": nil}
	rep, err := Dir(context.Background(), dir, Options{Progress: func(n int64) { last.Store(max(last.Load(), n)) }}, known)
	if err != nil {
		t.Fatal(err)
	}
	return rep, last.Load()
}

// TestDirShards checks a clean dataset, then one with a flipped data bit, which must be found
// by both the SHA-256 and the block CRC (naming the records), from the one read of the file.
func TestDirShards(t *testing.T) {
	dir := buildShards(t)
	rep, progress := run(t, dir)
	if !rep.OK || progress != rep.Bytes {
		t.Fatalf("clean dataset: %+v, progress %d of %d", rep.Faults, progress, rep.Bytes)
	}
	flip(t, filepath.Join(dir, "shard-00001.pks"), shard.Align+17*recSize+5) // record 17: block 1 (records 16-19)
	rep, _ = run(t, dir)
	kinds := map[string]Fault{}
	for _, f := range rep.Faults {
		kinds[f.Kind] = f
		if f.File != "shard-00001.pks" {
			t.Errorf("fault in the wrong file: %v", f)
		}
	}
	if len(rep.Faults) != 2 || kinds[KindSHA256].File == "" || kinds[KindChecksum].First != 36 || kinds[KindChecksum].ShardFirst != 16 || kinds[KindChecksum].Count != 4 {
		t.Fatalf("faults %v, want a SHA-256 fault and a checksum fault for records 36-39 (records 16-19 of the second shard)", rep.Faults)
	}
}

// TestDirOtherFormat checks the hashing of files that are not shards (sizes not a multiple of
// the block size included).
func TestDirOtherFormat(t *testing.T) {
	dir := t.TempDir()
	m := &shard.Manifest{Packer: "test", Format: "npy", FormatVersion: 1, Sample: shard.SampleSpec{Shape: []int{4}, DType: shard.Uint8, Layout: "hwc"}, Label: shard.LabelSpec{DType: "int64", Aux: []string{}}}
	for i, size := range []int{0, 5, 4096, 3<<20 + 77} {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(j * (i + 3))
		}
		name := fmt.Sprintf("f%d.npy", i)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		m.Files = append(m.Files, shard.FileEntry{Path: name, Size: int64(size), SHA256: hex.EncodeToString(sum[:])})
	}
	writeManifest(t, dir, m)
	rep, progress := run(t, dir)
	if !rep.OK || progress != rep.Bytes {
		t.Fatalf("clean dataset: %v, progress %d of %d", rep.Faults, progress, rep.Bytes)
	}
	flip(t, filepath.Join(dir, "f3.npy"), 3<<20+70)
	rep, _ = run(t, dir)
	if len(rep.Faults) != 1 || rep.Faults[0].Kind != KindSHA256 || rep.Faults[0].File != "f3.npy" {
		t.Fatalf("faults %v, want one SHA-256 fault in f3.npy", rep.Faults)
	}
}

// TestDirUnknownFormat: a dataset whose manifest names a format that is neither shards nor one
// of the checkers' formats is a manifest fault naming the manifest and the format, never a
// dataset found OK by its files' hashes.
func TestDirUnknownFormat(t *testing.T) {
	dir := t.TempDir()
	b := []byte("some bytes")
	if err := os.WriteFile(filepath.Join(dir, "data.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	for _, c := range []struct {
		format   string
		checkers map[string]FormatChecker
	}{
		{"zarr", map[string]FormatChecker{"npy": nil, "hdf5": nil}},
		{"npy", nil},
		{"", map[string]FormatChecker{"npy": nil}},
	} {
		m := &shard.Manifest{Packer: "test", Format: c.format, FormatVersion: 1, Sample: shard.SampleSpec{Shape: []int{4}, DType: shard.Uint8, Layout: "hwc"},
			Label: shard.LabelSpec{DType: "int64", Aux: []string{}}, Files: []shard.FileEntry{{Path: "data.bin", Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}}}
		writeManifest(t, dir, m)
		rep, err := Dir(context.Background(), dir, Options{}, c.checkers)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s: invalid manifest: unknown format %q", filepath.Join(dir, shard.ManifestName), c.format)
		if rep.OK || len(rep.Faults) != 1 || rep.Faults[0].Kind != KindManifest || rep.Faults[0].Message != want {
			t.Errorf("format %q, checkers %v: ok=%v faults %v; want one manifest fault %q", c.format, c.checkers, rep.OK, rep.Faults, want)
		}
	}
}

// TestDirCancel checks that a cancelled check stops with the context's error.
func TestDirCancel(t *testing.T) {
	dir := buildShards(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Dir(ctx, dir, Options{}, nil); err != context.Canceled {
		t.Fatalf("err %v, want %v", err, context.Canceled)
	}
}

// TestDirExtraFileWarning: a file the manifest does not list is a warning naming it (the
// dataset is still OK) unless Strict, where it is a fault; a listed file that is missing stays
// a fault either way.
func TestDirExtraFileWarning(t *testing.T) {
	dir := buildShards(t)
	if err := os.WriteFile(filepath.Join(dir, "shard-00099.pks"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "logs", "run.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Dir(context.Background(), dir, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Faults) != 0 || len(rep.Warnings) != 2 ||
		rep.Warnings[0].File != "logs/run.txt" || rep.Warnings[1].File != "shard-00099.pks" || rep.Warnings[1].Kind != KindExtra {
		t.Fatalf("default: ok=%v faults %v warnings %v; want OK with two extra warnings", rep.OK, rep.Faults, rep.Warnings)
	}
	rep, err = Dir(context.Background(), dir, Options{Strict: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Faults) != 2 || len(rep.Warnings) != 0 || rep.Faults[0].Kind != KindExtra {
		t.Fatalf("strict: ok=%v faults %v warnings %v; want two extra faults", rep.OK, rep.Faults, rep.Warnings)
	}
	if err := os.Remove(filepath.Join(dir, "shard-00000.pks")); err != nil {
		t.Fatal(err)
	}
	rep, err = Dir(context.Background(), dir, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Faults) != 1 || rep.Faults[0].Kind != KindMissing || len(rep.Warnings) != 2 {
		t.Fatalf("missing shard: ok=%v faults %v warnings %v; want a missing fault and the two warnings", rep.OK, rep.Faults, rep.Warnings)
	}
}

// TestSiblingShard: a shard copied from a sibling build (same names and options, other bytes)
// is reported as such, not only as a SHA-256 mismatch: the fault says that its index is not
// the one the manifest pins (index_sha256), which is what the readers refuse it for. A
// manifest whose index_sha256 disagrees with an intact shard (edited, or written wrong) is a
// fault as well, though every whole-file SHA-256 matches.
func TestSiblingShard(t *testing.T) {
	dir, sib := buildShards(t), buildShardsSeed(t, 2)
	data, err := os.ReadFile(filepath.Join(sib, "shard-00001.pks"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "shard-00001.pks"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, _ := run(t, dir)
	found := false
	for _, f := range rep.Faults {
		found = found || f.File == "shard-00001.pks" && strings.Contains(f.Message, "index_sha256") && strings.Contains(f.Message, "another build")
	}
	if !found {
		t.Errorf("sibling shard: faults %v, want one for shard-00001.pks naming index_sha256 and another build", rep.Faults)
	}

	dir = buildShards(t)
	m, err := shard.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Files[2].IndexSHA256 = strings.Repeat("0", 64)
	writeManifest(t, dir, m)
	rep, _ = run(t, dir)
	if len(rep.Faults) != 1 || rep.Faults[0].File != "shard-00002.pks" || !strings.Contains(rep.Faults[0].Message, "index_sha256") {
		t.Errorf("manifest with a wrong index_sha256: faults %v, want one for shard-00002.pks naming index_sha256", rep.Faults)
	}
}
