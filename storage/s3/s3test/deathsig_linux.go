package s3test

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server die with the test process, even when the test binary is
// killed before its cleanups run (a timeout's SIGQUIT, a SIGKILL).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
