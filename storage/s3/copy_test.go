package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// TestCopyPublishParts: CopyPublish copies an object uploaded whole but larger than the part
// threshold in parts of the threshold (UploadPartCopy), checking it by reading it back (its
// ETag cannot be the source's), one uploaded in parts in the same parts (its ETag then the
// source's: nothing read back) and a small one whole (CopyObject, the store's SHA-256 checked);
// the copies have the sources' bytes. A source whose size differs from its manifest entry is
// refused and nothing is left.
func TestCopyPublishParts(t *testing.T) {
	var mu sync.Mutex
	var copies, gets []string
	count := func(r *http.Request, _, _ int) s3test.Fault {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "" {
			copies = append(copies, r.URL.Path+" "+r.URL.Query().Get("partNumber"))
		}
		if q := r.URL.Query(); r.Method == http.MethodGet && (len(q) == 0 || q.Get("x-id") == "GetObject") {
			gets = append(gets, r.URL.Path)
		}
		return s3test.None
	}
	src, _ := faultyBackend(t, "copies", count)
	ctx := context.Background()
	whole := s3.NewWithClient(src.Client(), src.URL(), s3.Options{PartSize: 16 << 20})
	rng := rand.New(rand.NewPCG(5, 6))
	data := map[string][]byte{}
	m := &shard.Manifest{Format: shard.FormatShards, Classes: []string{}, ClassCounts: []int64{}, Files: []shard.FileEntry{}, Skipped: []shard.Skipped{}}
	var srcs []s3.CopySource
	pinned := src.PinnedFS(ctx)
	for _, c := range []struct {
		b    *s3.Backend
		name string
		n    int
	}{{whole, "shard-00000.pks", 6 << 20}, {src, "shard-00001.pks", 11 << 20}, {src, "shard-00002.pks", 3000}} {
		d := make([]byte, c.n)
		for j := range d {
			d[j] = byte(rng.Uint32())
		}
		storagetest.Put(t, c.b, c.name, d)
		data[c.name] = d
		sum := sha256.Sum256(d)
		fe := shard.FileEntry{Path: c.name, Size: int64(c.n), SHA256: hex.EncodeToString(sum[:])}
		m.Files = append(m.Files, fe)
		f, err := pinned.Open(c.name)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		srcs = append(srcs, s3.CopySource{From: src, Name: c.name, ETag: pinned.ETag(c.name), Size: fe.Size, SHA256: fe.SHA256})
	}
	manifest, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := s3.NewWithClient(src.Client(), s3.URL{Bucket: "copies", Prefix: "out"}, s3.Options{})
	mu.Lock()
	copies, gets = nil, nil
	mu.Unlock()
	if err := out.CopyPublish(ctx, m, manifest, srcs, s3.CopyOptions{PartThreshold: 5 << 20}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	t.Logf("copies %v; GETs %v", copies, gets)
	want := map[string]int{"/copies/out/shard-00000.pks": 2, "/copies/out/shard-00001.pks": 3, "/copies/out/shard-00002.pks": 1}
	got := map[string]int{}
	for _, c := range copies {
		got[c[:len("/copies/out/shard-00000.pks")]]++
	}
	read := map[string]bool{}
	for _, g := range gets {
		read[g] = true
	}
	mu.Unlock()
	for name, d := range data {
		if got := storagetest.Get(t, out, name); !bytes.Equal(got, d) {
			t.Errorf("%s: the copy differs from the source", name)
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d copy requests, want %d", k, got[k], n)
		}
	}
	if !read["/copies/out/shard-00000.pks"] || read["/copies/out/shard-00001.pks"] || read["/copies/out/shard-00002.pks"] {
		t.Errorf("objects read back: %v; want only the whole one copied in parts", read)
	}

	// A source whose size is not its manifest entry's: refused, nothing left at the prefix.
	bad := s3.NewWithClient(src.Client(), s3.URL{Bucket: "copies", Prefix: "bad"}, s3.Options{})
	srcs[2].Size++
	if err := bad.CopyPublish(ctx, m, manifest, srcs, s3.CopyOptions{}); err == nil {
		t.Fatal("a source of another size than its manifest entry was copied")
	}
	var left []string
	if err := bad.List(ctx, func(fi storage.FileInfo) error { left = append(left, fi.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the refused publish left %v", left)
	}
}

// TestCopyPublishFailsMidway: CopyPublish copies several objects, each in its parts, at once;
// one part of one object fails on every try (a 500 each time): the publish fails naming that
// object, after the other copies were started, and leaves nothing at the prefix (no copy, no
// claim, no manifest).
func TestCopyPublishFailsMidway(t *testing.T) {
	var mu sync.Mutex
	var copied []string
	const failing = "/copies/out/shard-00001.pks"
	plan := func(r *http.Request, _, _ int) s3test.Fault {
		if r.Method != http.MethodPut || r.Header.Get("X-Amz-Copy-Source") == "" {
			return s3test.None
		}
		part := r.URL.Query().Get("partNumber")
		if r.URL.Path == failing && part == "2" {
			return s3test.Status500
		}
		mu.Lock()
		defer mu.Unlock()
		copied = append(copied, r.URL.Path+" "+part)
		return s3test.None
	}
	src, _ := faultyBackend(t, "copies", plan)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	m := &shard.Manifest{Format: shard.FormatShards, Classes: []string{}, ClassCounts: []int64{}, Files: []shard.FileEntry{}, Skipped: []shard.Skipped{}}
	var srcs []s3.CopySource
	pinned := src.PinnedFS(ctx)
	for i := range 4 {
		name := fmt.Sprintf("shard-%05d.pks", i)
		d := make([]byte, 6<<20) // two parts of the backend's 5 MiB
		for j := range d {
			d[j] = byte(rng.Uint32())
		}
		storagetest.Put(t, src, name, d)
		sum := sha256.Sum256(d)
		fe := shard.FileEntry{Path: name, Size: int64(len(d)), SHA256: hex.EncodeToString(sum[:])}
		m.Files = append(m.Files, fe)
		f, err := pinned.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		srcs = append(srcs, s3.CopySource{From: src, Name: name, ETag: pinned.ETag(name), Size: fe.Size, SHA256: fe.SHA256})
	}
	manifest, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := s3.NewWithClient(src.Client(), s3.URL{Bucket: "copies", Prefix: "out"}, s3.Options{})
	err = out.CopyPublish(ctx, m, manifest, srcs, s3.CopyOptions{})
	if err == nil {
		t.Fatal("a copy whose part failed on every try was published")
	}
	if !strings.Contains(err.Error(), "shard-00001.pks") {
		t.Errorf("error %q does not name the object that failed", err)
	}
	mu.Lock()
	n := len(copied)
	mu.Unlock()
	if n < 2 {
		t.Errorf("copy requests that went through: %d; want the others copied in parallel with the failing one", n)
	}
	var left []string
	if err := out.List(ctx, func(fi storage.FileInfo) error { left = append(left, fi.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the failed publish left %v", left)
	}
}
