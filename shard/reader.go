package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// ReaderOptions configures a Reader. The zero value checks checksums.
type ReaderOptions struct {
	// SkipCRC turns off the check of the data blocks' CRC-32C. The header, footer and index
	// are always checked when the shard is opened.
	SkipCRC bool
}

// Reader gives random access to the records of one shard.
//
// Opening a shard reads and checks the header, the footer and the whole index (offsets,
// labels, aux values, per-record metadata and block checksums), which stays in memory; record
// bytes are read on demand. Unless ReaderOptions.SkipCRC is set, the first read touching a
// checksum block reads and checks the whole block; later reads of a checked block read only the
// bytes asked for.
//
// A Reader is safe for concurrent use by multiple goroutines when its io.ReaderAt is (an
// *os.File is). Record and ReadRecords return an error for a record number out of range; the
// accessors without an error result (Label, Aux, RecordMeta, RecordLen, DataRange) panic, like
// a slice index. Corrupt bytes never cause a panic but a *CorruptionError.
type Reader struct {
	r    io.ReaderAt
	file io.Closer   // owned when opened by Open or OpenFS
	st   os.FileInfo // of a local file at open: reads check it has not changed since
	name string
	size int64
	opts ReaderOptions

	h  *headerInfo
	ft *footerInfo
	l  indexLayout

	index    []byte
	verified []atomic.Uint64 // bit per checksum block that has been checked
}

// Open opens the shard file at path and checks its structure. Close releases it.
func Open(path string) (*Reader, error) { return OpenOptions(path, ReaderOptions{}) }

// OpenOptions is Open with options.
func OpenOptions(path string, opts ReaderOptions) (*Reader, error) {
	f, err := openLocal(path)
	if err != nil {
		return nil, fmt.Errorf("open shard: %w", err)
	}
	return openFile(f, path, opts)
}

// OpenFS opens the shard file name of fsys, like OpenOptions.
func OpenFS(fsys FS, name string, opts ReaderOptions) (*Reader, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open shard: %w", err)
	}
	return openFile(f, fsName(fsys, name), opts)
}

