package video

import (
	"io"
	"os"
	"syscall"
)

// fSetPipeSize is Linux's F_SETPIPE_SZ fcntl.
const fSetPipeSize = 1031

// growPipe asks for a larger pipe buffer (up to size; unprivileged processes are capped by
// /proc/sys/fs/pipe-max-size, 1 MiB by default), so a frame is read in one or a few system
// calls rather than one per 64 KiB. Failure is harmless.
func growPipe(r io.Reader, size int) {
	f, ok := r.(*os.File)
	if !ok {
		return
	}
	syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), fSetPipeSize, uintptr(size))
}
