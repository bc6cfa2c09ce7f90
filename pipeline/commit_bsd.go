//go:build unix && !linux

package pipeline

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// oNoFollow makes opening the lock file fail on a symlink (nothing outside is truncated).
const oNoFollow = unix.O_NOFOLLOW

// errNoExchange says the OS cannot exchange two names atomically here: on Unix systems other
// than Linux the replacement takes the two-rename path, which recoverOut completes.
var errNoExchange = errors.New("atomic exchange not supported")

func exchange(a, b string) error { return errNoExchange }

// renameNoReplace renames a to b, failing if b exists (checked first: the caller holds OUT's
// lock, so only a foreign process could race).
func renameNoReplace(a, b string) error {
	if _, err := os.Lstat(b); err == nil {
		return &os.LinkError{Op: "rename", Old: a, New: b, Err: os.ErrExist}
	}
	return os.Rename(a, b)
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
