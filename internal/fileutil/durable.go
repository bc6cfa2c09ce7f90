package fileutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// Durable files. Every file packer writes (shards, npy columns, data.h5, manifest.json, preview
// images) is created by Create and committed by Pending.Commit, then SyncDir (WriteFileAtomic does
// all three for a file written in one piece): written under a temporary name, fsynced, checked,
// closed, renamed to its final name, and the directory fsynced, so a crash never leaves a final
// name on a file that is not complete and durable. Create is the one place a written file is
// opened, so a storage other than the local file system replaces it there.
//
// These helpers are the writers' (the outputs, pipeline's manifest and journal, storage's local
// backend and stage, the S3 mirror, preview): shard, the reader a trainer embeds, neither
// imports nor exports them.

// A Pending is a file being written under a temporary name: Create makes it, Commit gives it its
// final name, Abort removes it. A Pending is not safe for concurrent use.
type Pending struct {
	f      *os.File
	tmp    string
	final  string
	direct bool
	done   bool // committed or aborted
}

// Create creates name+".tmp" in dir (replacing a stale one) for reading and writing, to be
// committed as dir/name. With direct set it is opened with O_DIRECT where the OS and file system
// allow it (OpenDirect; Direct reports whether it was), for a writer that writes aligned chunks
// and turns O_DIRECT off (ClearDirect) before an unaligned one.
func Create(dir, name string, direct bool) (*Pending, error) {
	p := &Pending{tmp: filepath.Join(dir, name+".tmp"), final: filepath.Join(dir, name)}
	flag := os.O_RDWR | os.O_CREATE | os.O_TRUNC
	var err error
	if direct {
		p.f, p.direct, err = OpenDirect(p.tmp, flag, 0o666)
	} else {
		p.f, err = os.OpenFile(p.tmp, flag, 0o666)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// File is the open temporary file.
func (p *Pending) File() *os.File { return p.f }

// Direct reports whether the file was opened with O_DIRECT.
func (p *Pending) Direct() bool { return p.direct }

// Name is the temporary file's path.
func (p *Pending) Name() string { return p.tmp }

// Commit makes the finished file durable under its final name (commitFile with check). On error
// the temporary file is left for Abort. The directory is not synced: call SyncDir once after the
// last file of the directory is committed.
func (p *Pending) Commit(check func(f *os.File) error) error {
	if p.done {
		return fmt.Errorf("commit %s: %w", p.tmp, os.ErrClosed)
	}
	f := p.f
	p.f = nil // commitFile closes it on every path
	if err := commitFile(f, p.final, check); err != nil {
		return err
	}
	p.done = true
	return nil
}

// Abort closes and removes the temporary file. It does nothing after a successful Commit and is
// safe to call more than once.
func (p *Pending) Abort() {
	if p.done {
		return
	}
	p.done = true
	if p.f != nil {
		p.f.Close()
		p.f = nil
	}
	os.Remove(p.tmp)
}

// commitFile makes the finished temporary file f durable under the name final: it fsyncs f,
// runs check on it (when check is not nil; f is still open, at an unspecified offset), closes
// it and renames it to final. f is closed on every path. On error the temporary file is left
// in place for the caller to remove, and final is untouched. The directory is not synced: call
// SyncDir once after the last file of the directory is committed.
func commitFile(f *os.File, final string, check func(f *os.File) error) error {
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

// CommitFile makes f, a finished file the caller created under a temporary name in final's
// directory, durable under the name final: fsync, close, rename. f is closed on every path; on
// error the temporary file is left for the caller to remove and final is untouched. The
// directory is not synced: call SyncDir once after the last file of the directory is committed.
func CommitFile(f *os.File, final string) error { return commitFile(f, final, nil) }

// WriteFileAtomic writes data to path durably: Create, Commit and SyncDir of path's directory.
// Readers of path see the old file or the new one, never a part of it.
func WriteFileAtomic(path string, data []byte) error {
	p, err := Create(filepath.Dir(path), filepath.Base(path), false)
	if err != nil {
		return err
	}
	if _, err := p.File().Write(data); err != nil {
		p.Abort()
		return err
	}
	if err := p.Commit(nil); err != nil {
		p.Abort()
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
