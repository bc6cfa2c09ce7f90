// Package storagetest is the conformance suite every storage.Backend must pass: Run it from
// the backend's tests with a function that returns a new, empty backend.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"testing"

	"github.com/packer-dev/packer/storage"
)

// Run runs the conformance tests, each on a fresh backend from newBackend.
func Run(t *testing.T, newBackend func(t *testing.T) storage.Backend) {
	for _, c := range []struct {
		name string
		f    func(*testing.T, storage.Backend)
	}{
		{"CommitMakesVisible", testCommit},
		{"ReplaceOnCommitOnly", testReplace},
		{"Abort", testAbort},
		{"WriterDone", testWriterDone},
		{"RangedReads", testRangedReads},
		{"Missing", testMissing},
		{"Remove", testRemove},
		{"List", testList},
		{"InvalidNames", testInvalidNames},
		{"Cancelled", testCancelled},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(t, newBackend(t)) })
	}
}

var ctx = context.Background()

// Put writes data under name through Create and Commit.
func Put(t *testing.T, b storage.Backend, name string, data []byte) {
	t.Helper()
	w, err := b.Create(ctx, name)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatalf("commit %s: %v", name, err)
	}
}

// Get reads the whole file name through Open, checking Size against Stat.
func Get(t *testing.T, b storage.Backend, name string) []byte {
	t.Helper()
	r, err := b.Open(ctx, name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer r.Close()
	fi, err := b.Stat(ctx, name)
	if err != nil {
		t.Fatalf("stat %s: %v", name, err)
	}
	if fi.Size != r.Size() || fi.Name != name {
		t.Fatalf("stat %s = %+v, open says size %d", name, fi, r.Size())
	}
	data := make([]byte, r.Size())
	if _, err := r.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && len(data) == 0) {
		t.Fatalf("read %s: %v", name, err)
	}
	return data
}

func list(t *testing.T, b storage.Backend) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	if err := b.List(ctx, func(fi storage.FileInfo) error {
		if _, dup := got[fi.Name]; dup {
			t.Errorf("List reports %s twice", fi.Name)
		}
		got[fi.Name] = fi.Size
		return nil
	}); err != nil {
		t.Fatalf("list: %v", err)
	}
	return got
}

func wantMissing(t *testing.T, b storage.Backend, name string) {
	t.Helper()
	if _, err := b.Stat(ctx, name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat %s = %v, want a not-exist error", name, err)
	}
	if r, err := b.Open(ctx, name); !errors.Is(err, fs.ErrNotExist) {
		if r != nil {
			r.Close()
		}
		t.Fatalf("open %s = %v, want a not-exist error", name, err)
	}
	if _, ok := list(t, b)[name]; ok {
		t.Fatalf("List reports %s", name)
	}
}

