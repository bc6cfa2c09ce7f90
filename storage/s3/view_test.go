package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// TestView: a view holds one sparse file per object (no data blocks) of the size and time a
// Download's copy of the object has, except the objects Whole names, copied; Open reads each
// object's bytes, by the view's path or by URL; a read of an object replaced since it was
// listed, or planned with another ETag, fails with ErrChanged naming it; a view of no listing
// opens objects by URL only.
func TestView(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "view")
	ctx := context.Background()
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "view", Prefix: "src"}, s3.Options{})
	files := map[string][]byte{"a/1.jpg": []byte("one"), "a/b/2.jpg": bytes.Repeat([]byte{2}, 3<<20), "top.csv": []byte("path,label\n")}
	for n, d := range files {
		storagetest.Put(t, b, n, d)
	}
	copyDir, viewDir := filepath.Join(t.TempDir(), "copy"), filepath.Join(t.TempDir(), "view")
	if _, err := b.Download(ctx, copyDir, storage.DownloadOptions{}); err != nil {
		t.Fatal(err)
	}
	v, err := b.View(ctx, viewDir, storage.ViewOptions{Whole: func(name string) bool { return filepath.Ext(name) == ".csv" }})
	if err != nil || v.Path() != viewDir {
		t.Fatalf("View = %v, %v", v, err)
	}
	for n, d := range files {
		p := filepath.Join(viewDir, filepath.FromSlash(n))
		vs, err1 := os.Stat(p)
		cs, err2 := os.Stat(filepath.Join(copyDir, filepath.FromSlash(n)))
		if err1 != nil || err2 != nil || vs.Size() != int64(len(d)) || !vs.ModTime().Equal(cs.ModTime()) {
			t.Fatalf("%s: the view's file (%v) is not of the copy's size and time (%v)", n, err1, err2)
		}
		blocks := vs.Sys().(*syscall.Stat_t).Blocks
		if n == "top.csv" {
			if got, _ := os.ReadFile(p); !bytes.Equal(got, d) {
				t.Errorf("%s: the view does not hold the object Whole names", n)
			}
		} else if blocks != 0 {
			t.Errorf("%s: the view's file holds %d blocks", n, blocks)
		}
		o, ok := v.Object(p)
		if !ok || o.URL != "s3://view/src/"+n || o.Size != int64(len(d)) || o.ETag == "" {
			t.Errorf("%s: Object = %+v, %v", n, o, ok)
		}
		r, size, err := v.Open(ctx, p, "", -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || size != int64(len(d)) || !bytes.Equal(got, d) {
			t.Errorf("%s: Open read %d bytes (size %d), %v", n, len(got), size, err)
		}
	}
	p := filepath.Join(viewDir, "a", "1.jpg")
	o, _ := v.Object(p)
	if _, _, err := v.Open(ctx, p, `"another"`, -1); !errors.Is(err, s3.ErrChanged) {
		t.Errorf("Open with another planned ETag: %v, want ErrChanged", err)
	}
	storagetest.Put(t, b, "a/1.jpg", []byte("new"))
	r, _, err := v.Open(ctx, p, "", -1)
	if err == nil {
		_, err = io.ReadAll(r)
		r.Close()
	}
	if !errors.Is(err, s3.ErrChanged) || !bytes.Contains([]byte(err.Error()), []byte("s3://view/src/a/1.jpg")) {
		t.Errorf("a read of an object replaced since the listing: %v, want ErrChanged naming it", err)
	}
	// A view of no listing opens by URL, pinned to the ETag given.
	nv, err := b.View(ctx, "", storage.ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, size, err := nv.Open(ctx, "s3://view/src/a/b/2.jpg", "", -1)
	if err != nil || size != 3<<20 {
		t.Fatalf("Open by URL: size %d, %v", size, err)
	}
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, files["a/b/2.jpg"]) {
		t.Errorf("Open by URL read %d bytes, %v", len(got), err)
	}
	r.Close()
	r, _, err = nv.Open(ctx, "s3://view/src/a/1.jpg", o.ETag, 3)
	if err == nil {
		_, err = io.ReadAll(r)
		r.Close()
	}
	if !errors.Is(err, s3.ErrChanged) {
		t.Errorf("Open by URL with the replaced object's ETag: %v, want ErrChanged", err)
	}
	if _, _, err := nv.Open(ctx, "s3://other/x", "", -1); err == nil {
		t.Error("Open of another bucket's URL succeeded")
	}
}

