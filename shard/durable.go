package shard

import (
	"fmt"
	"os"
	"path/filepath"
)

// Durable files. Every file packer writes (shards, npy columns, data.h5, manifest.json) is
// committed the same way, through CommitFile or WriteFileAtomic and then SyncDir: written under
// a temporary name, fsynced, checked, closed, renamed to its final name, and the directory
// fsynced, so a crash never leaves a final name on a file that is not complete and durable.
//
// These helpers live in shard, and not in a package of their own, because shard is the
// standard-library-only leaf that every writer (pipeline, formats/npy, formats/hdf5) already
// imports for FileEntry, and shard's own FileWriter commits the same way: a separate package
// would have to be imported by shard, which imports nothing but the standard library. They pull
// in neither cgo nor any packer package, so importing them costs a reader nothing.

// CommitFile makes the finished temporary file f durable under the name final: it fsyncs f,
// runs check on it (when check is not nil; f is still open, at an unspecified offset), closes
// it and renames it to final. f is closed on every path. On error the temporary file is left
// in place for the caller to remove, and final is untouched. The directory is not synced: call
// SyncDir once after the last file of the directory is committed.
func CommitFile(f *os.File, final string, check func(f *os.File) error) error {
	tmp := f.Name()
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if check != nil {
		if err := check(f); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return nil
}

// WriteFileAtomic writes data to path durably: to path+".tmp" (replacing a stale one), then
// CommitFile and SyncDir of path's directory. Readers of path see the old file or the new one,
// never a part of it.
func WriteFileAtomic(path string, data []byte) error {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := CommitFile(f, path, nil); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory so that the renames and creations in it are durable. Every error
// (opening, syncing or closing the directory) is returned, naming the directory.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
