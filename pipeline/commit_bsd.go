//go:build unix && !linux

package pipeline

import (
	"errors"
	"os"

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
