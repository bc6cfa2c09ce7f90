package storage

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/packer-dev/packer/internal/fileutil"
)

// Local is a Backend over a directory of the local file system. Files are written through
// fileutil.Create (a temporary name, fsync, rename, directory fsync), so a committed file is
// durable and a crash never leaves a final name on a partial file.
type Local struct {
	root string
}

// NewLocal returns the Backend of the directory root (which need not exist yet: Create
// makes it and any folder a name needs).
func NewLocal(root string) *Local { return &Local{root: root} }

// Root is the directory the backend was made with.
func (l *Local) Root() string { return l.root }

// Path is the local path of the file name: root joined with name.
func (l *Local) Path(name string) string { return filepath.Join(l.root, filepath.FromSlash(name)) }

// check refuses a cancelled context and a name that, cleaned (path.Clean: "a//b" is "a/b"),
// is not a valid slash-separated relative path below the root naming a file.
func (l *Local) check(ctx context.Context, op, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return checkName(op, name)
}

func checkName(op, name string) error {
	if c := path.Clean(name); name == "" || c == "." || !fs.ValidPath(c) {
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return nil
}

// List walks root (following root itself where it is a link, not the links inside it) and
// reports every file that is not a directory; a root that does not exist holds no files. An unreadable folder stops the walk with an
// error naming its path.
func (l *Local) List(ctx context.Context, fn func(FileInfo) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// WalkDir does not follow a link at its root: walk the folder it names.
	root := l.root
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return nil // nothing created yet: no files
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		var size int64
		if info, err := d.Info(); err == nil {
			size = info.Size()
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		} else {
			return nil // removed while listed
		}
		return fn(FileInfo{Name: filepath.ToSlash(rel), Size: size})
	})
}

// Stat stats the file, following links.
func (l *Local) Stat(ctx context.Context, name string) (FileInfo, error) {
	if err := l.check(ctx, "stat", name); err != nil {
		return FileInfo{}, err
	}
	st, err := os.Stat(l.Path(name))
	if err != nil {
		return FileInfo{}, err
	}
	if st.IsDir() {
		return FileInfo{}, &fs.PathError{Op: "stat", Path: l.Path(name), Err: errIsDir}
	}
	return FileInfo{Name: path.Clean(name), Size: st.Size()}, nil
}

var errIsDir = errors.New("is a directory")

// Open opens the file for reading through the page cache (a reader that wants O_DIRECT opens
// Path(name) with fileutil.OpenDirect).
func (l *Local) Open(ctx context.Context, name string) (Reader, error) {
	if err := l.check(ctx, "open", name); err != nil {
		return nil, err
	}
	f, err := os.Open(l.Path(name))
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: l.Path(name), Err: errIsDir}
	}
	return &localReader{File: f, size: st.Size()}, nil
}

type localReader struct {
	*os.File
	size int64
}

func (r *localReader) Size() int64 { return r.size }

// Create starts the file name (CreateFile without O_DIRECT).
func (l *Local) Create(ctx context.Context, name string) (Writer, error) {
	if err := l.check(ctx, "create", name); err != nil {
		return nil, err
	}
	return l.CreateFile(name, false)
}

// CreateFile starts the file name with fileutil.Create, making the folders it lies in. With
// direct set the file is opened with O_DIRECT where the file system allows it; the writer
// then writes aligned blocks to File itself (see fileutil.Pending).
func (l *Local) CreateFile(name string, direct bool) (*LocalWriter, error) {
	if err := checkName("create", name); err != nil {
		return nil, err
	}
	dir := filepath.Join(l.root, filepath.FromSlash(path.Dir(name)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p, err := fileutil.Create(dir, path.Base(name), direct)
	if err != nil {
		return nil, err
	}
	return &LocalWriter{p: p, dir: dir}, nil
}

// LocalWriter is Local's Writer: a fileutil.Pending whose Commit also syncs the directory.
type LocalWriter struct {
	p   *fileutil.Pending
	dir string
}

// Pending is the file being written, for a writer that needs the *os.File (O_DIRECT writes)
// or a check before the commit (Pending.Commit with a check, then SyncDir of Dir).
func (w *LocalWriter) Pending() *fileutil.Pending { return w.p }

// Dir is the folder the file is committed in.
func (w *LocalWriter) Dir() string { return w.dir }

func (w *LocalWriter) Write(b []byte) (int, error) { return w.p.File().Write(b) }

// Commit fsyncs, closes and renames the file to its name, then fsyncs its folder.
func (w *LocalWriter) Commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.p.Commit(nil); err != nil {
		return err
	}
	return fileutil.SyncDir(w.dir)
}

// Abort closes and removes the temporary file.
func (w *LocalWriter) Abort() error {
	w.p.Abort()
	return nil
}

// Remove removes the file (not a folder).
func (l *Local) Remove(ctx context.Context, name string) error {
	if err := l.check(ctx, "remove", name); err != nil {
		return err
	}
	p := l.Path(name)
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return &fs.PathError{Op: "remove", Path: p, Err: errIsDir}
	}
	return os.Remove(p)
}
