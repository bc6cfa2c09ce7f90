package shard

import (
	"errors"
	"fmt"
	"io"
)

// Sentinel errors. Every error this package returns for bad shard bytes is a *CorruptionError
// wrapping one of these, so callers test with errors.Is(err, shard.ErrChecksum) and locate the
// damage with errors.As(err, &ce).
var (
	// ErrMagic is returned when a shard does not start with HeaderMagic or does not end with
	// FooterMagic: the file is not a shard, or its first or last bytes are damaged.
	ErrMagic = errors.New("shard: bad magic")
	// ErrVersion is returned for a shard whose format version this package does not know. The
	// file may be intact but newer than this reader.
	ErrVersion = errors.New("shard: unsupported format version")
	// ErrChecksum is returned when a CRC-32C stored in a shard does not match the bytes it
	// covers: the bytes are corrupt.
	ErrChecksum = errors.New("shard: checksum mismatch")
	// ErrTooLarge is returned when a length or count read from a shard exceeds a limit of
	// FORMAT.md (MaxMetaLen, MaxRecords, MaxRecordSize, MaxAux). It means corrupt or hostile input.
	ErrTooLarge = errors.New("shard: length exceeds limit")
	// ErrTruncated is returned when a shard is shorter than its own structure says, for
	// example a file cut short while being copied. It wraps io.ErrUnexpectedEOF.
	ErrTruncated = fmt.Errorf("shard: truncated file: %w", io.ErrUnexpectedEOF)
	// ErrPadding is returned by Scan when padding or reserved bytes that must be zero are not.
	ErrPadding = errors.New("shard: non-zero padding")
	// ErrFormat is returned when fields of a shard contradict each other or FORMAT.md
	// (unknown flags, wrong offsets, bad meta JSON, non-monotonic offsets): corrupt input.
	ErrFormat = errors.New("shard: invalid format")
)

// CorruptionError reports damage found in a shard: which file, which records and where.
type CorruptionError struct {
	Path    string // file name as given to Open, NewReader or Scan
	Record  int64  // first record of the damaged range, -1 when the fault is not in record data
	Records int64  // number of records in the damaged range, 0 when Record is -1
	Offset  int64  // byte offset in the file where the damaged region starts, -1 if unknown
	Err     error  // one of the sentinel errors, possibly wrapped with detail
}

func (e *CorruptionError) Error() string {
	var where string
	switch {
	case e.Record >= 0 && e.Records > 1:
		where = fmt.Sprintf(": records %d-%d", e.Record, e.Record+e.Records-1)
	case e.Record >= 0:
		where = fmt.Sprintf(": record %d", e.Record)
	}
	if e.Offset >= 0 {
		where += fmt.Sprintf(" at offset %d", e.Offset)
	}
	return fmt.Sprintf("%s%s: %v", e.Path, where, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// corrupt builds a CorruptionError that is not tied to a record range.
func corrupt(path string, off int64, err error, format string, args ...any) *CorruptionError {
	if format != "" {
		err = fmt.Errorf("%w: "+format, append([]any{err}, args...)...)
	}
	return &CorruptionError{Path: path, Record: -1, Offset: off, Err: err}
}

// corruptRecords builds a CorruptionError for the records [first, first+count).
func corruptRecords(path string, first, count, off int64, err error, format string, args ...any) *CorruptionError {
	e := corrupt(path, off, err, format, args...)
	e.Record, e.Records = first, count
	return e
}
