package shard

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// writeBufferSize is the size of the writer's data buffer: records reach the file in writes of
// about this size (larger records are written straight through).
const writeBufferSize = 4 << 20

// WriterOptions configures a Writer. The zero value is not usable: Sample must be valid.
type WriterOptions struct {
	// Sample is the record spec. A spec with a -1 dimension gives variable-size records.
	Sample SampleSpec
	// Label is the label spec; an empty DType means "int64", the only label type of format v1.
	Label LabelSpec
	// Meta holds extra keys for the header's meta JSON (packer writes "dataset"). It must not
	// use the keys the format defines: sample, label, shard, block_records. Values are
	// re-encoded canonically (sorted keys, no whitespace), so equal values give equal bytes.
	Meta map[string]any
	// ShardIndex is the shard's position in its dataset, stored as meta "shard": {"index": k}.
	ShardIndex int
	// Cut, when set, makes a version-4 shard (FORMAT.md, Versioning): its meta "shard" is
	// {"chunk": c, "piece": p}, which does not depend on the shard's position in its dataset,
	// in place of ShardIndex. Otherwise the shard is what it would be without Cut.
	Cut *ShardCut
	// HasMeta makes the shard carry per-record metadata (FlagMeta); Append's meta argument is
	// stored only when it is set.
	HasMeta bool
	// NoShapes writes a variable-size shard as format version 1, without per-record shapes
	// (for readers that know only version 1). By default a variable-size shard is version 2
	// with FlagShapes and every record's shape in its index. Fixed-size shards are always
	// version 1.
	NoShapes bool
	// Unbuffered says that the io.Writer buffers what it is given itself (packer's shard
	// output copies every write into buffers it hashes and writes on other goroutines): the
	// Writer then writes to it directly, without a buffer of its own, which saves a copy of
	// every record. Without it, writes go through a buffer of about 4 MiB.
	Unbuffered bool
	// BlockTarget is the byte size the writer aims for per checksum block of fixed-size
	// records: k = max(1, floor(BlockTarget / record size)) records a block. 0 means the
	// package's BlockTarget (1 MiB). Smaller blocks cost a random reader with the check on
	// less read amplification (docs/decisions.md); readers accept any k.
	BlockTarget int64
	// Fields is the sample schema beyond the sample and labels (FORMAT.md "Fields"). A
	// non-empty schema makes a version-3 shard; records are then added with AppendFields.
	Fields []Field
}

// flushWriter is what a Writer writes through: a bufio.Writer, or the caller's writer itself
// (WriterOptions.Unbuffered).
type flushWriter interface {
	io.Writer
	Flush() error
}

// direct is a flushWriter with nothing to flush.
type direct struct{ io.Writer }

func (direct) Flush() error { return nil }

// Writer writes one shard. It streams record bytes to the underlying writer as they come,
// through a buffer of about 4 MiB (unless WriterOptions.Unbuffered), and keeps only the index (labels, aux values, offsets,
// per-record metadata and block checksums) in memory.
//
// The call order is: NewWriter Append* Close. The first error the Writer meets is kept and
// returned by every later call. A Writer is not safe for concurrent use.
type Writer struct {
	bw         flushWriter
	out        io.Writer // what bw writes to (AppendFrom writes large runs straight to it)
	flags      uint16
	recordSize int64 // 0 for variable-size records
	sampleSize int64 // the size of every record's sample value, 0 when the sample shape has a -1
	k          int64 // block_records
	naux       int
	fields     []Field // the schema (WriterOptions.Fields)
	rowsOf     []int   // rowsOfIndex(fields)
	spec       SampleSpec
	v          int // -1 dimensions of the sample shape
	dataOffset int64
	header     []byte

	n        int64
	dataLen  int64
	blockCRC uint32
	blockN   int64

	offs     []byte // encoded index parts
	shapes   []byte
	labels   []byte
	aux      []byte
	flens    []byte // the fieldlens part (version 3)
	metaOffs []byte
	blob     []byte
	crcs     []byte

	size     int64    // file size, set by Close
	indexSum [32]byte // SHA-256 of the index section, set by Close
	err      error
	closed   bool
}

// errClosed is returned by a Writer used after Close.
var errClosed = errors.New("shard: writer is closed")

