package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// The names a build keeps beside OUT (in OUT's parent folder). They belong to packer: a
// folder of the user's under one of these names is never a build's source (refused), and
// leftovers under them are cleared or restored by the next build into OUT, under the lock.
const (
	// OldSuffix names where the old OUT waits during a replacement on a filesystem without
	// an atomic exchange of two names.
	OldSuffix = ".packer-old"
	// LockSuffix names the lock file: a build holds an exclusive flock on it from before it
	// touches anything beside OUT until it returns. The file holds the holder's pid. It is
	// left in place: removing a lock file races with a build that has just opened it.
	LockSuffix = ".packer-lock"
	// TrashSuffix names the folder leftovers of interrupted builds are moved into (under the
	// lock) before the build starts; it is removed only once every input has been enumerated
	// and checked, so that nothing is deleted that an input of this build lies in.
	TrashSuffix = ".packer-trash"
)

// ErrOutputOverlap is returned when OUT (or a name packer keeps beside it) is the source,
// contains it or lies inside it, or when an input lies inside OUT: --force would delete the
// source, and a build would write into it.
var ErrOutputOverlap = errors.New("the output overlaps the source")

// ErrOutputMount is returned when OUT is a mount point (or otherwise on another filesystem
// than its parent folder): the finished dataset could not be renamed into place.
var ErrOutputMount = errors.New("the output directory is a mount point")

// ErrOutputLocked is returned when another build holds OUT's lock.
var ErrOutputLocked = errors.New("another packer build is writing this output")

// outPaths are OUT and the names beside it, all absolute with OUT's symlinks resolved.
type outPaths struct {
	out, staging, old, lock, trash string
}

func newOutPaths(out string) (outPaths, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return outPaths{}, err
	}
	abs, err = resolveExisting(abs)
	if err != nil {
		return outPaths{}, fmt.Errorf("output %s: %w", out, err)
	}
	return outPaths{out: abs, staging: abs + StagingSuffix, old: abs + OldSuffix, lock: abs + LockSuffix, trash: abs + TrashSuffix}, nil
}

// resolveExisting resolves the symlinks of the longest existing prefix of the absolute path p
// and appends the rest, so that a link named as OUT is followed to the folder it names.
func resolveExisting(p string) (string, error) {
	var rest []string
	cur := p
	for {
		if _, err := os.Lstat(cur); err == nil {
			r, err := filepath.EvalSymlinks(cur)
			if err != nil {
				return "", err
			}
			for i := len(rest) - 1; i >= 0; i-- {
				r = filepath.Join(r, rest[i])
			}
			return r, nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
}

// chain is a folder or file and its ancestors, as os.FileInfo (compared by device and inode
// with os.SameFile, so that links and bind mounts are seen through).
type chain []os.FileInfo

// statChain stats the absolute, symlink-free path p and each of its parents. Missing
// components (a path that does not exist yet) are left out.
func statChain(p string) chain {
	var c chain
	for {
		if st, err := os.Stat(p); err == nil {
			c = append(c, st)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return c
		}
		p = parent
	}
}

func (c chain) has(st os.FileInfo) bool {
	for _, a := range c {
		if os.SameFile(a, st) {
			return true
		}
	}
	return false
}

// guard knows the output names and answers whether a path overlaps one of them.
type guard struct {
	names  []string          // OUT, staging, old, lock, trash (for messages)
	self   []os.FileInfo     // each name's own stat, nil when it does not exist
	chains []chain           // each name's existing ancestors (and itself)
	dirs   map[string]string // inside's cache
}

func newGuard(p outPaths) *guard {
	g := &guard{names: []string{p.out, p.staging, p.old, p.lock, p.trash}, dirs: map[string]string{}}
	for _, n := range g.names {
		st, err := os.Stat(n)
		if err != nil {
			st = nil
		}
		g.self = append(g.self, st)
		g.chains = append(g.chains, statChain(n))
	}
	return g
}

// checkInput refuses an input (the source, a listed file, an enumerated item) that, after
// its symlinks are resolved, is one of the output names, contains one or lies inside one.
// A path that cannot be resolved is left for the source to report.
func (g *guard) checkInput(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil
	}
	st, err := os.Lstat(abs)
	if err != nil {
		// A missing input still must not be named inside an output name: its folder may be
		// one that recoverOut just moved into the trash.
		if n := g.inside(filepath.Dir(abs)); n != "" {
			return fmt.Errorf("%w: the source input %s lies inside %s", ErrOutputOverlap, path, n)
		}
		return nil
	}
	dir := filepath.Dir(abs) // resolved (and cached) by inside
	if st.Mode()&os.ModeSymlink != 0 || st.IsDir() {
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil
		}
		if st, err = os.Stat(real); err != nil {
			return nil
		}
		dir = filepath.Dir(real)
	}
	for i, n := range g.names {
		if g.self[i] != nil && os.SameFile(g.self[i], st) {
			return fmt.Errorf("%w: %s is the source input %s", ErrOutputOverlap, n, path)
		}
		if g.chains[i].has(st) {
			return fmt.Errorf("%w: %s lies inside the source input %s (the build would write into it)", ErrOutputOverlap, n, path)
		}
	}
	if n := g.inside(dir); n != "" {
		return fmt.Errorf("%w: the source input %s lies inside %s", ErrOutputOverlap, path, n)
	}
	return nil
}

