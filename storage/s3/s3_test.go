package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in   string
		want s3.URL
		ok   bool
	}{
		{"s3://bucket/prefix", s3.URL{"bucket", "prefix"}, true},
		{"s3://bucket/a/b/", s3.URL{"bucket", "a/b"}, true},
		{"s3://bucket", s3.URL{"bucket", ""}, true},
		{"s3://bucket/", s3.URL{"bucket", ""}, true},
		{"s3://my.bucket-1/x", s3.URL{"my.bucket-1", "x"}, true},
		{"s3://Bucket/x", s3.URL{}, false},
		{"s3://b/x", s3.URL{}, false},
		{"s3://bucket/a//b", s3.URL{}, false},
		{"s3://bucket/../x", s3.URL{}, false},
		{"s3://bucket/a/./b", s3.URL{}, false},
		{"s3://-bucket/x", s3.URL{}, false},
		{"s3://user:pw@bucket/x", s3.URL{}, false},
		{"/local/dir", s3.URL{}, false},
	} {
		got, err := s3.ParseURL(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
		if c.ok && c.want.Prefix != "" && got.String() != strings.TrimSuffix(c.in, "/") {
			t.Errorf("URL(%q).String() = %q", c.in, got.String())
		}
	}
}

// TestConformance runs the storage conformance suite against the backend over a real S3
// server, each test in a fresh prefix of one bucket. The part size is the least S3 allows,
// so that the suite's 1 MiB file is one PutObject and TestMultipart covers the parts.
func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "conformance")
	var n atomic.Int64
	storagetest.Run(t, func(t *testing.T) storage.Backend {
		u := s3.URL{Bucket: "conformance", Prefix: fmt.Sprintf("t%d/ds", n.Add(1))}
		return s3.NewWithClient(srv.Client(""), u, s3.Options{})
	})
}

// TestMultipart writes files across the part size (one byte short of a part, one part, a few
// parts and a bit), reads them back, and checks that an aborted multipart upload leaves
// neither an object nor an open upload, and that a conditional write refuses an existing
// object.
func TestMultipart(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "mpu")
	const part = 5 << 20
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "mpu", Prefix: "ds"}, s3.Options{PartSize: part, Parallel: 3})
	ctx := context.Background()
	for _, size := range []int{part - 1, part, 3*part + 12345} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*31 + i>>11)
		}
		name := fmt.Sprintf("f-%d", size)
		w, err := b.CreateObject(ctx, name, true)
		if err != nil {
			t.Fatal(err)
		}
		for p := data; len(p) > 0; { // odd write sizes
			k := min(len(p), 777777)
			if _, err := w.Write(p[:k]); err != nil {
				t.Fatal(err)
			}
			p = p[k:]
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); !bytes.Equal(w.Sum(), sum[:]) || w.Size() != int64(size) {
			t.Fatalf("%s: Writer.Sum/Size disagree with the bytes written", name)
		}
		if got := storagetest.Get(t, b, name); !bytes.Equal(got, data) {
			t.Fatalf("%s: read back other bytes", name)
		}
		// A conditional write of an existing name is refused, and leaves it as it was.
		w, err = b.CreateObject(ctx, name, true)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data[:size/2])
		if err := w.Commit(ctx); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("%s: a conditional write over an existing object = %v, want an exists error", name, err)
		}
		w.Abort()
		if got := storagetest.Get(t, b, name); !bytes.Equal(got, data) {
			t.Fatalf("%s: a refused conditional write changed it", name)
		}
	}
	w, err := b.CreateObject(ctx, "aborted", false)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, 2*part+1))
	if got := srv.OpenUploads(t, "mpu"); len(got) != 1 {
		t.Fatalf("open uploads while writing = %v, want one", got)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if got := srv.OpenUploads(t, "mpu"); len(got) != 0 {
		t.Fatalf("open uploads after Abort = %v", got)
	}
	if _, err := b.Stat(ctx, "aborted"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of the aborted file = %v", err)
	}
}

// TestStoredBytes: the server's posix backend keeps each object as a plain file; its bytes
// are the bytes sent (no chunk signatures or checksum trailers stored with them).
func TestStoredBytes(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "raw")
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "raw", Prefix: "p"}, s3.Options{PartSize: 5 << 20})
	data := bytes.Repeat([]byte("0123456789abcdef"), (11<<20)/16)
	storagetest.Put(t, b, "small", data[:1000])
	storagetest.Put(t, b, "large", data)
	for name, want := range map[string][]byte{"small": data[:1000], "large": data} {
		got, err := os.ReadFile(filepath.Join(srv.Root, "raw", "p", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("the server stored %d bytes for %s, want the %d sent", len(got), name, len(want))
		}
	}
}