// NewWriter starts a shard on w and writes its header. w receives the file's bytes in order,
// from offset 0, so any io.Writer works (no seeking). Close writes the index and footer; it
// does not close w.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	if err := opts.Sample.Validate(); err != nil {
		return nil, err
	}
	if opts.Label.DType != "" && opts.Label.DType != "int64" {
		return nil, fmt.Errorf("shard: label dtype %q: format v1 stores int64 labels only", opts.Label.DType)
	}
	if len(opts.Label.Aux) > MaxAux {
		return nil, fmt.Errorf("shard: %d aux label columns, more than the limit %d", len(opts.Label.Aux), MaxAux)
	}
	if opts.ShardIndex < 0 {
		return nil, fmt.Errorf("shard: negative shard index %d", opts.ShardIndex)
	}
	if c := opts.Cut; c != nil && (c.Chunk < 0 || c.Piece < 0) {
		return nil, fmt.Errorf("shard: negative shard chunk %d or piece %d", c.Chunk, c.Piece)
	}
	if len(opts.Fields) > 0 {
		if err := ValidateFields(opts.Fields, opts.Sample); err != nil {
			return nil, err
		}
		if opts.NoShapes {
			return nil, errors.New("shard: a shard with fields is format version 3, which always stores shapes (NoShapes is for version 1)")
		}
	}
	sw := &Writer{naux: len(opts.Label.Aux), fields: slices.Clone(opts.Fields), rowsOf: rowsOfIndex(opts.Fields), spec: opts.Sample, v: int(varDims(opts.Sample.Shape))}
	version := uint16(1)
	if opts.Sample.Fixed() {
		sw.sampleSize = opts.Sample.Size()
	}
	if len(opts.Fields) > 0 {
		// Version 3: the records' sizes vary with their fields' values.
		sw.flags |= FlagVarSize | FlagFields
		sw.k = 1
		sw.offs = le.AppendUint64(nil, 0)
		if !opts.Sample.Fixed() {
			sw.flags |= FlagShapes
		}
		version = 3
	} else if opts.Sample.Fixed() {
		sw.recordSize = opts.Sample.Size()
		target := opts.BlockTarget
		if target <= 0 {
			target = BlockTarget
		}
		sw.k = max(1, target/sw.recordSize)
	} else {
		sw.flags |= FlagVarSize
		sw.k = 1
		sw.offs = le.AppendUint64(nil, 0)
		if !opts.NoShapes {
			sw.flags |= FlagShapes
			version = 2
		}
	}
	if opts.HasMeta {
		sw.flags |= FlagMeta
		sw.metaOffs = le.AppendUint64(nil, 0)
	}
	if opts.Cut != nil {
		version = CutVersion
	}
	meta, err := headerMeta(opts, sw.k)
	if err != nil {
		return nil, err
	}
	if len(meta) > MaxMetaLen {
		return nil, fmt.Errorf("shard: meta JSON is %d bytes, more than the limit %d", len(meta), MaxMetaLen)
	}
	hdr := make([]byte, HeaderFixed, HeaderFixed+len(meta))
	copy(hdr[hdrMagicOff:], HeaderMagic)
	le.PutUint16(hdr[hdrVersionOff:], version)
	le.PutUint16(hdr[hdrFlagsOff:], sw.flags)
	le.PutUint32(hdr[hdrMetaLenOff:], uint32(len(meta)))
	le.PutUint32(hdr[hdrCRCOff:], crc32cUpdate(crc32c(hdr[:hdrCRCOff]), meta))
	hdr = append(hdr, meta...)
	sw.dataOffset = alignUp(int64(len(hdr)))
	sw.header = hdr

	sw.bw, sw.out = direct{w}, w
	if !opts.Unbuffered {
		sw.bw = bufio.NewWriterSize(w, writeBufferSize)
	}
	if _, err := sw.bw.Write(hdr); err != nil {
		return nil, fmt.Errorf("write shard header: %w", err)
	}
	if err := sw.pad(sw.dataOffset - int64(len(hdr))); err != nil {
		return nil, fmt.Errorf("write shard header: %w", err)
	}
	return sw, nil
}

// reservedMetaKeys are the meta JSON keys FORMAT.md defines.
var reservedMetaKeys = []string{"sample", "label", "shard", "block_records", "fields"}

