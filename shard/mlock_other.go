//go:build unix && !linux && !darwin

package shard

import "errors"

// mlock is not offered by the syscall package on this platform: buffers stay unlocked, as
// Loader.Locked then reports.
func mlock(b []byte) error { return errors.New("mlock is not supported on this platform") }