func openFile(f File, path string, opts ReaderOptions) (*Reader, error) {
	r, err := NewReaderOptions(f, f.Size(), path, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.file = f
	if lf, ok := f.(*osFile); ok {
		if r.st, err = lf.Stat(); err != nil {
			r.Close()
			return nil, fmt.Errorf("open shard: %w", err)
		}
	}
	return r, nil
}

// unchanged checks, after a read, that the local file the Reader opened still has the size
// and modification time it had at open. A file written over in place (cp, rsync --inplace:
// the same inode, other bytes) would otherwise serve its new bytes from blocks checked
// before, which are not checked again. A write that reached the file before the read ended
// has set its modification time by the time this runs, so the read's bytes are the ones
// checked or an error.
func (r *Reader) unchanged(f *os.File) error {
	if r.st == nil {
		return nil
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("shard: %s: %w", r.name, err)
	}
	if st.Size() != r.st.Size() || !st.ModTime().Equal(r.st.ModTime()) {
		return fmt.Errorf("%s: the file was changed since it was opened (%d bytes modified %s, now %d bytes modified %s: "+
			"written over in place?); reopen the dataset", r.name, r.st.Size(), r.st.ModTime().UTC().Format(time.RFC3339Nano),
			st.Size(), st.ModTime().UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// NewReader reads a shard of size bytes from r; name is used in errors.
func NewReader(r io.ReaderAt, size int64, name string) (*Reader, error) {
	return NewReaderOptions(r, size, name, ReaderOptions{})
}

// NewReaderOptions is NewReader with options.
func NewReaderOptions(r io.ReaderAt, size int64, name string, opts ReaderOptions) (*Reader, error) {
	if size < 0 {
		return nil, fmt.Errorf("shard: %s: negative size %d", name, size)
	}
	file := r
	if ra, ok := r.(RangeReaderAt); ok {
		// The header, footer and index are read once each: exact reads, not the chunks
		// (and read-ahead) of the file's cache, which would fetch most of a shard to open it.
		r = rangeAt{ra}
	}
	h, err := readHeader(r, size, name)
	if err != nil {
		return nil, err
	}
	ft, err := readFooter(r, size, name)
	if err != nil {
		return nil, err
	}
	l, err := checkHeaderFooter(h, ft, name, size)
	if err != nil {
		return nil, err
	}
	index := make([]byte, ft.indexLen) // indexLen ≤ size, checked by readFooter
	if err := readFull(r, index, ft.indexOffset, name); err != nil {
		return nil, err
	}
	if got := crc32c(index); got != ft.indexCRC {
		return nil, corrupt(name, ft.indexOffset, ErrChecksum, "index CRC %#08x, stored %#08x", got, ft.indexCRC)
	}
	if err := checkIndex(index, l, ft.dataLen, name, ft.indexOffset); err != nil {
		return nil, err
	}
	sr := &Reader{r: file, name: name, size: size, opts: opts, h: h, ft: ft, l: l, index: index}
	sr.verified = make([]atomic.Uint64, (l.blocks+63)/64)
	return sr, nil
}

// Close closes the file opened by Open or OpenFS. It does nothing for a Reader made by NewReader.
func (r *Reader) Close() error {
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	return err
}

// IndexSHA256 returns the lower-case hex SHA-256 of the shard's index section (the bytes
// checked at open), what a manifest's index_sha256 pins (FORMAT.md, "Dataset").
func (r *Reader) IndexSHA256() string {
	sum := sha256.Sum256(r.index)
	return hex.EncodeToString(sum[:])
}

// Name returns the name the Reader was opened with.
func (r *Reader) Name() string { return r.name }

// Size returns the file size.
func (r *Reader) Size() int64 { return r.size }

// Len returns the number of records.
func (r *Reader) Len() int { return int(r.ft.n) }

// Spec returns the sample spec of the records.
func (r *Reader) Spec() SampleSpec { return r.h.spec }

// LabelSpec returns the label spec.
func (r *Reader) LabelSpec() LabelSpec { return r.h.label }

// ShardIndex returns the shard's position in its dataset, from its meta JSON; -1 for a
// version-4 shard, whose meta names its chunk and piece instead (Cut).
func (r *Reader) ShardIndex() int { return r.h.index }

// Cut returns the chunk and piece a version-4 shard's meta names (FORMAT.md, Meta); nil for a
// shard of an earlier version.
func (r *Reader) Cut() *ShardCut {
	if r.h.cut == nil {
		return nil
	}
	c := *r.h.cut
	return &c
}

// Meta returns the decoded meta JSON (numbers as json.Number). The caller must not modify it.
func (r *Reader) Meta() map[string]any { return r.h.fields }

// MetaJSON returns the meta JSON bytes as stored. The caller must not modify them.
func (r *Reader) MetaJSON() []byte { return r.h.meta }

// RecordSize returns the size of every record, or 0 for a shard of variable-size records.
func (r *Reader) RecordSize() int64 { return r.ft.recordSize }

// VarSize reports whether the records have different sizes.
func (r *Reader) VarSize() bool { return r.l.varSize }

// HasRecordMeta reports whether the shard carries per-record metadata.
func (r *Reader) HasRecordMeta() bool { return r.l.hasMeta }

// BlockRecords returns the number of records per checksum block.
func (r *Reader) BlockRecords() int64 { return r.ft.k }

// DataOffset returns the file offset of the data section.
func (r *Reader) DataOffset() int64 { return r.ft.dataOffset }

// DataSize returns the size of the data section without padding.
func (r *Reader) DataSize() int64 { return r.ft.dataLen }

func (r *Reader) checkIndex(i int) {
	if i < 0 || int64(i) >= r.ft.n {
		panic(fmt.Sprintf("shard: record %d out of range [0, %d) in %s", i, r.ft.n, r.name))
	}
}

func (r *Reader) checkRange(i, j int) {
	if i < 0 || j < i || int64(j) > r.ft.n {
		panic(fmt.Sprintf("shard: record range [%d, %d) out of range [0, %d) in %s", i, j, r.ft.n, r.name))
	}
}

// off returns the data-relative offset of record i, 0 ≤ i ≤ n.
func (r *Reader) off(i int64) int64 {
	if r.l.varSize {
		return int64(le.Uint64(r.index[r.l.offs+i*8:]))
	}
	return i * r.ft.recordSize
}

// DataRange returns the file offset and length of the bytes of records [i, j), one
// contiguous range.
func (r *Reader) DataRange(i, j int) (off, n int64) {
	r.checkRange(i, j)
	a, b := r.off(int64(i)), r.off(int64(j))
	return r.ft.dataOffset + a, b - a
}

// RecordLen returns the size of record i.
func (r *Reader) RecordLen(i int) int64 {
	r.checkIndex(i)
	return r.off(int64(i)+1) - r.off(int64(i))
}

// Label returns the label of record i.
func (r *Reader) Label(i int) int64 {
	r.checkIndex(i)
	return int64(le.Uint64(r.index[r.l.labels+int64(i)*8:]))
}

// Aux returns the aux label values of record i, one per column of LabelSpec().Aux.
func (r *Reader) Aux(i int) []int64 {
	r.checkIndex(i)
	out := make([]int64, r.l.naux)
	r.auxInto(i, out)
	return out
}

// RecordMeta returns the per-record metadata of record i, or nil when the shard has none.
// The returned slice aliases the Reader's index and must not be modified.
func (r *Reader) RecordMeta(i int) []byte {
	r.checkIndex(i)
	if !r.l.hasMeta {
		return nil
	}
	a := le.Uint64(r.index[r.l.metaOffs+int64(i)*8:])
	b := le.Uint64(r.index[r.l.metaOffs+int64(i+1)*8:])
	return r.index[r.l.blob+int64(a) : r.l.blob+int64(b) : r.l.blob+int64(b)]
}

// Record returns a new slice holding the bytes of record i.
func (r *Reader) Record(i int) ([]byte, error) {
	if i < 0 || int64(i) >= r.ft.n {
		return nil, fmt.Errorf("shard: %s: record %d out of range [0, %d)", r.name, i, r.ft.n)
	}
	buf := make([]byte, r.RecordLen(i))
	return r.ReadRecords(i, i+1, buf)
}

// ReadRecords reads records [i, j) into dst with one ReadAt (the records are one contiguous
// range) and returns the filled prefix of dst. dst must hold at least the range's length
// (DataRange); otherwise ReadRecords returns an error. Unless checksums are skipped, every
// checksum block the range touches is checked.
func (r *Reader) ReadRecords(i, j int, dst []byte) ([]byte, error) {
	if i < 0 || j < i || int64(j) > r.ft.n {
		return nil, fmt.Errorf("shard: %s: record range [%d, %d) out of range [0, %d)", r.name, i, j, r.ft.n)
	}
	off, n := r.DataRange(i, j)
	if int64(len(dst)) < n {
		return nil, fmt.Errorf("shard: %s: records [%d, %d) need %d bytes, buffer holds %d", r.name, i, j, n, len(dst))
	}
	dst = dst[:n]
	if err := readFull(r.r, dst, off, r.name); err != nil {
		return nil, err
	}
	if f, ok := r.file.(*osFile); ok {
		if err := r.unchanged(f.File); err != nil {
			return nil, err
		}
	}
	if !r.opts.SkipCRC {
		if err := r.verifyRange(int64(i), int64(j), dst); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// blockRange returns the records [a, b) of checksum block k.
func (r *Reader) blockRange(blk int64) (a, b int64) {
	a = blk * r.ft.k
	return a, min(a+r.ft.k, r.ft.n)
}

// blockCRC returns the stored CRC of checksum block blk.
func (r *Reader) blockCRC(blk int64) uint32 { return le.Uint32(r.index[r.l.crcs+blk*4:]) }

func (r *Reader) isVerified(blk int64) bool {
	return r.verified[blk/64].Load()&(1<<(blk%64)) != 0
}

func (r *Reader) setVerified(blk int64) { r.verified[blk/64].Or(1 << (blk % 64)) }

// verifyRange checks every block touched by records [i, j), whose bytes are data, that is not
// checked yet. The CRC always covers data itself: the parts of a block outside [i, j) are read
// from the file, so that the bytes a caller hands out are the bytes checked.
func (r *Reader) verifyRange(i, j int64, data []byte) error {
	if i == j {
		return nil
	}
	base := r.off(i)
	for blk := i / r.ft.k; blk <= (j-1)/r.ft.k; blk++ {
		if r.isVerified(blk) {
			continue
		}
		a, b := r.blockRange(blk)
		var got uint32
		var err error
		switch {
		case a >= i && b <= j: // the whole block is in data
			got = crc32c(data[r.off(a)-base : r.off(b)-base])
		case a >= i: // data holds the block's head: read only its tail (sequential loaders)
			if got, err = r.crcOfFrom(crc32c(data[r.off(a)-base:]), r.off(j), r.off(b)); err != nil {
				return err
			}
		case b <= j: // data holds the block's tail: read only its head
			if got, err = r.crcOf(r.off(a), r.off(i)); err != nil {
				return err
			}
			got = crc32cUpdate(got, data[:r.off(b)-base])
		default: // data lies inside the block: read its head and tail, check data itself
			if got, err = r.crcOf(r.off(a), r.off(i)); err != nil {
				return err
			}
			if got, err = r.crcOfFrom(crc32cUpdate(got, data[:r.off(j)-base]), r.off(j), r.off(b)); err != nil {
				return err
			}
		}
		if want := r.blockCRC(blk); got != want {
			return corruptRecords(r.name, a, b-a, r.ft.dataOffset+r.off(a), ErrChecksum, "block %d CRC %#08x, stored %#08x", blk, got, want)
		}
		r.setVerified(blk)
	}
	return nil
}

// crcOf reads the data bytes [a, b) (data-relative) in chunks and returns their CRC-32C.
func (r *Reader) crcOf(a, b int64) (uint32, error) { return r.crcOfFrom(0, a, b) }

// crcOfFrom is crcOf continuing the CRC-32C crc of the bytes before a.
func (r *Reader) crcOfFrom(crc uint32, a, b int64) (uint32, error) {
	if a >= b {
		return crc, nil
	}
	buf := make([]byte, min(b-a, 1<<20))
	for a < b {
		p := buf[:min(b-a, int64(len(buf)))]
		if err := readFull(r.r, p, r.ft.dataOffset+a, r.name); err != nil {
			return 0, err
		}
		crc = crc32cUpdate(crc, p)
		a += int64(len(p))
	}
	return crc, nil
}

// VerifyRecords checks the checksum blocks touched by records [i, j) without returning their
// bytes, reading each unchecked block once.
func (r *Reader) VerifyRecords(i, j int) error {
	r.checkRange(i, j)
	if i == j {
		return nil
	}
	for blk := int64(i) / r.ft.k; blk <= int64(j-1)/r.ft.k; blk++ {
		if r.isVerified(blk) {
			continue
		}
		a, b := r.blockRange(blk)
		got, err := r.crcOf(r.off(a), r.off(b))
		if err != nil {
			return err
		}
		if want := r.blockCRC(blk); got != want {
			return corruptRecords(r.name, a, b-a, r.ft.dataOffset+r.off(a), ErrChecksum, "block %d CRC %#08x, stored %#08x", blk, got, want)
		}
		r.setVerified(blk)
	}
	return nil
}

// mulDiv returns floor(a*b/c) without overflow, for 0 ≤ a, 0 ≤ b, a < c or b ≤ c.
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// auxInto stores the aux values of record i in dst, which has one element per aux column.
func (r *Reader) auxInto(i int, dst []int64) {
	base := r.l.aux + int64(i)*r.l.naux*8
	for c := range dst {
		dst[c] = int64(le.Uint64(r.index[base+int64(c)*8:]))
	}
}

// Version returns the shard's format version (1, 2, or 3 for a shard with fields).
func (r *Reader) Version() int { return int(r.h.version) }

// HasShapes reports whether the shard stores each record's shape (FlagShapes, versions 2 and 3).
func (r *Reader) HasShapes() bool { return r.l.shapes }

// ErrShapeUnknown is returned by RecordShape for a record of a version-1 variable-size shard
// whose sample shape has more than one -1 dimension: its shape was not stored.
var ErrShapeUnknown = errors.New("shape unknown: version-1 shard")

// RecordShape returns the shape of record i: the sample shape, with every -1 replaced by the
// record's own value. A version-1 variable-size shard stores no shapes: with one -1 dimension
// the value is derived from the record's size; with more, the error wraps ErrShapeUnknown.
func (r *Reader) RecordShape(i int) ([]int, error) {
	if i < 0 || int64(i) >= r.ft.n {
		return nil, fmt.Errorf("shard: %s: record %d out of range [0, %d)", r.name, i, r.ft.n)
	}
	out := slices.Clone(r.h.spec.Shape)
	vals := make([]int, r.l.v)
	if err := r.shapeDims(i, vals); err != nil {
		return nil, err
	}
	j := 0
	for k, d := range out {
		if d < 0 {
			out[k] = vals[j]
			j++
		}
	}
	return out, nil
}

// shapeDims stores in dst (one element per -1 dimension of the sample shape) record i's values
// of those dimensions.
func (r *Reader) shapeDims(i int, dst []int) error {
	spec := r.h.spec
	switch {
	case len(dst) == 0:
		return nil
	case r.l.shapes:
		base := r.l.shapesOff + int64(i)*r.l.v*4
		for j := range dst {
			dst[j] = int(le.Uint32(r.index[base+int64(j)*4:]))
		}
		return nil
	case len(dst) == 1:
		rest := int64(spec.DType.Size())
		for _, d := range spec.Shape {
			if d > 0 {
				rest *= int64(d)
			}
		}
		n := r.RecordLen(i)
		if n%rest != 0 { // an empty record of a version-1 shard has shape value 0
			return corruptRecords(r.name, int64(i), 1, r.ft.dataOffset+r.off(int64(i)), ErrFormat, "record %d: %d bytes is not a whole number of %d-byte rows of shape %v", i, n, rest, spec.Shape)
		}
		dst[0] = int(n / rest)
		return nil
	}
	return fmt.Errorf("%s: record %d: %w (sample shape %v)", r.name, i, ErrShapeUnknown, spec.Shape)
}
