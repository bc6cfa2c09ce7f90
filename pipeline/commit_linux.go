package pipeline

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// oNoFollow makes opening the lock file fail on a symlink (nothing outside is truncated).
const oNoFollow = unix.O_NOFOLLOW

// errNoExchange says the filesystem (or kernel) cannot exchange two names atomically.
var errNoExchange = errors.New("atomic exchange not supported")

// exchange swaps the folders a and b in one atomic step (renameat2 RENAME_EXCHANGE).
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return errNoExchange
	}
	if err != nil {
		return &os.LinkError{Op: "exchange", Old: a, New: b, Err: err}
	}
	return nil
}

// renameNoReplace renames a to b, failing if b exists (plain rename where the filesystem
// lacks RENAME_NOREPLACE; the caller holds OUT's lock, so only a foreign process could race).
func renameNoReplace(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return os.Rename(a, b)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: a, New: b, Err: err}
	}
	return nil
}

// tryLock takes an exclusive flock on f without waiting; false when another holds it.
func tryLock(f *os.File) (bool, error) {
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

// deviceOf returns the device a file lies on.
func deviceOf(st os.FileInfo) (uint64, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(s.Dev), true
}
