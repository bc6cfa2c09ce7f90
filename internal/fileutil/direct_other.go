//go:build !linux

package fileutil

import "os"

// OpenDirect opens path with flag. O_DIRECT is Linux-only; elsewhere reads and writes go
// through the page cache and direct is false.
func OpenDirect(path string, flag int, perm os.FileMode) (f *os.File, direct bool, err error) {
	f, err = os.OpenFile(path, flag, perm)
	return f, false, err
}

// DirectUnsupported reports false: without O_DIRECT there is nothing to fall back from.
func DirectUnsupported(err error) bool { return false }

// ClearDirect does nothing: files are never opened with O_DIRECT here.
func ClearDirect(f *os.File) error { return nil }
