//go:build !linux

package shard

import "os"

// openDirect opens path for reading. O_DIRECT is Linux-only; elsewhere reads go through the
// page cache.
func openDirect(path string) (f *os.File, direct bool, err error) {
	f, err = os.Open(path)
	return f, false, err
}

func directUnsupported(err error) bool { return false }
