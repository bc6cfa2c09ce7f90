package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// FileLayout is where the inputs of one file of a record source (RecordSource: WebDataset,
// TFRecord, Parquet) lie in its enumeration, as a plan records it: the file, what it was when
// planned, and how many inputs it yields.
type FileLayout struct {
	// Path is the file relative to the source's path (RecordSource.InputFiles), slash-separated.
	Path  string `json:"path"`
	Stamp        // its size, modification time and ETag when planned
	// Items is the number of inputs the file yields (a fault the enumerator finds counts as
	// the one input that names it).
	Items int64 `json:"items"`
	// Groups, for a Parquet file, is the number of inputs of each row group, in order, when
	// they add up to Items (a file with a fault has none: its part reads it from its start).
	Groups []int64 `json:"groups,omitempty"`
}

// A RecordSource is a Source whose enumerator reads its inputs' bytes from a sequence of files
// (WebDataset, TFRecord, Parquet). It can say where its inputs lie, file by file, so that a
// part of a build from a plan that recorded it opens only the files that hold its inputs.
type RecordSource interface {
	Source
	// InputFiles are the files Enumerate reads, in order, relative to root (slash-separated):
	// root joined with one is the path Options.Files serves, or the local file.
	InputFiles() (root string, files []string)
	// FileStamp is the stamp of one of InputFiles now (StatStamp: through Options.Files where
	// it is set).
	FileStamp(name string) Stamp
	// EnumerateLayout is Enumerate that also calls file after the last input of each file,
	// with its layout (the Stamp FileStamp gave before it was read).
	EnumerateLayout(ctx context.Context, emit func(Item) error, file func(FileLayout) error) error
	// EnumerateRange emits the inputs [lo, hi) of Enumerate's order, with their Seq, given
	// the layout of every file (InputFiles' order, as a plan recorded it): it opens only the
	// files that hold them, each pinned to its Stamp where it is read through Options.Files,
	// and within a file starts at the first row group that holds one (Parquet) and stops after
	// hi (read to the file's end where hi is its layout's end). A file that yields another
	// count than its layout's, or row groups that are not its layout's before the one it
	// starts at, fails it (ErrLayout).
	EnumerateRange(ctx context.Context, files []FileLayout, lo, hi int64, emit func(Item) error) error
}

// ErrLayout is wrapped by the errors of EnumerateRange about a file that no longer yields the
// inputs its layout recorded.
var ErrLayout = errors.New("a file no longer yields the inputs its plan recorded")

// Stamper is implemented by the Files of a view (Options.Files) that can tell what the listing
// says of a file: its size, modification time and ETag.
type Stamper interface {
	Stamp(path string) (Stamp, bool)
}

// StatStamp is the stamp of the file at path, following links: through files where it is set
// and can tell (Stamper), else from the file system. A missing file has Size -1; a folder Size 0.
func StatStamp(files Files, path string) Stamp {
	if s, ok := files.(Stamper); ok {
		if st, ok := s.Stamp(path); ok {
			return st
		}
		return Stamp{Size: -1}
	}
	st, err := Stat(files, path)
	if err != nil {
		return Stamp{Size: -1}
	}
	s := Stamp{Size: st.Size(), ModTime: st.ModTime().UnixNano()}
	if st.IsDir() {
		s.Size = 0 // a folder's size is the file system's, not its content's
	}
	return s
}

// OpenPinned is OpenInput for a file whose stamp a plan recorded (st, or nil): read through
// files, the read is pinned to its ETag.
func OpenPinned(ctx context.Context, files Files, path string, st *Stamp, open func(string) (*os.File, error)) (io.ReadCloser, error) {
	if files != nil {
		r, _, err := files.Open(ctx, path, st)
		return r, err
	}
	return open(path)
}

// errRangeDone ends a file's enumeration once the range's last input is emitted.
var errRangeDone = errors.New("the range is done")

// RangeFile is how EnumerateFileRange reads one file of a record source: the file at index i
// of the layout, from its input first on (an input the file's format lets it start at: a
// Parquet row group's first; 0 otherwise), numbering the inputs from *seq, which it advances
// by one per input emitted or passed over, as Enumerate numbers them.
type RangeFile func(ctx context.Context, i int, first int64, seq *int64, emit func(Item) error) error

// EnumerateFileRange implements RecordSource.EnumerateRange for a source that reads its files
// one by one: it calls read for each file that holds inputs of [lo, hi), with the inputs
// before lo passed over and the read stopped after hi (read to the file's end where hi is
// where its layout ends it, so that its count is checked). start gives, for a file and the number
// of its inputs before lo, the input the read can start at (a row group's first).
func EnumerateFileRange(ctx context.Context, root string, files []FileLayout, lo, hi int64, start func(f FileLayout, skip int64) int64, read RangeFile, emit func(Item) error) error {
	var base int64
	for i, f := range files {
		if base >= hi {
			return nil
		}
		next := base + f.Items
		if next <= lo || f.Items == 0 {
			base = next
			continue
		}
		first := int64(0)
		if start != nil && lo > base {
			first = start(f, lo-base)
		}
		seq := base + first
		name := filepath.Join(root, filepath.FromSlash(f.Path))
		changed := func(n int64) error {
			return fmt.Errorf("%w: %s yields %d inputs now; the plan recorded %d (make a new plan)", ErrLayout, name, n, f.Items)
		}
		err := read(ctx, i, first, &seq, func(it Item) error {
			if it.Seq >= next {
				return changed(it.Seq - base + 1)
			}
			if it.Seq < lo {
				return nil
			}
			if it.Seq >= hi {
				return errRangeDone
			}
			if err := emit(it); err != nil {
				return err
			}
			if it.Seq+1 == hi && hi < next {
				// A range that ends where the file does reads on to its end, so that a file
				// holding more inputs than its layout says fails rather than losing them.
				return errRangeDone
			}
			return nil
		})
		if errors.Is(err, errRangeDone) {
			return nil
		}
		if err != nil {
			return err
		}
		if seq != next {
			return changed(seq - base)
		}
		base = next
	}
	return nil
}

// GroupStart is EnumerateFileRange's start for files with row groups (FileLayout.Groups): the
// first input of the row group that holds input skip of the file.
func GroupStart(f FileLayout, skip int64) int64 {
	var at int64
	for _, g := range f.Groups {
		if at+g > skip {
			return at
		}
		at += g
	}
	return 0 // no groups, or counts that do not reach skip: the file's start
}

// EnumerateFiles enumerates a record source's files one by one, in order, numbering the
// inputs from 0: read emits the inputs of the file name. With file not nil, it is told each
// file's layout after its last input (RecordSource.EnumerateLayout).
func EnumerateFiles(ctx context.Context, rs RecordSource, read func(ctx context.Context, name string, seq *int64, emit func(Item) error) error, emit func(Item) error, file func(FileLayout) error) error {
	var seq int64
	_, names := rs.InputFiles()
	for _, name := range names {
		at := seq
		var st Stamp
		if file != nil {
			st = rs.FileStamp(name)
		}
		if err := read(ctx, name, &seq, emit); err != nil {
			return err
		}
		if file != nil {
			if err := file(FileLayout{Path: filepath.ToSlash(name), Stamp: st, Items: seq - at}); err != nil {
				return err
			}
		}
	}
	return nil
}
