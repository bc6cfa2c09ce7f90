package source

import (
	"io/fs"
	"os"
)

// Lister is implemented by the Files of a view whose listing is held in memory (Options.Files:
// an s3:// source read without a copy, no file made per object): it answers for the view's
// paths what the file system answers for a local folder of the same files (their names, sizes
// and times; folders with the times the view gives them), and for other paths the file
// system's answer. Nothing in such a view is a symbolic link.
type Lister interface {
	Stat(path string) (fs.FileInfo, error)
	ReadDir(path string) ([]fs.DirEntry, error)
}

// Stat is os.Stat, answered by files where it is a Lister: the sources' folder walks call it
// (and ReadDir) so that they walk a view in memory as they walk a local folder.
func Stat(files Files, path string) (fs.FileInfo, error) {
	if l, ok := files.(Lister); ok {
		return l.Stat(path)
	}
	return os.Stat(path)
}

// Lstat is os.Lstat, answered by files where it is a Lister (whose entries are no links).
func Lstat(files Files, path string) (fs.FileInfo, error) {
	if l, ok := files.(Lister); ok {
		return l.Stat(path)
	}
	return os.Lstat(path)
}

// ReadDir is os.ReadDir, answered by files where it is a Lister.
func ReadDir(files Files, path string) ([]fs.DirEntry, error) {
	if l, ok := files.(Lister); ok {
		return l.ReadDir(path)
	}
	return os.ReadDir(path)
}

// ListerOf is files where it is a Lister, else nil (the file system).
func ListerOf(files Files) Lister {
	l, _ := files.(Lister)
	return l
}
