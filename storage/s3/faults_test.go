package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// faultyBackend is a backend made as the command makes it (s3.New, from the environment), whose
// requests go through a fault proxy to the test server.
func faultyBackend(t *testing.T, bucket string, plan s3test.FaultPlan) (*s3.Backend, *s3test.FaultProxy) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Bucket(t, bucket)
	px := s3test.StartFaultProxy(t, srv, plan)
	srv.SetEnv(t)
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	b, err := s3.New(context.Background(), s3.URL{Bucket: bucket, Prefix: "p"}, s3.Options{PartSize: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return b, px
}

// putRandomFiles stores files f00.bin, f01.bin, ... of the given sizes, of random bytes from
// rng, and returns them by name.
func putRandomFiles(t *testing.T, b storage.Backend, rng *rand.Rand, sizes []int) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for i, n := range sizes {
		d := make([]byte, n)
		for j := range d {
			d[j] = byte(rng.Uint32())
		}
		files[fmt.Sprintf("f%02d.bin", i)] = d
	}
	for n, d := range files {
		storagetest.Put(t, b, n, d)
	}
	return files
}

// TestFaultsRetried: through a proxy that answers about half of all requests with a burst of
// 500s and 503 SlowDowns, and cuts GET bodies short (the connection dropped halfway, a
// Content-Length longer or shorter than the body), objects written (whole and multipart), read
// (ranged reads, small and large) and downloaded have their bytes. Every kind of fault was
// injected.
func TestFaultsRetried(t *testing.T) {
	b, px := faultyBackend(t, "faults", s3test.Bursts)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	files := putRandomFiles(t, b, rng, []int{10, 3000, 70 << 10, 1 << 20, 11 << 20, 2 << 20})
	// In name order, so that the ranges read, and so the faults the plan gives them (a hash of
	// the request), are the same every run.
	for _, n := range slices.Sorted(maps.Keys(files)) {
		d := files[n]
		r, err := b.Open(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(d))
		if _, err := r.(interface {
			ReadRangeAt([]byte, int64) (int, error)
		}).ReadRangeAt(got, 0); err != nil || !bytes.Equal(got, d) {
			t.Fatalf("%s: whole read: %v (same bytes: %v)", n, err, bytes.Equal(got, d))
		}
		for range 3 {
			off := rng.IntN(len(d))
			k := 1 + rng.IntN(len(d)-off)
			part := make([]byte, k)
			if _, err := r.ReadAt(part, int64(off)); err != nil || !bytes.Equal(part, d[off:off+k]) {
				t.Fatalf("%s: ReadAt(%d, %d): %v", n, k, off, err)
			}
		}
		r.Close()
	}
	dir := filepath.Join(t.TempDir(), "copy")
	if _, err := b.Download(ctx, dir, storage.DownloadOptions{}); err != nil {
		t.Fatal(err)
	}
	for n, d := range files {
		if got, err := os.ReadFile(filepath.Join(dir, n)); err != nil || !bytes.Equal(got, d) {
			t.Fatalf("%s: the downloaded copy differs (%v)", n, err)
		}
	}
	t.Logf("faults injected: %s", px.Summary())
	for f, n := range px.Injected() {
		if n == 0 {
			t.Errorf("no %s fault was injected", f)
		}
	}
	if len(px.Injected()) != 5 {
		t.Errorf("faults injected: %s; want every kind", px.Summary())
	}
}

// TestFaultsGiveUp: a store that keeps failing is given up on after a bounded number of tries,
// and the error says how many, what the store said, and names the object.
func TestFaultsGiveUp(t *testing.T) {
	b, px := faultyBackend(t, "giveup", s3test.Bursts)
	ctx := context.Background()
	storagetest.Put(t, b, "obj", bytes.Repeat([]byte("x"), 100<<10))
	r, err := b.Open(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, c := range []struct {
		fault s3test.Fault
		want  string
	}{
		{s3test.SlowDown, "SlowDown"},
		{s3test.DropBody, "fewer bytes than it announced"},
	} {
		px.SetPlan(s3test.Always("GET", c.fault))
		before := px.Injected()[c.fault]
		_, err := r.(interface {
			ReadRangeAt([]byte, int64) (int, error)
		}).ReadRangeAt(make([]byte, 50<<10), 1000)
		msg := fmt.Sprint(err)
		for _, w := range []string{"s3://giveup/p/obj", "GetObject", c.want, "gave up after 5 attempts"} {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q lacks %q", c.fault, msg, w)
			}
		}
		if n := px.Injected()[c.fault] - before; n != 5 {
			t.Errorf("%s: %d tries, want 5", c.fault, n)
		}
	}
}
