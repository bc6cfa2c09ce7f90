package storage_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/storagetest"
)

func TestLocalConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Backend {
		return storage.NewLocal(filepath.Join(t.TempDir(), "root"))
	})
}

// TestLocalCommitLeavesNoTemporary: a committed file lies at its path and nothing else does
// (the temporary name is gone); an aborted one leaves nothing.
func TestLocalCommitLeavesNoTemporary(t *testing.T) {
	root := t.TempDir()
	l := storage.NewLocal(root)
	storagetest.Put(t, l, "a/b.bin", []byte("abc"))
	w, err := l.Create(context.Background(), "a/c.bin")
	if err != nil {
		t.Fatal(err)
	}
	w.Abort()
	ents, err := os.ReadDir(filepath.Join(root, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "b.bin" {
		t.Fatalf("folder holds %v, want only b.bin", ents)
	}
}

// TestLocalDirectWriter: CreateFile with direct hands out the file for aligned writes, and
// commits like any other.
func TestLocalDirectWriter(t *testing.T) {
	l := storage.NewLocal(t.TempDir())
	w, err := l.CreateFile("d.bin", true)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 2*shard.Align)
	off := int(shard.Align - uintptr(unsafe.Pointer(&raw[0]))%shard.Align)
	buf := raw[off : off+shard.Align]
	for i := range buf {
		buf[i] = byte(i)
	}
	if _, err := w.Pending().File().Write(buf); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := storagetest.Get(t, l, "d.bin")
	if len(got) != shard.Align || got[shard.Align-1] != byte((shard.Align-1)%256) {
		t.Fatalf("read back %d bytes", len(got))
	}
}

// TestShardFSLocal: the local backend reaches the shard package as a LocalFS naming files by
// their path, so that O_DIRECT readers keep working.
func TestShardFSLocal(t *testing.T) {
	root := t.TempDir()
	fsys := storage.ShardFS(context.Background(), storage.NewLocal(root))
	lfs, ok := fsys.(shard.LocalFS)
	if !ok {
		t.Fatal("ShardFS of a Local is not a shard.LocalFS")
	}
	if got, want := lfs.LocalPath("x/y.pks"), filepath.Join(root, "x", "y.pks"); got != want {
		t.Fatalf("LocalPath = %s, want %s", got, want)
	}
}
