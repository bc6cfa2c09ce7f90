//go:build linux || darwin

package shard

import "syscall"

// mlock locks b in memory.
func mlock(b []byte) error { return syscall.Mlock(b) }