// headerMeta builds the canonical meta JSON: sorted keys, no insignificant whitespace.
func headerMeta(opts WriterOptions, k int64) ([]byte, error) {
	m := map[string]any{}
	if len(opts.Meta) > 0 {
		// Round-trip the caller's values through JSON so structs become maps with sorted keys.
		raw, err := json.Marshal(opts.Meta)
		if err != nil {
			return nil, fmt.Errorf("shard: encode meta: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("shard: encode meta: %w", err)
		}
		for _, key := range reservedMetaKeys {
			if _, ok := m[key]; ok {
				return nil, fmt.Errorf("shard: meta key %q is reserved by the format", key)
			}
		}
	}
	aux := opts.Label.Aux
	if aux == nil {
		aux = []string{}
	}
	m["sample"] = map[string]any{"shape": opts.Sample.Shape, "dtype": opts.Sample.DType, "layout": opts.Sample.Layout}
	m["label"] = map[string]any{"dtype": "int64", "aux": aux}
	m["shard"] = map[string]any{"index": opts.ShardIndex}
	if c := opts.Cut; c != nil {
		m["shard"] = map[string]any{"chunk": c.Chunk, "piece": c.Piece}
	}
	m["block_records"] = k
	if len(opts.Fields) > 0 {
		m["fields"] = fieldsMeta(opts.Fields)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("shard: encode meta: %w", err)
	}
	return out, nil
}

// fieldsMeta is the meta JSON's "fields" value: one object per field, without the members a
// field leaves empty (json.Marshal sorts the keys of the maps).
func fieldsMeta(fields []Field) []map[string]any {
	out := make([]map[string]any, len(fields))
	for k, f := range fields {
		m := map[string]any{"name": f.Name, "kind": f.Kind, "encoding": f.Encoding}
		if f.DType != "" {
			m["dtype"] = f.DType
		}
		if f.Shape != nil {
			m["shape"] = f.Shape
		}
		if f.Geometry != "" {
			m["geometry"] = f.Geometry
		}
		if f.RowsOf != "" {
			m["rows_of"] = f.RowsOf
		}
		out[k] = m
	}
	return out
}

// Append adds one record with its label, its aux values (exactly one per aux column of the
// label spec) and, when the shard has per-record metadata, its metadata bytes (nil for none).
// Argument errors leave the Writer usable; write errors are kept and returned by every later call.
//
// In a shard with per-record shapes (FlagShapes) whose sample shape has more than one -1
// dimension, the record's shape cannot be derived from its size: use AppendShape. With one
// -1 dimension, Append derives it (the size must be a multiple of the other dimensions).
func (w *Writer) Append(data []byte, label int64, aux []int64, meta []byte) error {
	return w.AppendShape(data, nil, label, aux, meta)
}

// AppendShape is Append with the record's shape: the sample shape with every -1 replaced by
// this record's value (each ≥ 1), whose product times the dtype size must be len(data). A nil
// shape asks the Writer to derive it (see Append).
func (w *Writer) AppendShape(data []byte, shape []int, label int64, aux []int64, meta []byte) error {
	if len(w.fields) > 0 && w.err == nil && !w.closed {
		return fmt.Errorf("shard: record %d: the schema has %d fields: use AppendFields", w.n, len(w.fields))
	}
	return w.appendRecord(data, shape, label, aux, meta, nil)
}

// AppendFields adds one record with its field values (fields[k] is the raw value of
// WriterOptions.Fields[k], FORMAT.md "Fields"); see AppendShape for the other arguments. Each
// value is checked against its field: the length against the kind and shape (an image field
// has the record's height and width), text as UTF-8, json as one valid JSON value, and a field
// with rows_of has as many rows as its boxes field. Errors name the record and the field and
// leave the Writer usable.
func (w *Writer) AppendFields(data []byte, shape []int, label int64, aux []int64, meta []byte, fields [][]byte) error {
	if len(fields) != len(w.fields) {
		return fmt.Errorf("shard: record %d: %d field values for a schema of %d fields", w.n, len(fields), len(w.fields))
	}
	if len(fields) == 0 {
		return w.AppendShape(data, shape, label, aux, meta)
	}
	return w.appendRecord(data, shape, label, aux, meta, fields)
}

// checkFields checks a record's field values (see AppendFields); vals are the values of the
// sample shape's -1 dimensions, and the record's total size is returned.
func (w *Writer) checkFields(data []byte, vals []int, fields [][]byte) (int64, error) {
	total := int64(len(data))
	rec := w.spec.Shape
	if len(vals) > 0 {
		rec = expandShape(w.spec.Shape, vals)
	}
	for k, f := range w.fields {
		b := fields[k]
		if total += int64(len(b)); total > MaxRecordSize {
			return 0, fmt.Errorf("shard: record %d: more than the record size limit %d with field %q", w.n, MaxRecordSize, f.Name)
		}
		if err := CheckFieldValue(f, w.spec, rec, b); err != nil {
			return 0, fmt.Errorf("shard: record %d: field %q: %w", w.n, f.Name, err)
		}
		if j := w.rowsOf[k]; j >= 0 {
			if a, b := f.Rows(b), w.fields[j].Rows(fields[j]); a != b {
				return 0, fmt.Errorf("shard: record %d: field %q has %d rows, its rows_of field %q has %d", w.n, f.Name, a, w.fields[j].Name, b)
			}
		}
	}
	return total, nil
}

// expandShape returns the sample shape with its -1 dimensions replaced by vals, in order.
func expandShape(shape, vals []int) []int {
	out := slices.Clone(shape)
	j := 0
	for i, d := range out {
		if d < 0 {
			out[i] = vals[j]
			j++
		}
	}
	return out
}

// appendRecord adds one record: data is its sample value, fields its field values (nil in a
// shard without fields).
func (w *Writer) appendRecord(data []byte, shape []int, label int64, aux []int64, meta []byte, fields [][]byte) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errClosed
	}
	if len(aux) != w.naux {
		return fmt.Errorf("shard: record %d: %d aux values, want %d", w.n, len(aux), w.naux)
	}
	if w.sampleSize > 0 {
		if int64(len(data)) != w.sampleSize {
			return fmt.Errorf("shard: record %d: %d bytes, want %d", w.n, len(data), w.sampleSize)
		}
	} else if len(data) > MaxRecordSize {
		return fmt.Errorf("shard: record %d: %d bytes, more than the limit %d", w.n, len(data), MaxRecordSize)
	}
	vals, err := w.recordShape(data, shape)
	if err != nil {
		return err
	}
	size := int64(len(data))
	if len(w.fields) > 0 {
		if size, err = w.checkFields(data, vals, fields); err != nil {
			return err
		}
	}
	if meta != nil && w.flags&FlagMeta == 0 {
		return fmt.Errorf("shard: record %d: per-record metadata given but WriterOptions.HasMeta is false", w.n)
	}
	if w.n >= MaxRecords {
		return fmt.Errorf("shard: more than %d records in one shard", int64(MaxRecords))
	}
	if _, err := w.bw.Write(data); err != nil {
		w.err = fmt.Errorf("write shard record %d: %w", w.n, err)
		return w.err
	}
	w.blockCRC = crc32cUpdate(w.blockCRC, data)
	for _, b := range fields {
		if _, err := w.bw.Write(b); err != nil {
			w.err = fmt.Errorf("write shard record %d: %w", w.n, err)
			return w.err
		}
		w.blockCRC = crc32cUpdate(w.blockCRC, b)
		w.flens = le.AppendUint32(w.flens, uint32(len(b)))
	}
	w.n++
	w.dataLen += size
	w.blockN++
	if w.blockN == w.k {
		w.crcs = le.AppendUint32(w.crcs, w.blockCRC)
		w.blockCRC, w.blockN = 0, 0
	}
	if w.flags&FlagVarSize != 0 {
		w.offs = le.AppendUint64(w.offs, uint64(w.dataLen))
	}
	if w.flags&FlagShapes != 0 {
		for _, d := range vals {
			w.shapes = le.AppendUint32(w.shapes, uint32(d))
		}
	}
	w.labels = le.AppendUint64(w.labels, uint64(label))
	for _, v := range aux {
		w.aux = le.AppendUint64(w.aux, uint64(v))
	}
	if w.flags&FlagMeta != 0 {
		w.blob = append(w.blob, meta...)
		w.metaOffs = le.AppendUint64(w.metaOffs, uint64(len(w.blob)))
	}
	return nil
}

