//go:build !linux

package pipeline

import "os"

// exchange is not available outside Linux: the replacement takes the two-rename path.
func exchange(a, b string) error { return errNoExchange }

// renameNoReplace renames a to b, failing if b exists (checked first: the caller holds OUT's
// lock, so only a foreign process could race).
func renameNoReplace(a, b string) error {
	if _, err := os.Lstat(b); err == nil {
		return &os.LinkError{Op: "rename", Old: a, New: b, Err: os.ErrExist}
	}
	return os.Rename(a, b)
}
