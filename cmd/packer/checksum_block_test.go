package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage/s3"
)

// blockRecords returns the block_records of every shard of the dataset in dir.
func blockRecords(t *testing.T, dir string) []int64 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "shard-*.pks"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("shards of %s: %v %v", dir, paths, err)
	}
	var ks []int64
	for _, p := range paths {
		r, err := shard.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, r.BlockRecords())
		r.Close()
	}
	return ks
}

// TestChecksumBlock: --checksum-block sets k = max(1, floor(SIZE/record size)) in every shard;
// its default (given or not) writes the same bytes as before; parts built with it merge into
// the same bytes as the one-machine build with it, and a part with another value is refused;
// --format npy and hdf5 refuse it before any work, as they have no checksum blocks.
func TestChecksumBlock(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	base := []string{"--crop", "6", "--shard-size", "2000", "--workers", "2"} // 6×6×3 = 108-byte records
	build := func(name string, extra ...string) string {
		out := filepath.Join(root, name)
		mustRun(t, append(append([]string{"build", src["folder"], "-o", out}, base...), extra...)...)
		return out
	}
	def := build("default")
	sameTree(t, def, build("explicit-default", "--checksum-block", "1MiB"))
	for _, k := range blockRecords(t, def) {
		if want := int64(shard.BlockTarget / 108); k != want {
			t.Fatalf("default build: block_records %d, want %d", k, want)
		}
	}
	for _, c := range []struct {
		size string
		k    int64
	}{{"500", 4}, {"100B", 1}, {"1KiB", 9}} {
		full := build("full-"+c.size, "--checksum-block", c.size)
		for _, k := range blockRecords(t, full) {
			if k != c.k {
				t.Fatalf("--checksum-block %s: block_records %d, want %d", c.size, k, c.k)
			}
		}
		mustRun(t, "verify", full)
		var parts []string
		for i := range 3 {
			parts = append(parts, build(fmt.Sprintf("part-%s-%d", c.size, i), "--checksum-block", c.size, "--part", fmt.Sprintf("%d/3", i)))
		}
		merged := filepath.Join(root, "merged-"+c.size)
		mustRun(t, append([]string{"merge", "-o", merged}, parts...)...)
		sameTree(t, full, merged)
		// A part built with the default block target does not belong to this build.
		other := build("other-"+c.size, "--part", "2/3")
		_, stderr, code := run(t, "merge", "-o", filepath.Join(root, "refused-"+c.size), parts[0], parts[1], other)
		if code != 1 || !strings.Contains(stderr, "merge options") {
			t.Errorf("merge of parts with other --checksum-block: exit %d, stderr %q", code, stderr)
		}
	}
	for _, args := range [][]string{
		{"--format", "npy", "--checksum-block", "4KiB"},
		{"--format", "hdf5", "--checksum-block", "4KiB"},
		{"--checksum-block", "0"},
		{"--checksum-block", "four"},
	} {
		out := filepath.Join(root, "refused")
		_, stderr, code := run(t, append([]string{"build", src["folder"], "-o", out, "--crop", "6"}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, "--checksum-block") || exists(out) {
			t.Errorf("build %v: exit %d, stderr %q; want exit %d naming --checksum-block, nothing written", args, code, stderr, exitUsage)
		}
	}
}

// TestS3BuildChecksumBlock: a build to a bucket with --checksum-block writes exactly the objects
// of the same build to a local folder, whose shards have the small blocks.
func TestS3BuildChecksumBlock(t *testing.T) {
	srv := s3Setup(t, "data")
	local := filepath.Join(t.TempDir(), "local")
	args := []string{"build", fmnist, "--split", "test", "--shard-size", "2MiB", "--checksum-block", "4KiB"}
	mustRun(t, append(args, "-o", local)...)
	for _, k := range blockRecords(t, local) {
		if k != 5 { // 28×28 = 784-byte records
			t.Fatalf("block_records %d, want 5", k)
		}
	}
	mustRun(t, append(args, "-o", "s3://data/fm/cb")...)
	want := localFiles(t, local)
	if got := objects(t, srv, s3.URL{Bucket: "data", Prefix: "fm/cb"}); !mapsEqualBytes(got, want) {
		t.Errorf("the bucket's objects (%d) differ from the local build's files (%d)", len(got), len(want))
	}
	mustRun(t, "verify", "s3://data/fm/cb")
}