// inside returns the output name that folder dir (after resolving the symlinks of its
// existing part) is or lies inside, by device and inode or by name, or "". Results are cached
// by folder: items share few folders.
func (g *guard) inside(dir string) string {
	if n, ok := g.dirs[dir]; ok {
		return n
	}
	found := ""
	if real, err := resolveExisting(dir); err == nil {
		for _, n := range g.names {
			if found == "" && (real == n || strings.HasPrefix(real, n+string(filepath.Separator))) {
				found = n
			}
		}
		for _, a := range statChain(real) {
			for i, n := range g.names {
				if found == "" && g.self[i] != nil && os.SameFile(g.self[i], a) {
					found = n
				}
			}
		}
	}
	g.dirs[dir] = found
	return found
}

// checkMount refuses an OUT on another filesystem than its parent folder (a mount point):
// rename cannot swap it.
func checkMount(p outPaths) error {
	st, err := os.Stat(p.out)
	if err != nil {
		return nil
	}
	pst, err := os.Stat(filepath.Dir(p.out))
	if err != nil {
		return err
	}
	d, ok1 := deviceOf(st)
	pd, ok2 := deviceOf(pst)
	if ok1 && ok2 && d != pd {
		return fmt.Errorf("%w: %s is on another filesystem than its parent folder, so the finished build cannot be renamed into place; give -o a subdirectory of it (for example %s)",
			ErrOutputMount, p.out, filepath.Join(p.out, "dataset"))
	}
	return nil
}

// outLock is a held lock on OUT.
type outLock struct{ f *os.File }

func (l *outLock) release() {
	if l != nil && l.f != nil {
		l.f.Close()
	}
}

