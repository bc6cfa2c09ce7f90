//go:build linux

package fileutil

import (
	"errors"
	"os"
	"syscall"
)

// OpenDirect opens path with flag|O_DIRECT when the OS and file system support it, and with
// flag alone otherwise (tmpfs, for example, rejects O_DIRECT at open). direct reports which.
// It is the O_DIRECT open of packer's writers and of the bench command; shard's own readers
// open through openDirect.
func OpenDirect(path string, flag int, perm os.FileMode) (f *os.File, direct bool, err error) {
	f, err = os.OpenFile(path, flag|syscall.O_DIRECT, perm)
	if err == nil {
		return f, true, nil
	}
	if !DirectUnsupported(err) {
		return nil, false, err
	}
	f, err = os.OpenFile(path, flag, perm)
	return f, false, err
}

// DirectUnsupported reports whether err, from an open, read or write, means O_DIRECT cannot
// be used for this file, so the call should be retried without it.
func DirectUnsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP)
}

// ClearDirect turns O_DIRECT off on f (opened by OpenDirect), for an unaligned read or write.
func ClearDirect(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		if e != 0 {
			serr = e
			return
		}
		if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFL, fl&^syscall.O_DIRECT); e != 0 {
			serr = e
		}
	})
	return errors.Join(err, serr)
}
