//go:build linux

package shard

import (
	"errors"
	"os"
	"syscall"
)

// openDirect opens a file for reading through open, with O_RDONLY|O_DIRECT where the OS and
// file system support it and with O_RDONLY alone otherwise (tmpfs, for example, rejects
// O_DIRECT at open); direct reports which. It is the O_DIRECT open of shard's readers (the
// scans and the Loader). Writers open with O_DIRECT elsewhere: the reader imports nothing but
// the standard library, and writes nothing.
func openDirect(open func(flag int) (*os.File, error)) (f *os.File, direct bool, err error) {
	f, err = open(os.O_RDONLY | syscall.O_DIRECT)
	if err == nil {
		return f, true, nil
	}
	if !directUnsupported(err) {
		return nil, false, err
	}
	f, err = open(os.O_RDONLY)
	return f, false, err
}

// directUnsupported reports whether err, from an open or a read, means O_DIRECT cannot be
// used for this file, so the call should be retried without it.
func directUnsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP)
}