// lockOut takes OUT's lock, or says who holds it.
func lockOut(p outPaths) (*outLock, error) {
	if err := os.MkdirAll(filepath.Dir(p.lock), 0o755); err != nil {
		return nil, err
	}
	f, err := storage.OpenLockFile(p.lock)
	if err != nil {
		return nil, fmt.Errorf("open the lock file (%s must be packer's own file, not a link): %w", p.lock, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() > 32 {
		f.Close()
		return nil, fmt.Errorf("%s is not a packer lock file: move it away", p.lock)
	}
	held, err := storage.TryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", p.lock, err)
	}
	if !held {
		data := make([]byte, 32)
		n, _ := f.ReadAt(data, 0)
		f.Close()
		holder := strings.TrimSpace(string(data[:n]))
		if _, err := strconv.Atoi(holder); err != nil {
			holder = "unknown"
		}
		return nil, fmt.Errorf("%w: %s is locked by the build with pid %s (lock file %s); wait for it or stop it",
			ErrOutputLocked, p.out, holder, p.lock)
	}
	data := make([]byte, 32)
	n, _ := f.ReadAt(data, 0)
	if strings.Trim(string(data[:n]), "0123456789\n") != "" {
		f.Close()
		return nil, fmt.Errorf("%s is not a packer lock file: move it away", p.lock)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &outLock{f: f}, nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func hasManifest(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, shard.ManifestName))
	return err == nil
}

// recoverOut clears what an interrupted build left beside OUT, under the lock, without ever
// losing a dataset: if OUT is missing and OUT.packer-old exists (a replacement killed between
// its two renames), the old OUT is renamed back. OUT.packer-old is discarded only when OUT
// holds a committed dataset (the replacement finished); the staging folder never holds the
// only copy of a committed dataset (after an exchange it holds the replaced one while OUT
// holds the new one), so it is discarded. Discarded folders are moved into OUT.packer-trash,
// not removed: emptyTrash removes them once the build has checked that no input lies there.
// With keepStaging (a resumed build), the staging folder is kept for the build to go on in.
func recoverOut(p outPaths, keepStaging bool) error {
	parent := filepath.Dir(p.out)
	if exists(p.old) {
		if !exists(p.out) {
			if err := os.Rename(p.old, p.out); err != nil {
				return fmt.Errorf("restore the output %s from an interrupted replacement: %w", p.out, err)
			}
			if err := fileutil.SyncDir(parent); err != nil {
				return err
			}
		} else if hasManifest(p.out) {
			if err := toTrash(p, p.old); err != nil {
				return fmt.Errorf("discard the replaced output %s: %w", p.old, err)
			}
		} else {
			return fmt.Errorf("both %s and %s exist and %s holds no dataset: move one of them away", p.out, p.old, p.out)
		}
	}
	if exists(p.staging) && !keepStaging {
		if err := toTrash(p, p.staging); err != nil {
			return fmt.Errorf("discard the leftover staging directory %s: %w", p.staging, err)
		}
	}
	return nil
}

// toTrash moves dir into OUT.packer-trash under a name of its own.
func toTrash(p outPaths, dir string) error {
	if err := os.MkdirAll(p.trash, 0o755); err != nil {
		return err
	}
	for i := 0; ; i++ {
		dst := filepath.Join(p.trash, fmt.Sprintf("%s.%d.%d", filepath.Base(dir), os.Getpid(), i))
		err := storage.RenameNoReplace(dir, dst)
		if err == nil {
			return fileutil.SyncDir(filepath.Dir(p.out))
		}
		if !errors.Is(err, os.ErrExist) || i >= 100 {
			return err
		}
	}
}

// emptyTrash removes OUT.packer-trash; Build calls it once every input has been enumerated
// and none lay inside it.
func emptyTrash(p outPaths) error {
	return os.RemoveAll(p.trash)
}

// commitDir publishes the finished staging folder at OUT through the storage seam
// (storage.LocalStage: an atomic rename for a new OUT, an atomic exchange or two renames with
// recovery for an existing one; the parent folder synced after each rename), after checking
// again, without force.force, that OUT is empty (with it, that OUT holds a packer dataset). swapped reports that staging no longer holds the
// new build (it was renamed into place, or holds the old OUT), so the caller must not remove
// it as a failed build's leftover.
func commitDir(p outPaths, force replacing) (swapped bool, err error) {
	// Again, as the build may have taken long: OUT may have become something else.
	if err := checkOut(p.out, force); err != nil {
		return false, err
	}
	stage := &storage.LocalStage{Dir: p.staging, Out: p.out, Old: p.old}
	// Not the build's context: a publish is not abandoned half-way (the local one cannot be).
	err = stage.Publish(context.Background())
	return stage.Swapped(), err
}

// deviceOf returns the device a file lies on.
func deviceOf(st os.FileInfo) (uint64, bool) { return storage.Device(st) }
