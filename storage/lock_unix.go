//go:build unix

package pipeline

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// oNoFollow makes opening the lock file fail on a symlink (nothing outside is truncated).
const oNoFollow = unix.O_NOFOLLOW

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
