package shards

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// newTestOutput returns a shards output of 1000-byte records with shards of 5 records and a
// chunk pool of the least size, so that shards finish while earlier ones are still being
// hashed and written.
func newTestOutput(t *testing.T, dir string) *shardOutput {
	t.Helper()
	out, err := New(output.Config{Dir: dir, Sample: shard.SampleSpec{Shape: []int{1000}, DType: shard.Uint8},
		Label: shard.LabelSpec{DType: "int64", Aux: []string{}}, ShardSize: 5000})
	if err != nil {
		t.Fatal(err)
	}
	return out.(*shardOutput)
}

func testRecord(i int) output.Record {
	d := make([]byte, 1000)
	for k := range d {
		d[k] = byte(i*31 + k)
	}
	return output.Record{Data: d, Label: int64(i % 7)}
}

// TestShardsHashedInBackground writes many shards, each finished while the ones before it may
// still be hashing, and checks every FileEntry against the file on disk: its SHA-256, size and
// records and index_sha256 (what readers check at open), in order, with no temporary file left.
func TestShardsHashedInBackground(t *testing.T) {
	dir := t.TempDir()
	o := newTestOutput(t, dir)
	const n = 203
	for i := range n {
		if err := o.Write(testRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	files, err := o.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := (n + 4) / 5; len(files) != want {
		t.Fatalf("%d shards, want %d", len(files), want)
	}
	if o.pool.made > o.pool.max {
		t.Fatalf("%d chunks made, the pool's bound is %d", o.pool.made, o.pool.max)
	}
	var next int64
	for k, fe := range files {
		b, err := os.ReadFile(filepath.Join(dir, fe.Path))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if fe.Path != ShardName(k) || fe.SHA256 != hex.EncodeToString(sum[:]) || fe.Size != int64(len(b)) || fe.FirstRecord != next {
			t.Fatalf("shard %d: entry %+v; file %d bytes, sha256 %x, first record %d", k, fe, len(b), sum, next)
		}
		r, err := shard.Open(filepath.Join(dir, fe.Path))
		if err != nil {
			t.Fatal(err)
		}
		if fe.IndexSHA256 != r.IndexSHA256() {
			t.Fatalf("shard %d: entry's index_sha256 %q, the index's SHA-256 is %s", k, fe.IndexSHA256, r.IndexSHA256())
		}
		for i := 0; i < r.Len(); i++ {
			got, err := r.Record(i)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(testRecord(int(next)+i).Data) {
				t.Fatalf("shard %d record %d: wrong bytes", k, i)
			}
		}
		r.Close()
		next += fe.Records
	}
	if next != n {
		t.Fatalf("%d records in the shards, wrote %d", next, n)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("%s left behind", e.Name())
		}
	}
}

// TestAbortWhileHashing aborts an output whose finished shards may still be hashing: no shard
// file and no temporary file may stay (nothing was checkpointed).
func TestAbortWhileHashing(t *testing.T) {
	dir := t.TempDir()
	o := newTestOutput(t, dir)
	for i := range 101 {
		if err := o.Write(testRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	o.Abort()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("%s left behind after Abort", e.Name())
	}
}

// TestLagBound checks the chunk pool's size: at least sinkBuffers, one shard of lag per 8 cores
// (at least one, at most 8), never more than 2 GiB.
func TestLagBound(t *testing.T) {
	if got := newChunkPool(poolChunks(1 << 10)).max; got != sinkBuffers {
		t.Fatalf("tiny shards: pool of %d chunks, want %d", got, sinkBuffers)
	}
	lag := maxLagShards()
	if got, want := poolChunks(256<<20), lag*(256<<20)/sinkChunk; got != want {
		t.Fatalf("256 MiB shards: %d chunks, want %d", got, want)
	}
	if got := poolChunks(1 << 40); got != (2<<30)/sinkChunk {
		t.Fatalf("1 TiB shards: %d chunks, want the 2 GiB bound %d", got, (2<<30)/sinkChunk)
	}
}

// TestBackgroundFailureStopsBuild fails the commit of the first shard (in the background, while
// the build writer goes on): a later Write or Close must return that error naming the shard, and
// Abort must leave no file behind.
func TestBackgroundFailureStopsBuild(t *testing.T) {
	testHookCommit = func(name string) error {
		if name == ShardName(0) {
			return fmt.Errorf("%s: injected write error", name)
		}
		return nil
	}
	defer func() { testHookCommit = nil }()
	dir := t.TempDir()
	o := newTestOutput(t, dir)
	var err error
	for i := 0; i < 400 && err == nil; i++ {
		err = o.Write(testRecord(i))
	}
	if err == nil {
		_, err = o.Close()
	}
	if err == nil || !strings.Contains(err.Error(), ShardName(0)+": injected write error") {
		t.Fatalf("error %v, want the first shard's injected failure", err)
	}
	o.Abort()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("%s left behind after the failure and Abort", e.Name())
	}
}
