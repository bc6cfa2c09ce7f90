//go:build !linux

package s3test

import "os/exec"

// dieWithParent does nothing where the system has no parent-death signal: the server is
// stopped by the test's cleanup only.
func dieWithParent(*exec.Cmd) {}
