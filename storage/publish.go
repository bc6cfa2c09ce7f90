package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/packer-dev/packer/internal/fileutil"
)

// A Stage is a new dataset being written where no reader looks, to be published whole.
// A build writes the dataset's files into Backend, then calls Publish once; if the build
// fails it calls Discard instead.
type Stage interface {
	// Backend is where the new dataset's files are written.
	Backend() Backend
	// Publish makes the staged dataset the one readers of the dataset's name see, replacing
	// any dataset there: readers see the old dataset or the new one, never a mix. On error
	// the old dataset is still in place (or is put back by the next build's recovery).
	Publish(ctx context.Context) error
	// Discard removes what the stage holds, unless Publish has moved it into place.
	Discard() error
}

// errNoExchange says the OS or file system cannot exchange two names atomically: the
// replacement takes the two-rename path, which the next build's recovery completes if it is
// interrupted.
var errNoExchange = errors.New("atomic exchange not supported")

// exchangeDirs is exchange; the tests replace it to take the two-rename path on any system.
var exchangeDirs = exchange

// LocalStage is a dataset staged in a directory of the local file system beside the directory
// it is published as (on the same file system: publishing is a rename). The caller holds the
// lock that keeps other builds away from Out, and clears leftovers of interrupted builds
// before it stages (a missing Out with Old present is an interrupted replacement: Old is the
// dataset).
type LocalStage struct {
	Dir string // the staging directory the build writes into
	Out string // the dataset's directory
	Old string // where the old Out waits during a two-rename replacement

	swapped bool
}

// Backend is the staging directory's backend.
func (s *LocalStage) Backend() Backend { return NewLocal(s.Dir) }

// Swapped reports that Dir no longer holds the new build: it was renamed into place, or
// holds the old Out after an exchange; Discard then leaves it alone.
func (s *LocalStage) Swapped() bool { return s.swapped }

// Publish puts the finished staging directory at Out. A new Out is created by an atomic
// rename that never replaces anything. An existing Out is exchanged atomically with Dir (one
// renameat2 RENAME_EXCHANGE call), after which Dir names the old Out and is removed; where
// the file system cannot exchange, the old Out is renamed to Old first (the next build's
// recovery puts it back if the process dies between the two renames; a failed second rename
// puts it back at once). The parent directory is synced after each rename. Publish is not
// interrupted by ctx once it has begun renaming.
func (s *LocalStage) Publish(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	parent := filepath.Dir(s.Out)
	if _, err := os.Lstat(s.Out); err != nil {
		if err := RenameNoReplace(s.Dir, s.Out); err != nil {
			return fmt.Errorf("commit output: %w", err)
		}
		s.swapped = true
		return fileutil.SyncDir(parent)
	}
	err := exchangeDirs(s.Dir, s.Out)
	if err == nil {
		s.swapped = true
		if err := fileutil.SyncDir(parent); err != nil {
			return err
		}
		// The new dataset is in place; Dir now names the old Out. A failure to remove it
		// is not the build's failure: the next build into Out removes it.
		_ = os.RemoveAll(s.Dir)
		return nil
	}
	if !errors.Is(err, errNoExchange) {
		return fmt.Errorf("commit output: %w", err)
	}
	if err := os.Rename(s.Out, s.Old); err != nil {
		return fmt.Errorf("move old output aside: %w", err)
	}
	if err := fileutil.SyncDir(parent); err != nil {
		return errors.Join(err, s.putBack())
	}
	if err := os.Rename(s.Dir, s.Out); err != nil {
		return errors.Join(fmt.Errorf("commit output: %w", err), s.putBack())
	}
	s.swapped = true
	if err := fileutil.SyncDir(parent); err != nil {
		return err
	}
	_ = os.RemoveAll(s.Old)
	return nil
}

// putBack renames the old Out, set aside by Publish, back to Out.
func (s *LocalStage) putBack() error {
	if err := os.Rename(s.Old, s.Out); err != nil {
		return fmt.Errorf("put the old output back (the next build into %s does): %w", s.Out, err)
	}
	return fileutil.SyncDir(filepath.Dir(s.Out))
}

// Discard removes the staging directory unless Publish has swapped it.
func (s *LocalStage) Discard() error {
	if s.swapped {
		return nil
	}
	return os.RemoveAll(s.Dir)
}
