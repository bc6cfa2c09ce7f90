//go:build linux

package shard

import (
	"errors"
	"os"
	"syscall"
)

// openDirect opens path for reading with O_DIRECT when the file system supports it, and
// without it otherwise (tmpfs, for example, rejects the flag). direct reports which.
func openDirect(path string) (f *os.File, direct bool, err error) {
	f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.EOPNOTSUPP) {
		return nil, false, err
	}
	f, err = os.Open(path)
	return f, false, err
}

// directUnsupported reports whether a read error means O_DIRECT cannot be used for this file
// after all, so the read should be retried without it.
func directUnsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP)
}
