package storage

import (
	"context"
	"io"

	"github.com/packer-dev/packer/shard"
)

// A Backend holds the files of one dataset (or of several, under names with a common
// prefix). Its methods are safe for concurrent use.
type Backend interface {
	// List calls fn with every file of the backend, in no particular order, and stops
	// at fn's first error, which it returns. Directories are not files: only their
	// files are listed, under slash-separated names.
	List(ctx context.Context, fn func(FileInfo) error) error
	// Stat returns the file's name and size.
	Stat(ctx context.Context, name string) (FileInfo, error)
	// Open opens a file for reads at any offset.
	Open(ctx context.Context, name string) (Reader, error)
	// Create starts a file that becomes visible under name, replacing any file of that
	// name, only when its Writer commits, and then whole and durable.
	Create(ctx context.Context, name string) (Writer, error)
	// Remove removes a file. Removing a file that does not exist is an error matching
	// fs.ErrNotExist.
	Remove(ctx context.Context, name string) error
}

// FileInfo is what a Backend knows of a file.
type FileInfo struct {
	Name string // slash-separated, relative to the backend's root
	Size int64
}

// A Reader reads a file at any offset; it is what shard.File asks for, so a Reader is one.
// ReadAt may be called from several goroutines at once.
type Reader interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// A Writer is a file being written. Its bytes are visible under its name only after Commit
// returns nil; Abort discards them. After Commit or Abort the Writer is done: Abort after
// Commit does nothing, and a second Commit fails. A Writer is not safe for concurrent use.
type Writer interface {
	io.Writer
	// Commit makes the written bytes durable and visible under the file's name. On error
	// nothing is visible and the caller calls Abort.
	Commit(ctx context.Context) error
	// Abort discards the file. It is safe to call more than once.
	Abort() error
}

// ShardFS adapts b to the read interface of the shard package, so that shard.OpenDatasetFS,
// shard.ReadManifestFS and shard.OpenFS read through the backend. Every Open made through it
// uses ctx. Where b is Local, the result is a shard.LocalFS, so that the readers that use
// O_DIRECT (the Loader, the scans) keep opening the files by path.
func ShardFS(ctx context.Context, b Backend) shard.FS {
	if l, ok := b.(*Local); ok {
		return localShardFS{shardFS{ctx, b}, l}
	}
	return shardFS{ctx, b}
}

type shardFS struct {
	ctx context.Context
	b   Backend
}

func (f shardFS) Open(name string) (shard.File, error) { return f.b.Open(f.ctx, name) }

type localShardFS struct {
	shardFS
	l *Local
}

func (f localShardFS) LocalPath(name string) string { return f.l.Path(name) }
