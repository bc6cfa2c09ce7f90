package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// StagingLockName is the lock file in a Staging folder: locked (flock) by the process that
// uses the folder for as long as it does, so that RemoveStale can tell a folder whose owner
// was killed from one in use.
const StagingLockName = ".packer-staging.lock"

// Staging is a local working folder of a command (a dataset built before it is uploaded, a
// copy of an object-store source or part) that the command removes when it ends (Remove). A
// command that is killed (SIGKILL, a crash, the machine's power) cannot: its folder stays,
// and RemoveStale, called by the next command, removes it. The folder holds a lock file
// (StagingLockName) that the owner holds locked until Remove: the lock goes with the process.
type Staging struct {
	Dir  string
	lock *os.File
}

// NewStaging makes a new staging folder in parent (os.TempDir() if empty), named by pattern
// as os.MkdirTemp names it, and locks it. The lock file is locked before it takes its name,
// so that RemoveStale never finds it unlocked while its owner lives.
func NewStaging(parent, pattern string) (*Staging, error) {
	dir, err := os.MkdirTemp(parent, pattern)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".lock-*")
	if err == nil {
		var held bool
		if held, err = TryLock(f); err == nil && !held {
			err = errors.New("a new lock file is locked by another process")
		}
		if err == nil {
			_, _ = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
			err = os.Rename(f.Name(), filepath.Join(dir, StagingLockName))
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("lock the staging folder %s: %w", dir, err)
	}
	return &Staging{Dir: dir, lock: f}, nil
}

// OpenStaging opens the staging folder name in parent (os.TempDir() if empty), making it where
// it does not exist, and locks it: a folder at a name of the caller's choosing, that outlives a
// command that ends without removing it (Release) for the next command of the same work to take
// over (a resumed upload). It fails, naming the folder, when another process holds its lock.
// RemoveStale never removes it unless its name matches the pattern given there.
func OpenStaging(parent, name string) (*Staging, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, StagingLockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the staging folder %s: %w", dir, err)
	}
	held, err := TryLock(f)
	if err == nil && !held && CanLock {
		err = errors.New("another packer command holds its lock (a build of the same output running now?)")
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the staging folder %s: %w", dir, err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &Staging{Dir: dir, lock: f}, nil
}

// Release releases the folder's lock and leaves the folder, for a later command to take over
// (OpenStaging).
func (s *Staging) Release() {
	if s != nil {
		s.lock.Close()
	}
}

// Remove removes the folder and releases its lock.
func (s *Staging) Remove() error {
	if s == nil {
		return nil
	}
	err := os.RemoveAll(s.Dir)
	s.lock.Close()
	return err
}

// Stale is a staging folder RemoveStale removed.
type Stale struct {
	Dir   string
	Bytes int64 // the size of its files
}

// RemoveStale removes the staging folders in parent (os.TempDir() if empty) whose names
// match pattern (a NewStaging pattern, which is a glob of its names too) and whose owner is
// gone: their lock file is not locked. The lock is taken, and held while the folder is
// removed. A folder whose lock is held (its command is running), that holds no lock file
// (not made by NewStaging, or its command was killed within the moment between the folder's
// creation and its lock's), whose lock file cannot be opened (another user's), or that is
// not a folder is left alone. Where locks are not supported (CanLock false) nothing is
// removed. It returns what it removed; an error is the first folder that could not be
// removed, after trying the others.
func RemoveStale(parent, pattern string) ([]Stale, error) {
	if !CanLock {
		return nil, nil
	}
	if parent == "" {
		parent = os.TempDir()
	}
	dirs, err := filepath.Glob(filepath.Join(parent, pattern))
	if err != nil {
		return nil, err
	}
	var removed []Stale
	var first error
	for _, dir := range dirs {
		if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
			continue
		}
		f, err := openExistingLockFile(filepath.Join(dir, StagingLockName))
		if err != nil {
			continue
		}
		held, err := TryLock(f)
		if err != nil || !held {
			f.Close()
			continue
		}
		var size int64
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if info, err := d.Info(); err == nil {
					size += info.Size()
				}
			}
			return nil
		})
		err = os.RemoveAll(dir)
		f.Close()
		if err != nil {
			if first == nil {
				first = fmt.Errorf("remove the stale staging folder %s: %w", dir, err)
			}
			continue
		}
		removed = append(removed, Stale{Dir: dir, Bytes: size})
	}
	return removed, first
}

// LockTemp locks (flock) the temporary file f of a write in progress, through an open file of
// its own that the caller closes once the file is renamed into place or removed: the lock goes
// with the process however it ends, so RemoveAbandoned can tell a temporary file left by a
// killed process from one being written. Lock it before writing to it: RemoveAbandoned leaves
// empty files alone.
func LockTemp(f *os.File) (io.Closer, error) {
	lk, err := os.Open(f.Name())
	if err != nil {
		return nil, err
	}
	if held, err := TryLock(lk); err != nil || !held && CanLock {
		lk.Close()
		if err == nil {
			err = fmt.Errorf("%s: a new temporary file is locked by another process", f.Name())
		}
		return nil, err
	}
	return lk, nil
}

// RemoveAbandoned removes the temporary file at path if its writer is gone: its lock (LockTemp)
// can be taken. An empty file (possibly not locked yet), a locked one, a link or anything
// that cannot be opened is left; where locks are not supported (CanLock false) nothing is
// removed. It reports whether the file was removed.
func RemoveAbandoned(path string) bool {
	if !CanLock {
		return false
	}
	f, err := openExistingLockFile(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return false
	}
	if held, err := TryLock(f); err != nil || !held {
		return false
	}
	return os.Remove(path) == nil
}
