//go:build !linux

package shard

import "os"

// openDirect opens a file for reading through open. O_DIRECT is Linux-only; elsewhere reads
// go through the page cache and direct is false.
func openDirect(open func(flag int) (*os.File, error)) (f *os.File, direct bool, err error) {
	f, err = open(os.O_RDONLY)
	return f, false, err
}

// directUnsupported reports false: without O_DIRECT there is nothing to fall back from.
func directUnsupported(err error) bool { return false }
