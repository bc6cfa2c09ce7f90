package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// TestReadAtSmallAndLarge: reads of every size class (small ones served from cached chunks,
// crossing chunk boundaries, and large ones straight from one GET), from many goroutines at
// once, return the object's bytes; reads after the object is replaced keep returning the
// version opened or fail, never a mix.
func TestReadAtSmallAndLarge(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "reads")
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "reads", Prefix: "p"}, s3.Options{})
	data := make([]byte, 5<<20+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	storagetest.Put(t, b, "obj", data)
	r, err := b.Open(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 200 {
				n := 1 + rng.IntN(100)
				switch rng.IntN(4) {
				case 0:
					n = 1 + rng.IntN(16<<10) // up to the small-read limit
				case 1:
					n = 16<<10 + 1 + rng.IntN(3<<20) // large
				}
				off := rng.Int64N(int64(len(data)))
				if rng.IntN(5) == 0 { // across a chunk boundary
					off = max(0, int64(1+rng.IntN(5))<<20-int64(n/2))
				}
				buf := make([]byte, n)
				k, err := r.ReadAt(buf, off)
				want := data[off:min(int64(len(data)), off+int64(n))]
				if k != len(want) || !bytes.Equal(buf[:k], want) || (k < n) != (err != nil) {
					errs <- fmt.Errorf("ReadAt(%d bytes at %d) = %d, %v: wrong bytes or error", n, off, k, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Replaced: uncached ranges fail (If-Match), cached ones are the version opened.
	other := bytes.Repeat([]byte{0xEE}, len(data))
	storagetest.Put(t, b, "obj", other)
	for _, off := range []int64{0, 3 << 20, 4<<20 + 100} {
		buf := make([]byte, 1000)
		_, err := r.ReadAt(buf, off)
		if err == nil && !bytes.Equal(buf, data[off:off+1000]) {
			t.Fatalf("a read at %d after the object was replaced returned bytes of the new version", off)
		}
	}
	big := make([]byte, 2<<20)
	if _, err := r.ReadAt(big, 1<<20); err == nil || !strings.Contains(err.Error(), "s3://reads/p/obj") {
		t.Fatalf("a large read after the object was replaced = %v, want an error naming the object", err)
	}
}

// TestCacheDir: with Options.CacheDir, Open fetches an object whole into the cache once, and
// later Opens of the unchanged object read the copy; a replaced object is fetched again and
// its stale copy removed.
func TestCacheDir(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "cache")
	cache := t.TempDir()
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "cache", Prefix: "ds"}, s3.Options{CacheDir: cache})
	plain := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "cache", Prefix: "ds"}, s3.Options{})
	v1 := bytes.Repeat([]byte("version one "), 100000)
	storagetest.Put(t, plain, "shard-00000.pks", v1)
	copies := func() []string {
		m, _ := filepath.Glob(filepath.Join(cache, "cache", "ds", "shard-00000.pks.etag-*"))
		return m
	}
	if got := storagetest.Get(t, b, "shard-00000.pks"); !bytes.Equal(got, v1) {
		t.Fatal("read through the cache: other bytes")
	}
	c := copies()
	if len(c) != 1 {
		t.Fatalf("cache copies after the first read: %v", c)
	}
	// The copy is what is read now: change it locally (as a damaged disk would) and see it.
	st1, _ := os.Stat(c[0])
	if got := storagetest.Get(t, b, "shard-00000.pks"); !bytes.Equal(got, v1) {
		t.Fatal("second read through the cache: other bytes")
	}
	if st2, _ := os.Stat(c[0]); !st2.ModTime().Equal(st1.ModTime()) {
		t.Error("the cached copy was written again for an unchanged object")
	}
	v2 := bytes.Repeat([]byte("version two "), 50000)
	storagetest.Put(t, plain, "shard-00000.pks", v2)
	if got := storagetest.Get(t, b, "shard-00000.pks"); !bytes.Equal(got, v2) {
		t.Fatal("read of the replaced object through the cache: not the new bytes")
	}
	if c2 := copies(); len(c2) != 1 || c2[0] == c[0] {
		t.Fatalf("cache copies after the object was replaced: %v (before: %v)", c2, c)
	}
	if _, err := b.Open(context.Background(), "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a missing object through the cache = %v", err)
	}
}

// TestDownload: a prefix is copied whole (nested names), a key that names one object is
// copied alone, a folder that is not a copy is refused, a later Download fetches only what
// changed and removes the copies of deleted objects.
func TestDownload(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "download")
	ctx := context.Background()
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "download", Prefix: "src"}, s3.Options{})
	files := map[string][]byte{"a/1.jpg": []byte("one"), "a/b/2.jpg": bytes.Repeat([]byte{2}, 3<<20), "top.csv": []byte("path,label\n")}
	for n, d := range files {
		storagetest.Put(t, b, n, d)
	}
	dir := filepath.Join(t.TempDir(), "copy")
	m, err := b.Download(ctx, dir, storage.DownloadOptions{})
	if err != nil || m.Fetched != 3 || m.Path != dir {
		t.Fatalf("Download = %+v, %v", m, err)
	}
	for n, d := range files {
		if got, err := os.ReadFile(filepath.Join(dir, n)); err != nil || !bytes.Equal(got, d) {
			t.Fatalf("%s: copy differs (%v)", n, err)
		}
	}
	storagetest.Put(t, b, "a/1.jpg", []byte("changed"))
	if err := b.Remove(ctx, "top.csv"); err != nil {
		t.Fatal(err)
	}
	m, err = b.Download(ctx, dir, storage.DownloadOptions{})
	if err != nil || m.Fetched != 1 || m.Reused != 1 || m.Objects != 2 {
		t.Fatalf("second Download = %+v, %v", m, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "top.csv")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the copy of a deleted object was kept")
	}
	one := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "download", Prefix: "src/a/b/2.jpg"}, s3.Options{})
	m, err = one.Download(ctx, filepath.Join(t.TempDir(), "one"), storage.DownloadOptions{})
	if err != nil || m.Objects != 1 || filepath.Base(m.Path) != "2.jpg" {
		t.Fatalf("Download of one object = %+v, %v", m, err)
	}
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "keep.txt"), []byte("mine"), 0o644)
	if _, err := b.Download(ctx, foreign, storage.DownloadOptions{}); err == nil {
		t.Fatal("Download into a folder that is not a copy was not refused")
	}
	if got, _ := os.ReadFile(filepath.Join(foreign, "keep.txt")); string(got) != "mine" {
		t.Fatal("a refused Download touched the folder")
	}
	none := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "download", Prefix: "nothing"}, s3.Options{})
	if _, err := none.Download(ctx, t.TempDir(), storage.DownloadOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Download of an empty prefix = %v", err)
	}
}
