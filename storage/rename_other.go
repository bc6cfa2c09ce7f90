//go:build !linux

package storage

import "os"

// exchange is not available outside Linux: the replacement takes the two-rename path.
func exchange(a, b string) error { return errNoExchange }

// RenameNoReplace renames a to b, failing with an error matching fs.ErrExist if b exists
// (checked first: the caller holds a lock that keeps its own processes away, so only a
// foreign process could race).
func RenameNoReplace(a, b string) error {
	if _, err := os.Lstat(b); err == nil {
		return &os.LinkError{Op: "rename", Old: a, New: b, Err: os.ErrExist}
	}
	return os.Rename(a, b)
}
