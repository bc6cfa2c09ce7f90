//go:build linux

package shard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAIOReadAllErrors: a read that comes up short (past the end of the file) and a read the
// kernel refuses at submission (a closed descriptor) end readAll with an error naming the file,
// after the reads in flight are done; it returns, whatever the depth and the number of reads.
func TestAIOReadAllErrors(t *testing.T) {
	a := newAIO(2)
	if a == nil {
		t.Skip("the kernel grants no aio context here")
	}
	defer a.close()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _, err := openDirect(func(flag int) (*os.File, error) { return os.OpenFile(path, flag, 0) })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf, free := alignedBuf(16 * sector)
	defer free()
	mk := func(fd uintptr, offs ...int64) []aioRead {
		var rs []aioRead
		for i, off := range offs {
			rs = append(rs, aioRead{fd: fd, buf: buf[i*sector : (i+1)*sector], off: off, name: path})
		}
		return rs
	}
	if err := a.readAll(mk(f.Fd(), 0, 512, 4096, 7680)); err != nil {
		t.Fatalf("reads within the file: %v", err)
	}
	err = a.readAll(mk(f.Fd(), 0, 8192, 512, 1024, 1536, 2048, 2560))
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a read past the end: %v, want a truncated-file error naming %s", err, path)
	}
	bad, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fd := bad.Fd()
	bad.Close()
	err = a.readAll(mk(fd, 0, 512, 1024, 1536, 2048))
	if !errors.Is(err, syscall.EBADF) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a closed descriptor: %v, want EBADF naming %s", err, path)
	}
	if err := a.readAll(mk(f.Fd(), 0, 512)); err != nil { // the context still works
		t.Fatalf("after the errors: %v", err)
	}
}