func testCommit(t *testing.T, b storage.Backend) {
	for _, name := range []string{"a.pks", "sub/dir/b.npy", "empty"} {
		data := []byte("bytes of " + name)
		if name == "empty" {
			data = nil
		}
		w, err := b.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		wantMissing(t, b, name) // written, not committed
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if got := Get(t, b, name); !bytes.Equal(got, data) {
			t.Fatalf("%s holds %q, want %q", name, got, data)
		}
		if err := w.Abort(); err != nil {
			t.Fatalf("Abort after Commit: %v", err)
		}
		if got := Get(t, b, name); !bytes.Equal(got, data) {
			t.Fatalf("Abort after Commit changed %s: %q", name, got)
		}
	}
	if got, want := list(t, b), map[string]int64{"a.pks": 14, "sub/dir/b.npy": 22, "empty": 0}; !mapsEqual(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
}

func testReplace(t *testing.T, b storage.Backend) {
	Put(t, b, "m.json", []byte("old"))
	w, err := b.Create(ctx, "m.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("the new one")); err != nil {
		t.Fatal(err)
	}
	if got := Get(t, b, "m.json"); string(got) != "old" {
		t.Fatalf("before Commit m.json holds %q, want the old bytes", got)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := Get(t, b, "m.json"); string(got) != "the new one" {
		t.Fatalf("after Commit m.json holds %q", got)
	}
}

func testAbort(t *testing.T, b storage.Backend) {
	Put(t, b, "keep", []byte("kept"))
	for _, name := range []string{"keep", "new", "d/new"} {
		w, err := b.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("discarded")); err != nil {
			t.Fatal(err)
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if err := w.Abort(); err != nil {
			t.Fatalf("second Abort: %v", err)
		}
		if err := w.Commit(ctx); err == nil {
			t.Fatalf("Commit after Abort of %s succeeded", name)
		}
	}
	wantMissing(t, b, "new")
	wantMissing(t, b, "d/new")
	if got := Get(t, b, "keep"); string(got) != "kept" {
		t.Fatalf("an aborted replacement changed keep: %q", got)
	}
	if got := list(t, b); !mapsEqual(got, map[string]int64{"keep": 4}) {
		t.Fatalf("after the aborts List = %v, want only keep", got)
	}
}

func testWriterDone(t *testing.T, b storage.Backend) {
	w, err := b.Create(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err == nil {
		t.Fatal("a second Commit succeeded")
	}
}

func testRangedReads(t *testing.T, b storage.Backend) {
	data := make([]byte, 1<<20+123)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	Put(t, b, "big", data)
	r, err := b.Open(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != int64(len(data)) {
		t.Fatalf("Size = %d, want %d", r.Size(), len(data))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for k := range 64 {
		wg.Go(func() {
			off := int64(k) * 16411 % int64(len(data))
			n := min(int64(4096+k*97), int64(len(data))-off)
			p := make([]byte, n)
			if _, err := r.ReadAt(p, off); err != nil && !errors.Is(err, io.EOF) {
				errs <- err
				return
			}
			if !bytes.Equal(p, data[off:off+n]) {
				errs <- fmt.Errorf("ReadAt(%d, %d) returned other bytes", off, n)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A read past the end returns fewer bytes and an error.
	p := make([]byte, 200)
	n, err := r.ReadAt(p, int64(len(data))-100)
	if n != 100 || err == nil || !bytes.Equal(p[:n], data[len(data)-100:]) {
		t.Fatalf("ReadAt across the end = %d, %v; want 100 bytes and an error", n, err)
	}
}

func testMissing(t *testing.T, b storage.Backend) {
	wantMissing(t, b, "nothing")
	wantMissing(t, b, "no/such/dir/file")
}

func testRemove(t *testing.T, b storage.Backend) {
	Put(t, b, "gone", []byte("x"))
	Put(t, b, "d/gone", []byte("y"))
	for _, name := range []string{"gone", "d/gone"} {
		if err := b.Remove(ctx, name); err != nil {
			t.Fatal(err)
		}
		wantMissing(t, b, name)
		if err := b.Remove(ctx, name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("removing the removed %s = %v, want a not-exist error", name, err)
		}
	}
}

func testList(t *testing.T, b storage.Backend) {
	want := map[string]int64{}
	for i := range 20 {
		name := fmt.Sprintf("shard-%05d.pks", i)
		if i%3 == 0 {
			name = "deep/er/" + name
		}
		data := bytes.Repeat([]byte{byte(i)}, i*10)
		Put(t, b, name, data)
		want[name] = int64(len(data))
	}
	if got := list(t, b); !mapsEqual(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	stop := errors.New("stop")
	calls := 0
	err := b.List(ctx, func(storage.FileInfo) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("List after fn's error: %v after %d calls, want fn's error after 1", err, calls)
	}
}

func testInvalidNames(t *testing.T, b storage.Backend) {
	for _, name := range []string{"", ".", "/abs", "../up", "a/../../up", "a/.."} {
		if w, err := b.Create(ctx, name); err == nil {
			w.Abort()
			t.Errorf("Create(%q) succeeded", name)
		}
		if _, err := b.Stat(ctx, name); err == nil {
			t.Errorf("Stat(%q) succeeded", name)
		}
		if r, err := b.Open(ctx, name); err == nil {
			r.Close()
			t.Errorf("Open(%q) succeeded", name)
		}
		if err := b.Remove(ctx, name); err == nil {
			t.Errorf("Remove(%q) succeeded", name)
		}
	}
}

func testCancelled(t *testing.T, b storage.Backend) {
	Put(t, b, "f", []byte("data"))
	c, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Stat(c, "f"); !errors.Is(err, context.Canceled) {
		t.Errorf("Stat with a cancelled context = %v", err)
	}
	if r, err := b.Open(c, "f"); !errors.Is(err, context.Canceled) {
		if r != nil {
			r.Close()
		}
		t.Errorf("Open with a cancelled context = %v", err)
	}
	if w, err := b.Create(c, "g"); !errors.Is(err, context.Canceled) {
		if w != nil {
			w.Abort()
		}
		t.Errorf("Create with a cancelled context = %v", err)
	}
	if err := b.List(c, func(storage.FileInfo) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context = %v", err)
	}
	w, err := b.Create(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(c); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit with a cancelled context = %v", err)
	}
	w.Abort()
	wantMissing(t, b, "h")
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
