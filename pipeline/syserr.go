package pipeline

import (
	"errors"
	"syscall"

	"github.com/packer-dev/packer/source"
)

// ErrSystem is wrapped by the error that stops a build when reading an input failed for a reason
// that says nothing about the input: the machine ran out of file descriptors or memory, or the
// disk or network file system holding the source failed.
var ErrSystem = errors.New("a system error, not a bad input: the build stops rather than skip the input (a rerun would pack it)")

// systemErrnos are the errors that make a build fail instead of skipping the input they occurred
// on. --on-error skip is for inputs that are bad (corrupt, truncated, unsupported); skipping for
// these would drop valid inputs with exit 0 (every input after a failing disk, or every input
// opened while descriptors ran out), and a rerun would have packed them.
var systemErrnos = []syscall.Errno{
	syscall.EMFILE, syscall.ENFILE, // out of file descriptors
	syscall.ENOMEM, syscall.ENOBUFS, // out of memory
	syscall.EIO,                                                                // the device failed
	syscall.ESTALE,                                                             // a network file system lost the file handle
	syscall.ENOTCONN, syscall.ECONNRESET, syscall.ETIMEDOUT, syscall.EHOSTDOWN, // the file server went away
	syscall.ENOSPC, syscall.EDQUOT, // no room for a decoder's scratch files
}

// isSystemError reports whether err wraps one of systemErrnos, or source.ErrFetch (the store
// an s3:// source is streamed from failed, or an object changed since it was listed).
func isSystemError(err error) bool {
	if errors.Is(err, source.ErrFetch) {
		return true
	}
	for _, e := range systemErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
