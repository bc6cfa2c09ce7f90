package testfix

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/shard"
)

// FileWriter writes one shard file safely, for tests that build datasets by hand: the bytes go to path+".tmp", and Commit checks the
// finished file's structure, syncs it, renames it to path and syncs the directory, so a crash
// never leaves a file under the final name that is not a complete shard. It computes the
// file's SHA-256 on the way, for the manifest.
//
// The call order is: CreateFile (Append | DataSize)* (Commit | Abort). Abort may follow a
// failed Commit. A FileWriter is not safe for concurrent use.
type FileWriter struct {
	*shard.Writer
	path string
	p    *fileutil.Pending
	hw   hashWriter
	done bool
	err  error // first Commit error, returned again by later calls
}

// errClosed is returned by Commit after Commit or Abort.
var errClosed = errors.New("shard file is closed")

// hashWriter passes writes to a file and to a hash.
type hashWriter struct {
	f *os.File
	h hash.Hash
	n int64
}

func (w *hashWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.h.Write(p[:n])
	w.n += int64(n)
	return n, err
}

// CreateFile creates path+".tmp" (replacing a stale one, through Create) and starts a shard in it.
func CreateFile(path string, opts shard.WriterOptions) (*FileWriter, error) {
	p, err := fileutil.Create(filepath.Dir(path), filepath.Base(path), false)
	if err != nil {
		return nil, fmt.Errorf("create shard: %w", err)
	}
	fw := &FileWriter{path: path, p: p, hw: hashWriter{f: p.File(), h: sha256.New()}}
	fw.Writer, err = shard.NewWriter(&fw.hw, opts)
	if err != nil {
		p.Abort()
		return nil, err
	}
	return fw, nil
}

// Commit finishes the shard (Writer.Close), then commits it through Pending.Commit: syncs the
// file, re-reads and checks its header, footer and index, renames it to its final path, and
// syncs the directory. On error the temporary file is left for Abort to remove.
func (fw *FileWriter) Commit() error {
	if fw.err != nil {
		return fw.err
	}
	if fw.done {
		return errClosed
	}
	fw.err = fw.commit()
	return fw.err
}

func (fw *FileWriter) commit() error {
	tmp := fw.p.Name()
	if err := fw.Writer.Close(); err != nil {
		return fmt.Errorf("%s: %w", tmp, err)
	}
	if fw.hw.n != fw.Writer.Size() {
		return fmt.Errorf("%s: wrote %d bytes, want %d", tmp, fw.hw.n, fw.Writer.Size())
	}
	err := fw.p.Commit(func(f *os.File) error {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		r, err := shard.NewReaderOptions(f, st.Size(), tmp, shard.ReaderOptions{SkipCRC: true})
		if err != nil {
			return fmt.Errorf("check written file: %w", err)
		}
		if int64(r.Len()) != fw.Writer.Len() {
			return fmt.Errorf("%s holds %d records, wrote %d", tmp, r.Len(), fw.Writer.Len())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit shard: %w", err)
	}
	fw.done = true
	return fileutil.SyncDir(filepath.Dir(fw.path))
}

// Abort closes and removes the temporary file. It does nothing after a successful Commit.
func (fw *FileWriter) Abort() error {
	if fw.done {
		return nil
	}
	fw.done = true
	fw.p.Abort()
	return nil
}

// Path returns the final path of the shard.
func (fw *FileWriter) Path() string { return fw.path }

// FileSize returns the number of bytes written so far; after Commit, the file size.
func (fw *FileWriter) FileSize() int64 { return fw.hw.n }

// SHA256 returns the lower-case hex SHA-256 of the bytes written so far; after Commit, of the
// whole file.
func (fw *FileWriter) SHA256() string { return hex.EncodeToString(fw.hw.h.Sum(nil)) }
