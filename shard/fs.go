package shard

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// FS is read access to the files of a dataset, wherever they are stored: OpenDatasetFS,
// ReadManifestFS and OpenFS read through it. Names are slash-separated and relative to the
// dataset's root ("manifest.json", "shard-00000.pks"). The storage package adapts its
// backends to FS (storage.ShardFS); this package never imports storage, and DirFS is the
// local file system's FS for the path-taking functions (OpenDataset, ReadManifest, Open).
type FS interface {
	// Open opens the named file for reads at any offset; a missing file is an error
	// matching fs.ErrNotExist.
	Open(name string) (File, error)
}

// File is an open file of an FS. ReadAt may be called from several goroutines at once.
type File interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// RangeReaderAt is implemented by the Files of an FS whose ReadAt serves small reads from a
// cache of larger ranges of the file (an object store's reader keeps chunks of 2 MiB): such a
// cache suits reads that stay within a window of the file, not a shuffled pass that draws
// records from the whole of a large dataset, where each small record would cost a chunk. A
// Loader's shuffled pass over a dataset of more than half of CacheBytes reads its records
// through ReadRangeAt instead.
type RangeReaderAt interface {
	// ReadRangeAt reads exactly the bytes [off, off+len(p)) of the file, with one request of
	// its own, bypassing the cache; it may be called from several goroutines at once.
	ReadRangeAt(p []byte, off int64) (int, error)
	// CacheBytes is the budget of the cache ReadAt reads through.
	CacheBytes() int64
}

// LocalFS is an FS over a directory of the local file system. Readers that read with O_DIRECT
// (the Loader, ScanFile) open its files by path; errors name files by their local path.
type LocalFS interface {
	FS
	// LocalPath is the path of the named file.
	LocalPath(name string) string
}

// DirFS returns the LocalFS of the directory dir.
func DirFS(dir string) LocalFS { return dirFS(dir) }

type dirFS string

func (d dirFS) LocalPath(name string) string {
	return filepath.Join(string(d), filepath.FromSlash(name))
}

func (d dirFS) Open(name string) (File, error) {
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return openLocal(d.LocalPath(name))
}

// osFile is a File over an *os.File.
type osFile struct {
	*os.File
	size int64
}

func (f *osFile) Size() int64 { return f.size }

func openLocal(path string) (*osFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return statLocal(f)
}

// fsName is how errors name the file name of fsys: its local path where fsys is local.
func fsName(fsys FS, name string) string {
	if l, ok := fsys.(LocalFS); ok {
		return l.LocalPath(name)
	}
	return name
}

// pinnedFS is the LocalFS of a dataset directory held open (an os.Root): every file is opened
// in the directory that was there when the dataset was opened, even after another directory
// has been renamed to its path (packer build --force publishes a new dataset so, and removes
// the old one). Messages name files by their path, as the LocalFS it pins does.
type pinnedFS struct {
	once sync.Once // closes root
	root *os.Root
	dir  string // the directory's path when it was pinned
	lfs  LocalFS
}

// pinLocal opens the directory of the dataset l holds (the directory of its manifest).
func pinLocal(l LocalFS) (*pinnedFS, error) {
	dir := filepath.Dir(l.LocalPath(ManifestName))
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open dataset directory: %w", err)
	}
	return &pinnedFS{root: root, dir: dir, lfs: l}, nil
}

func (p *pinnedFS) LocalPath(name string) string { return p.lfs.LocalPath(name) }

func (p *pinnedFS) Open(name string) (File, error) {
	f, err := p.root.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, p.explain(name, err)
	}
	return statLocal(f)
}

// openFile opens name for the Loader's reads, with O_DIRECT when direct is asked for and
// the file system allows it.
func (p *pinnedFS) openFile(name string, direct bool) (*os.File, bool, error) {
	var (
		f   *os.File
		err error
	)
	if direct {
		f, direct, err = openDirect(func(flag int) (*os.File, error) { return p.root.OpenFile(filepath.FromSlash(name), flag, 0) })
	} else {
		f, err = p.root.Open(filepath.FromSlash(name))
	}
	if err != nil {
		return nil, false, p.explain(name, err)
	}
	return f, direct, nil
}

// explain adds to an open error what makes it likely: the dataset directory was replaced
// (its path names another directory now) or removed since the dataset was opened.
func (p *pinnedFS) explain(name string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	pinned, err1 := p.root.Stat(".")
	now, err2 := os.Stat(p.dir)
	switch {
	case err1 != nil || err2 != nil:
		return fmt.Errorf("%s: the dataset directory was moved or removed since the dataset was opened: %w", p.LocalPath(name), err)
	case !os.SameFile(pinned, now):
		return fmt.Errorf("%s: the dataset directory was replaced since the dataset was opened (a rebuild with --force?); reopen it: %w", p.LocalPath(name), err)
	}
	return err
}

// close closes the directory; later calls do nothing.
func (p *pinnedFS) close() error {
	var err error
	p.once.Do(func() { err = p.root.Close() })
	return err
}

// statLocal makes a File of an open local file.
func statLocal(f *os.File) (*osFile, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &osFile{File: f, size: st.Size()}, nil
}
