package s3_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// TestCopyPublishCancelled: a copy merge interrupted (its context cancelled, as Ctrl-C does)
// while its copies run in parallel fails with the cancellation and leaves nothing at the
// prefix: no copy, no claim, no manifest, no open multipart upload.
func TestCopyPublishCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	copies := 0
	plan := func(r *http.Request, _, _ int) s3test.Fault {
		if r.Method != http.MethodPut || r.Header.Get("X-Amz-Copy-Source") == "" {
			return s3test.None
		}
		mu.Lock()
		defer mu.Unlock()
		if copies++; copies == 6 {
			cancel()
			return s3test.Status500
		}
		return s3test.None
	}
	src, _ := faultyBackend(t, "copies", plan)
	m := &shard.Manifest{Format: shard.FormatShards, Classes: []string{}, ClassCounts: []int64{}, Files: []shard.FileEntry{}, Skipped: []shard.Skipped{}}
	var srcs []s3.CopySource
	pinned := src.PinnedFS(context.Background())
	for i := range 40 {
		name := fmt.Sprintf("shard-%05d.pks", i)
		d := fmt.Appendf(nil, "shard %d of the dataset", i)
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
		t.Fatal("a copy merge whose context was cancelled midway was published")
	}
	if !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		t.Errorf("error %v; want the cancellation", err)
	}
	bg := context.Background()
	var left []string
	if err := out.List(bg, func(fi storage.FileInfo) error { left = append(left, fi.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the interrupted publish left %v", left)
	}
	ups, err := out.OpenUploads(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 0 {
		t.Errorf("the interrupted publish left open uploads %v", ups)
	}
}