// TestViewInMemory: a view listed in memory makes no file for an object (but those Whole
// names) and its Stat and ReadDir answer what a view made on disk holds: the same names in the
// same order, sizes, times and folder times; Sparse then makes those files.
func TestViewInMemory(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "mem")
	ctx := context.Background()
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "mem", Prefix: "src"}, s3.Options{})
	for n, d := range map[string]string{"a/1.jpg": "one", "a/b/2.jpg": "two!", "a/c.jpg": "c", "top.csv": "path,label\n", "z/9.png": "nine"} {
		storagetest.Put(t, b, n, []byte(d))
	}
	whole := storage.ViewOptions{Whole: func(name string) bool { return filepath.Ext(name) == ".csv" }}
	diskDir, memDir := filepath.Join(t.TempDir(), "disk"), filepath.Join(t.TempDir(), "mem")
	disk, err := b.View(ctx, diskDir, whole)
	if err != nil {
		t.Fatal(err)
	}
	whole.InMemory = true
	mem, err := b.View(ctx, memDir, whole)
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	filepath.WalkDir(memDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			made = append(made, p)
		}
		return nil
	})
	if len(made) != 1 || filepath.Base(made[0]) != "top.csv" {
		t.Fatalf("a view in memory made the files %v, want only the Whole one", made)
	}
	for _, rel := range []string{".", "a", "a/b", "a/1.jpg", "a/b/2.jpg", "a/c.jpg", "top.csv", "z", "z/9.png"} {
		ds, err1 := os.Stat(filepath.Join(diskDir, rel))
		ms, err2 := mem.Stat(filepath.Join(memDir, rel))
		if err1 != nil || err2 != nil || ds.IsDir() != ms.IsDir() || !ds.ModTime().Equal(ms.ModTime()) || (!ds.IsDir() && ds.Size() != ms.Size()) || ds.Mode().IsRegular() != ms.Mode().IsRegular() {
			t.Errorf("%s: Stat in memory %v (%v), on disk %v (%v)", rel, ms, err2, ds, err1)
			continue
		}
		if ds.IsDir() {
			de, _ := os.ReadDir(filepath.Join(diskDir, rel))
			me, err := mem.ReadDir(filepath.Join(memDir, rel))
			if err != nil || len(de) != len(me) {
				t.Fatalf("%s: ReadDir in memory %v (%v), on disk %v", rel, me, err, de)
			}
			for i := range de {
				if de[i].Name() != me[i].Name() || de[i].IsDir() != me[i].IsDir() || de[i].Type() != me[i].Type() {
					t.Errorf("%s: entry %d in memory %v, on disk %v", rel, i, me[i], de[i])
				}
			}
		}
	}
	if _, err := mem.Stat(filepath.Join(memDir, "a", "nope.jpg")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stat of a name not listed: %v, want ErrNotExist", err)
	}
	if _, err := mem.ReadDir(filepath.Join(memDir, "a", "1.jpg")); err == nil {
		t.Error("ReadDir of a file succeeded")
	}
	if err := mem.Sparse(); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"a", "a/b", "a/1.jpg", "a/b/2.jpg", "z/9.png"} {
		ds, _ := os.Stat(filepath.Join(diskDir, rel))
		ms, err := os.Stat(filepath.Join(memDir, rel))
		if err != nil || !ds.ModTime().Equal(ms.ModTime()) || ds.Size() != ms.Size() {
			t.Errorf("%s: after Sparse %v (%v), want %v", rel, ms, err, ds)
		}
	}
	if ds, _ := disk.Stat(filepath.Join(diskDir, "a")); ds == nil || !ds.IsDir() {
		t.Errorf("Stat of a view made on disk: %v", ds)
	}
}
