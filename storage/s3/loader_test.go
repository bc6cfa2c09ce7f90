package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// countingClient counts the body bytes of the GET responses it receives and fails every
// request once they pass limit, so that a reader fetching far too much stops soon.
type countingClient struct {
	next  awss3.HTTPClient
	got   atomic.Int64
	limit atomic.Int64
}

func (c *countingClient) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && c.got.Load() > c.limit.Load() {
		return nil, fmt.Errorf("test: more than %d bytes fetched by GETs", c.limit.Load())
	}
	resp, err := c.next.Do(req)
	if err == nil && req.Method == http.MethodGet && resp.ContentLength > 0 {
		c.got.Add(resp.ContentLength)
	}
	return resp, err
}

// putDataset writes a dataset of n records of 768 bytes, in shards of per records, through
// b and returns the data bytes of its records.
func putDataset(t *testing.T, b storage.Backend, n, per int) int64 {
	t.Helper()
	ctx := context.Background()
	opts := shard.WriterOptions{Sample: shard.SampleSpec{Shape: []int{16, 16, 3}, DType: shard.Uint8, Layout: "hwc"}}
	m := &shard.Manifest{Packer: "test", Format: shard.FormatShards, FormatVersion: shard.Version, Sample: opts.Sample, Label: shard.LabelSpec{DType: "int64", Aux: []string{}}}
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
		for i := s * per; i < min(n, (s+1)*per); i++ {
			rec := bytes.Repeat([]byte{byte(i), byte(i >> 8), byte(i >> 16)}, 16*16)
			if err := sw.Append(rec, int64(i%10), nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := sw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, shard.FileEntry{Path: name, Size: sw.Size(), SHA256: hex.EncodeToString(h.Sum(nil)),
			Records: int64(min(n, (s+1)*per) - s*per), FirstRecord: int64(s * per)})
	}
	m.Count = int64(n)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Create(ctx, shard.ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return int64(n) * 768
}

// TestShuffledEpochsLargerThanTheCache: order-2 shuffled epochs of a dataset several times
// larger than the chunk cache fetch about the data's bytes, not a chunk and its read-ahead
// per record: at most 2.5 times the data in the first epoch (each checksum block is read
// whole once, where its CRC is checked) and 1.3 times in later ones, with batches equal to
// the local dataset's.
func TestShuffledEpochsLargerThanTheCache(t *testing.T) {
	cc, b := countedBucket(t, "big", s3.Options{ChunkCache: 2 << 20})
	dataBytes := putDataset(t, b, 12000, 3500) // 9.2 MB of data: 4.4 times the cache
	local := storage.NewLocal(t.TempDir())
	putDataset(t, local, 12000, 3500)
	ld, err := shard.OpenDatasetFS(storage.ShardFS(context.Background(), local), shard.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	rd, err := shard.OpenDatasetFS(storage.ShardFS(context.Background(), b), shard.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	epochOpts := func(d *shard.Dataset, o shard.LoaderOptions) ([]int64, []byte, error) {
		l, err := d.NewLoader(o)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var idx []int64
		var data []byte
		for l.Next() {
			bt := l.Batch()
			idx = append(idx, bt.Indices...)
			data = append(data, bt.Data...)
		}
		return idx, data, l.Err()
	}
	epoch := func(d *shard.Dataset, e uint64) ([]int64, []byte, error) {
		return epochOpts(d, shard.LoaderOptions{BatchSize: 256, Shuffle: true, Seed: 3, Epoch: e})
	}
	for e, bound := range []float64{2.5, 1.3, 1.3} {
		li, lb, err := epoch(ld, uint64(e))
		if err != nil {
			t.Fatal(err)
		}
		before := cc.got.Load()
		cc.limit.Store(before + int64(bound*float64(dataBytes)))
		ri, rb, err := epoch(rd, uint64(e))
		got := float64(cc.got.Load()-before) / float64(dataBytes)
		if err != nil {
			t.Fatalf("epoch %d: %.1f times the data's bytes fetched, want at most %.1f: %v", e, got, bound, err)
		}
		if got > bound {
			t.Errorf("epoch %d: %.2f times the data's bytes fetched, want at most %.1f", e, got, bound)
		}
		if !slices.Equal(li, ri) || !bytes.Equal(lb, rb) {
			t.Errorf("epoch %d: the bucket's batches differ from the local dataset's", e)
		}
		t.Logf("epoch %d: %.3f times the data's bytes fetched", e, got)
	}
	// Rank splits, order 1's shuffle, more reads in flight and no CRC checks read the same
	// records as locally too.
	cc.limit.Store(1 << 62)
	for _, o := range []shard.LoaderOptions{
		{BatchSize: 100, Shuffle: true, Seed: 4, Rank: 2, World: 3, DropLast: true, Depth: 16},
		{BatchSize: 64, Shuffle: true, Seed: 5, Epoch: 1, SkipCRC: true, Fetch: 2, Prefetch: 3},
		{Order: shard.OrderV1, BatchSize: 50, Shuffle: true, Seed: 6, Rank: 1, World: 2, Buffer: 3000},
	} {
		li, lb, err := epochOpts(ld, o)
		if err != nil {
			t.Fatal(err)
		}
		ri, rb, err := epochOpts(rd, o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if !slices.Equal(li, ri) || !bytes.Equal(lb, rb) {
			t.Errorf("%+v: the bucket's batches differ from the local dataset's", o)
		}
	}
}

// TestShuffledRangeReadsCheckCRCs: a flipped byte in a shard of a bucket dataset larger than
// the chunk cache is an error naming the shard in a shuffled epoch read with exact ranged
// GETs, whichever buffer reads the damaged block whole and whichever only waits for its
// check.
func TestShuffledRangeReadsCheckCRCs(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "bad")
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "bad", Prefix: "ds"}, s3.Options{ChunkCache: 2 << 20})
	putDataset(t, b, 6000, 3000)
	name := "shard-00001.pks"
	data := storagetest.Get(t, b, name)
	data[len(data)/3] ^= 0x40 // in the data section
	storagetest.Put(t, b, name, data)
	for _, seed := range []uint64{1, 2, 3} {
		d, err := shard.OpenDatasetFS(storage.ShardFS(context.Background(), b), shard.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l, err := d.NewLoader(shard.LoaderOptions{BatchSize: 100, Shuffle: true, Seed: seed, ReadSize: 4 * 100 * 768})
		if err != nil {
			t.Fatal(err)
		}
		for l.Next() {
		}
		err = l.Err()
		l.Close()
		d.Close()
		if !errors.Is(err, shard.ErrChecksum) || !strings.Contains(err.Error(), name) {
			t.Errorf("seed %d: a shuffled epoch over a damaged shard: %v, want a checksum error naming %s", seed, err, name)
		}
	}
}

// TestOpenShardFetchesLittle: opening the shards of a bucket dataset (header, footer, index)
// fetches a small part of them, not the chunks of the cache and their read-ahead.
func TestOpenShardFetchesLittle(t *testing.T) {
	cc, b := countedBucket(t, "open", s3.Options{})
	dataBytes := putDataset(t, b, 24000, 12000) // two shards of 9.2 MB
	before := cc.got.Load()
	d, err := shard.OpenDatasetFS(storage.ShardFS(context.Background(), b), shard.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for s := range d.NumShards() {
		if _, err := d.Shard(s); err != nil {
			t.Fatal(err)
		}
	}
	if got := cc.got.Load() - before; got > dataBytes/20 {
		t.Errorf("opening the dataset's shards fetched %d bytes of %d", got, dataBytes)
	}
}

// TestRecordReadsAreExact: Dataset.Record at random over a bucket dataset larger than the
// chunk cache fetches about the records' bytes (one exact ranged GET each), not a chunk and
// its read-ahead per record; with the CRC check each checksum block is fetched whole once, at
// its first record, and checked. The records equal the local dataset's.
func TestRecordReadsAreExact(t *testing.T) {
	cc, b := countedBucket(t, "rec", s3.Options{ChunkCache: 2 << 20})
	dataBytes := putDataset(t, b, 12000, 3500) // 9.2 MB of data: 4.4 times the cache
	local := storage.NewLocal(t.TempDir())
	putDataset(t, local, 12000, 3500)
	ld, err := shard.OpenDatasetFS(storage.ShardFS(context.Background(), local), shard.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	const reads = 300
	for _, skip := range []bool{true, false} {
		rd, err := shard.OpenDatasetFS(storage.ShardFS(context.Background(), b), shard.ReaderOptions{SkipCRC: skip})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rd.NumShards() { // open every shard: headers and indexes are not what is measured
			if _, err := rd.Shard(i); err != nil {
				t.Fatal(err)
			}
		}
		// The first round checks blocks (unless skip); the second finds them checked.
		for round, bound := range []int64{dataBytes * 13 / 10, 2 * reads * 768} {
			if skip {
				bound = 2 * reads * 768
			}
			before := cc.got.Load()
			cc.limit.Store(before + bound)
			for k := range reads {
				i := int64((k*7919 + round*104729) % 12000)
				got, err := rd.Record(i)
				if err != nil {
					t.Fatalf("skip %v round %d: record %d: %v (%d bytes fetched so far, bound %d)", skip, round, i, err, cc.got.Load()-before, bound)
				}
				want, err := ld.Record(i)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("skip %v: record %d differs from the local dataset's", skip, i)
				}
			}
			fetched := cc.got.Load() - before
			if fetched > bound {
				t.Errorf("skip %v round %d: %d reads of 768-byte records fetched %d bytes, want at most %d", skip, round, reads, fetched, bound)
			}
			t.Logf("skip %v round %d: %d bytes fetched for %d records", skip, round, fetched, reads)
		}
		rd.Close()
	}
}

// TestRecordExactReadsCheckCRCs: Dataset.Record's exact reads over a damaged bucket shard
// never hand out a damaged record: the records of the damaged checksum block are a checksum
// error naming the shard, every other record is its own bytes.
func TestRecordExactReadsCheckCRCs(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "badrec")
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "badrec", Prefix: "ds"}, s3.Options{ChunkCache: 2 << 20})
	putDataset(t, b, 6000, 3000)
	name := "shard-00001.pks"
	data := storagetest.Get(t, b, name)
	data[len(data)/3] ^= 0x40 // in the data section
	storagetest.Put(t, b, name, data)
	d, err := shard.OpenDatasetFS(storage.ShardFS(context.Background(), b), shard.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	bad := 0
	for i := int64(2999); i < 6000; i += 3 {
		got, err := d.Record(i)
		if err != nil {
			if !errors.Is(err, shard.ErrChecksum) || !strings.Contains(err.Error(), name) {
				t.Fatalf("record %d: %v, want a checksum error naming %s", i, err, name)
			}
			bad++
			continue
		}
		if want := bytes.Repeat([]byte{byte(i), byte(i >> 8), byte(i >> 16)}, 16*16); !bytes.Equal(got, want) {
			t.Fatalf("record %d was handed out damaged", i)
		}
	}
	if bad == 0 {
		t.Error("no record of the damaged shard was refused")
	}
}

// countedBucket starts the test server with a bucket and returns a backend on its prefix "ds"
// whose HTTP client counts the bytes fetched.
func countedBucket(t *testing.T, bucket string, o s3.Options) (*countingClient, *s3.Backend) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Bucket(t, bucket)
	base := srv.Client("")
	cc := &countingClient{next: base.Options().HTTPClient}
	cc.limit.Store(1 << 62)
	client := awss3.New(base.Options(), func(o *awss3.Options) { o.HTTPClient = cc })
	return cc, s3.NewWithClient(client, s3.URL{Bucket: bucket, Prefix: "ds"}, o)
}
