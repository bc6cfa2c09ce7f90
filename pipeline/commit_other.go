//go:build !unix

package pipeline

import (
	"errors"
	"os"
)

// oNoFollow: no flag for it here.
const oNoFollow = 0

// errNoExchange says the OS cannot exchange two names atomically: outside Unix the
// replacement always takes the two-rename path, which recoverOut completes.
var errNoExchange = errors.New("atomic exchange not supported")

func exchange(a, b string) error { return errNoExchange }

func renameNoReplace(a, b string) error {
	if _, err := os.Lstat(b); err == nil {
		return &os.LinkError{Op: "rename", Old: a, New: b, Err: os.ErrExist}
	}
	return os.Rename(a, b)
}

// tryLock does not lock outside Unix: concurrent builds into one OUT are not detected there.
func tryLock(f *os.File) (bool, error) { return true, nil }

func deviceOf(st os.FileInfo) (uint64, bool) { return 0, false }
