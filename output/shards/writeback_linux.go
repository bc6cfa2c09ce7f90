//go:build linux

package shards

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing the n bytes of f at off to the disk
// (sync_file_range SYNC_FILE_RANGE_WRITE), without waiting for them to be written. It is advice:
// errors are ignored, the commit's fsync reports them.
func startWriteback(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}
