//go:build unix

package storage

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenLockFile opens (creating it) the lock file at path for reading and writing, failing if
// path is a symbolic link, so that nothing a link points to is truncated.
func OpenLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
}

// CanLock reports whether TryLock locks: RemoveStale removes nothing where it does not.
const CanLock = true

// openExistingLockFile opens the lock file at path for reading and writing, failing if it is
// missing or a symbolic link.
func openExistingLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
}

// TryLock takes an exclusive flock on f without waiting; false when another holds it.
func TryLock(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, unix.EINTR):
			continue
		}
		return false, err
	}
}

// Device returns the device a file lies on (false where the OS does not say): two
// directories on different devices cannot be renamed into each other.
func Device(st os.FileInfo) (uint64, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(s.Dev), true
}
