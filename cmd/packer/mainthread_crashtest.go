//go:build packer_crashtest

package main

import "runtime"

// Only in the binary TestCommitCrashPoints builds (-tags packer_crashtest): the main
// goroutine, which does all of a build's work on OUT (lock, recovery, the renames, syncs and
// removals of the commit), stays on the process's first thread. strace without -f traces
// only that thread and counts injections per thread, so "kill at the Kth rename" then means
// the Kth rename of the commit path, deterministically; the other threads (decoding,
// writing shards) run untraced.
func init() { runtime.LockOSThread() }
