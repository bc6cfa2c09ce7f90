package storage

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// exchange swaps the directories a and b in one atomic step (renameat2 RENAME_EXCHANGE), or
// returns errNoExchange where the kernel or file system cannot.
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

// RenameNoReplace renames a to b, failing with an error matching fs.ErrExist if b exists
// (renameat2 RENAME_NOREPLACE; a plain rename where the file system lacks it, so the caller
// holds a lock that keeps its own processes away, and only a foreign process could race).
func RenameNoReplace(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return os.Rename(a, b)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: a, New: b, Err: err}
	}
	return nil
}
