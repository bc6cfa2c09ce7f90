package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// writeTinyJPEGs writes n small JPEGs (8×8, each its own colour) in two class folders below root.
func writeTinyJPEGs(t *testing.T, root string, n int) {
	t.Helper()
	for i := range n {
		img := image.NewRGBA(image.Rect(0, 0, 8, 8))
		for p := range 64 {
			img.Set(p%8, p/8, color.RGBA{uint8(i), uint8(i >> 8), uint8(p * 4), 255})
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, []string{"cat", "dog"}[i%2], fmt.Sprintf("%05d.jpg", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// entryWatch samples the number of entries (files and folders) below root until stop, and
// returns the most it saw.
func entryWatch(root string) (stop func() int) {
	var most atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			var n int64
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err == nil && p != root {
					n++
				}
				return nil
			})
			if n > most.Load() {
				most.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() int { close(done); wg.Wait(); return int(most.Load()) }
}

// TestS3ViewInMemory: a part of an image folder built from a bucket without a plan makes no
// file per object below $TMPDIR (its view of the listing is held in memory): 2,000 objects,
// at most a few entries seen there during the build. The part, from the view, and the other
// part, from a copy of the prefix with the objects' times (--source-cache), merge into the
// local build: their content digests agree as the sparse files' did.
func TestS3ViewInMemory(t *testing.T) {
	srv := s3Setup(t, "mem")
	root := t.TempDir()
	imgs := filepath.Join(root, "imgs")
	writeTinyJPEGs(t, imgs, 2000)
	putTree(t, srv, "mem", "photos", imgs)
	tmp := filepath.Join(root, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	args := []string{"--resize", "8", "--shard-size", "16KiB"}
	whole := filepath.Join(root, "local")
	mustRun(t, append([]string{"build", imgs, "-o", whole}, args...)...)

	p0, p1 := filepath.Join(root, "p0"), filepath.Join(root, "p1")
	stop := entryWatch(tmp)
	mustRun(t, append([]string{"build", "s3://mem/photos", "-o", p0, "--part", "0/2"}, args...)...)
	most := stop()
	t.Logf("at most %d entries below $TMPDIR while a part of 2,000 objects was built", most)
	if most > 8 {
		t.Errorf("a part of 2,000 objects from a bucket made %d entries below $TMPDIR; want a few (no file per object)", most)
	}
	// The watch sees files: the copy of the prefix made in $TMPDIR is seen whole.
	stop = entryWatch(tmp)
	mustRun(t, append([]string{"build", "s3://mem/photos", "-o", p1, "--part", "1/2", "--source-cache", filepath.Join(tmp, "cache")}, args...)...)
	if most := stop(); most < 2000 {
		t.Errorf("the copy of 2,000 objects was seen at %d entries at most; the watch misses files", most)
	}
	merged := filepath.Join(root, "merged")
	mustRun(t, "merge", "-o", merged, p0, p1)
	sameTree(t, whole, merged)
}
