package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/packer-dev/packer/source"
)

// sysErrSource is genSource whose item 3 fails to open with errno.
type sysErrSource struct {
	genSource
	errno syscall.Errno
}

func (s *sysErrSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	if it.Seq == 3 {
		return &os.PathError{Op: "open", Path: "/data/" + it.Name, Err: s.errno}
	}
	return s.genSource.Decode(ctx, it, emit)
}

// TestBuildStopsOnSystemErrors: an input that could not be read because descriptors or memory
// ran out, or the disk failed, used to be skipped like a corrupt file, with exit 0; a rerun
// would have packed it. The build now fails, naming the input, and commits nothing; a bad
// input is still skipped.
func TestBuildStopsOnSystemErrors(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.EIO, syscall.ENOMEM, syscall.ESTALE} {
		out := filepath.Join(t.TempDir(), "out")
		_, err := build(t, &sysErrSource{genSource: genSource{n: 10}, errno: errno}, out, nil)
		if !errors.Is(err, ErrSystem) || !errors.Is(err, errno) || !strings.Contains(err.Error(), "item-003") {
			t.Errorf("%v: got %v, want the build stopped naming item-003", errno, err)
		}
		if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("%v: OUT exists after the failed build", errno)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	sum, err := build(t, &sysErrSource{genSource: genSource{n: 10}, errno: syscall.ENOENT}, out, nil)
	if err != nil || sum.Skipped != 1 {
		t.Fatalf("a vanished file: %v, %d skipped; want it skipped", err, sum.Skipped)
	}
}