// TestWrongCredentials: a refused secret gives an error naming the bucket and the operation,
// matching s3.ErrAccess, and never containing the secret.
func TestWrongCredentials(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "locked")
	const secret = "wrong-secret-Zq8xK2mP7vT4"
	b := s3.NewWithClient(srv.Client(secret), s3.URL{Bucket: "locked", Prefix: "ds"}, s3.Options{})
	ctx := context.Background()
	_, statErr := b.Stat(ctx, "manifest.json")
	_, openErr := b.Open(ctx, "manifest.json")
	listErr := b.List(ctx, func(storage.FileInfo) error { return nil })
	w, _ := b.Create(ctx, "x")
	w.Write([]byte("x"))
	putErr := w.Commit(ctx)
	for _, err := range []error{statErr, openErr, listErr, putErr} {
		if err == nil {
			t.Fatal("a request with a wrong secret succeeded")
		}
		msg := err.Error()
		if !errors.Is(err, s3.ErrAccess) || !strings.Contains(msg, `"locked"`) || strings.Contains(msg, secret) {
			t.Errorf("error %q: want an access error naming the bucket, without the secret", msg)
		}
	}
	t.Logf("the error: %v", statErr)
}

// TestNew builds the client from the standard chain (the AWS_* environment variables, with
// AWS_ENDPOINT_URL naming the server) and reads through it.
func TestNew(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "chain")
	srv.SetEnv(t)
	ctx := context.Background()
	b, err := s3.New(ctx, s3.URL{Bucket: "chain", Prefix: "x/y"}, s3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	storagetest.Put(t, b, "f", []byte("through the chain"))
	if _, err := os.Stat(filepath.Join(srv.Root, "chain", "x", "y", "f")); err != nil {
		t.Fatalf("the object is not at its key: %v", err)
	}
	if _, err := b.Stat(ctx, "missing"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "s3://chain/x/y/missing") {
		t.Fatalf("stat of a missing object = %v, want a not-exist error naming s3://chain/x/y/missing", err)
	}
	nb := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "nobucket", Prefix: "p"}, s3.Options{})
	if _, err := nb.Stat(ctx, "f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat in a missing bucket = %v", err)
	}
}

// fakeDataset writes a local dataset of the given file sizes (random bytes, named like
// shards) and its sealed manifest, as Publish reads it.
func fakeDataset(t *testing.T, seed byte, sizes ...int) string {
	t.Helper()
	dir := t.TempDir()
	m := shard.Manifest{Format: shard.FormatShards, Sample: shard.SampleSpec{Shape: []int{1}, DType: shard.Uint8, Layout: "hwc"}}
	for i, size := range sizes {
		data := make([]byte, size)
		for k := range data {
			data[k] = byte(k*131+k>>13) ^ seed
		}
		name := fmt.Sprintf("shard-%05d.pks", i)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		m.Files = append(m.Files, shard.FileEntry{Path: name, Size: int64(size), SHA256: hex.EncodeToString(sum[:])})
	}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shard.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func listAll(t *testing.T, b *s3.Backend) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	if err := b.List(context.Background(), func(fi storage.FileInfo) error { got[fi.Name] = fi.Size; return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestPublishCancelled: a publish cancelled in the middle of a multipart upload (a SIGINT to
// the build) aborts the upload, removes the objects it had completed, and writes no manifest.
func TestPublishCancelled(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "cancel")
	const part = 5 << 20
	dir := fakeDataset(t, 1, part+100, 3*part)
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "cancel", Prefix: "ds"}, s3.Options{PartSize: part, Parallel: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := b.Publish(ctx, dir, s3.PublishOptions{PartSent: func(_ context.Context, key string, part int32) {
		if key == "ds/shard-00001.pks" && part == 1 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish cancelled mid-upload = %v, want a cancellation error", err)
	}
	if got := listAll(t, b); len(got) != 0 {
		t.Errorf("a cancelled publish left %v", got)
	}
	if ups := srv.OpenUploads(t, "cancel"); len(ups) != 0 {
		t.Errorf("a cancelled publish left open uploads %v", ups)
	}
	// And the prefix takes a publish without --force (Clear): nothing is left over.
	if err := b.Publish(context.Background(), dir, s3.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPublishRace: two publishes of different datasets to one prefix at once: exactly one
// succeeds, and the prefix then holds exactly its files and manifest (the conditional writes
// refuse the other's, which removes what it wrote).
func TestPublishRace(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "race")
	const part = 5 << 20
	dirs := []string{fakeDataset(t, 1, part+1, 1000), fakeDataset(t, 2, part+1, 1000)}
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "race", Prefix: "ds"}, s3.Options{PartSize: part})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range dirs {
		wg.Go(func() { errs[i] = b.Publish(context.Background(), dirs[i], s3.PublishOptions{}) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("racing publishes: %v and %v, want exactly one success", errs[0], errs[1])
	}
	winner := dirs[0]
	if errs[0] != nil {
		winner = dirs[1]
	}
	t.Logf("the loser's error: %v", errors.Join(errs...))
	for _, name := range []string{shard.ManifestName, "shard-00000.pks", "shard-00001.pks"} {
		want, err := os.ReadFile(filepath.Join(winner, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := storagetest.Get(t, b, name); !bytes.Equal(got, want) {
			t.Errorf("%s is not the winner's", name)
		}
	}
	if got := listAll(t, b); len(got) != 3 {
		t.Errorf("the prefix holds %v, want the winner's three files", got)
	}
	if ups := srv.OpenUploads(t, "race"); len(ups) != 0 {
		t.Errorf("open uploads after the race: %v", ups)
	}
}