// Len returns the number of records appended so far.
func (w *Writer) Len() int64 { return w.n }

// DataSize returns the size of the data section so far (the sum of the record sizes), so a
// caller can split shards by a byte budget before calling Append.
func (w *Writer) DataSize() int64 { return w.dataLen }

// Close writes the index, the footer and the padding, and flushes. It does not close the
// underlying writer. Calling Close again returns the same result.
func (w *Writer) Close() error {
	if w.closed || w.err != nil {
		return w.err
	}
	w.closed = true
	if w.blockN > 0 {
		w.crcs = le.AppendUint32(w.crcs, w.blockCRC)
		w.blockCRC, w.blockN = 0, 0
	}
	dataEnd := w.dataOffset + w.dataLen
	indexOffset := alignUp(dataEnd)
	l := newIndexLayoutF(w.n, int64(w.naux), w.k, w.flags, int64(len(w.blob)), int64(w.v), int64(len(w.fields)))
	crc := uint32(0)
	sum := sha256.New()
	write := func(p []byte) {
		if w.err == nil {
			crc = crc32cUpdate(crc, p)
			sum.Write(p)
			_, w.err = w.bw.Write(p)
		}
	}
	if w.err = w.pad(indexOffset - dataEnd); w.err == nil {
		write(w.offs)
		write(w.shapes)
		write(w.labels)
		write(w.aux)
		write(w.flens)
		write(w.metaOffs)
		write(w.blob)
		write(w.crcs)
	}
	if w.err != nil {
		w.err = fmt.Errorf("write shard index: %w", w.err)
		return w.err
	}
	sum.Sum(w.indexSum[:0])
	size := fileSize(indexOffset, l.size)
	if err := w.pad(size - FooterSize - indexOffset - l.size); err != nil {
		w.err = fmt.Errorf("write shard index: %w", err)
		return w.err
	}
	var ft [FooterSize]byte
	le.PutUint64(ft[ftRecordCountOff:], uint64(w.n))
	le.PutUint64(ft[ftRecordSizeOff:], uint64(w.recordSize))
	le.PutUint64(ft[ftDataOffsetOff:], uint64(w.dataOffset))
	le.PutUint64(ft[ftDataLenOff:], uint64(w.dataLen))
	le.PutUint64(ft[ftIndexOffsetOff:], uint64(indexOffset))
	le.PutUint64(ft[ftIndexLenOff:], uint64(l.size))
	le.PutUint32(ft[ftBlockRecordsOff:], uint32(w.k))
	le.PutUint32(ft[ftIndexCRCOff:], crc)
	le.PutUint32(ft[ftFooterCRCOff:], crc32c(ft[:ftFooterCRCOff]))
	copy(ft[ftMagicOff:], FooterMagic)
	if _, err := w.bw.Write(ft[:]); err != nil {
		w.err = fmt.Errorf("write shard footer: %w", err)
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("write shard: %w", err)
		return w.err
	}
	w.size = size
	w.offs, w.shapes, w.labels, w.aux, w.flens, w.metaOffs, w.blob, w.crcs = nil, nil, nil, nil, nil, nil, nil, nil
	return nil
}

