//go:build !unix

package storage

import "os"

// OpenLockFile opens (creating it) the lock file at path for reading and writing.
func OpenLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}

// CanLock reports whether TryLock locks: RemoveStale removes nothing where it does not.
const CanLock = false

// openExistingLockFile opens the lock file at path for reading and writing, failing if it is
// missing.
func openExistingLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR, 0)
}

// TryLock does not lock outside Unix: concurrent builds into one output are not detected there.
func TryLock(f *os.File) (bool, error) { return true, nil }

// Device is not known outside Unix.
func Device(st os.FileInfo) (uint64, bool) { return 0, false }
