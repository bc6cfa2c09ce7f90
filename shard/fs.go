package shard

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &osFile{File: f, size: st.Size()}, nil
}

// fsName is how errors name the file name of fsys: its local path where fsys is local.
func fsName(fsys FS, name string) string {
	if l, ok := fsys.(LocalFS); ok {
		return l.LocalPath(name)
	}
	return name
}