// Size returns the size of the finished file; it is valid after a successful Close.
func (w *Writer) Size() int64 { return w.size }

// IndexSHA256 returns the lower-case hex SHA-256 of the shard's index section, the manifest's
// index_sha256 (FORMAT.md, "Dataset"); it is valid after a successful Close.
func (w *Writer) IndexSHA256() string { return hex.EncodeToString(w.indexSum[:]) }

var zeros [Align]byte

// pad writes n zero bytes.
func (w *Writer) pad(n int64) error {
	for n > 0 {
		c := min(n, int64(len(zeros)))
		if _, err := w.bw.Write(zeros[:c]); err != nil {
			return err
		}
		n -= c
	}
	return nil
}

// recordShape checks a record's shape against the sample spec and its size and returns the
// values of its -1 dimensions. A nil shape is derived from the size when the sample shape has
// at most one -1 dimension; in a shard without per-record shapes it is not needed otherwise.
func (w *Writer) recordShape(data []byte, shape []int) ([]int, error) {
	elem := int64(w.spec.DType.Size())
	if shape == nil {
		if w.flags&FlagShapes == 0 || w.v == 0 {
			return nil, nil
		}
		if w.v > 1 {
			return nil, fmt.Errorf("shard: record %d: sample shape %v has %d variable dimensions: give the record's shape (AppendShape)", w.n, w.spec.Shape, w.v)
		}
		rest := elem
		for _, d := range w.spec.Shape {
			if d > 0 {
				rest *= int64(d)
			}
		}
		if n := int64(len(data)); n == 0 || n%rest != 0 {
			return nil, fmt.Errorf("shard: record %d: %d bytes is not a whole number ≥ 1 of %d-byte rows of shape %v", w.n, n, rest, w.spec.Shape)
		}
		return []int{int(int64(len(data)) / rest)}, nil
	}
	if len(shape) != len(w.spec.Shape) {
		return nil, fmt.Errorf("shard: record %d: shape %v does not match the sample shape %v", w.n, shape, w.spec.Shape)
	}
	vals := make([]int, 0, w.v)
	prod := elem
	for i, d := range shape {
		if want := w.spec.Shape[i]; d < 1 || (want > 0 && d != want) || d > MaxRecordSize {
			return nil, fmt.Errorf("shard: record %d: shape %v does not match the sample shape %v", w.n, shape, w.spec.Shape)
		} else if want < 0 {
			vals = append(vals, d)
		}
		prod *= int64(d)
		if prod > MaxRecordSize {
			return nil, fmt.Errorf("shard: record %d: shape %v is more than the record size limit %d", w.n, shape, MaxRecordSize)
		}
	}
	if prod != int64(len(data)) {
		return nil, fmt.Errorf("shard: record %d: shape %v holds %d bytes, the record has %d", w.n, shape, prod, len(data))
	}
	return vals, nil
}
