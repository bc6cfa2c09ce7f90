//go:build linux

package pipeline

import (
	"errors"
	"os"
	"syscall"
)

// createDirect creates path for writing with O_DIRECT when the file system supports it, and
// without it otherwise (tmpfs, for example, rejects the flag). direct reports which.
func createDirect(path string) (f *os.File, direct bool, err error) {
	const flags = os.O_RDWR | os.O_CREATE | os.O_TRUNC
	f, err = os.OpenFile(path, flags|syscall.O_DIRECT, 0o666)
	if err == nil {
		return f, true, nil
	}
	if !directUnsupported(err) {
		return nil, false, err
	}
	f, err = os.OpenFile(path, flags, 0o666)
	return f, false, err
}

// clearDirect turns O_DIRECT off on f, for a write whose size is not aligned.
func clearDirect(f *os.File) error {
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

// directUnsupported reports whether an error means O_DIRECT cannot be used for this file.
func directUnsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP)
}
