package shard

import (
	"fmt"
	"slices"
)

// Index returns the shard's index bytes (FORMAT.md, Index), as read and checked when the shard
// was opened. The slice is the Reader's own and must not be modified.
func (r *Reader) Index() []byte { return r.index }

// IndexOffset returns the file offset of the index.
func (r *Reader) IndexOffset() int64 { return r.ft.indexOffset }

// AppendFrom appends records [i, j) of src to w, in order: the same bytes as calling AppendShape
// for each of them with its data, shape, label, aux values and metadata from src, but with one
// write of the data and the index entries copied from src's index as runs. data holds the
// records' bytes (len(data) must be the length src.DataRange(i, j) gives); AppendFrom does not
// read src's file and does not check data against src's block checksums (a caller that copies
// a shard checks the file itself, by its SHA-256). src's sample spec and label spec must be w's;
// a src whose index is laid out differently (a version-1 variable-size shard into a version-2
// writer, metadata into a writer without it) is appended record by record through AppendShape.
func (w *Writer) AppendFrom(src *Reader, i, j int, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errClosed
	}
	if i < 0 || j < i || int64(j) > src.ft.n {
		return fmt.Errorf("shard: %s: record range [%d, %d) out of range [0, %d)", src.name, i, j, src.ft.n)
	}
	if _, n := src.DataRange(i, j); n != int64(len(data)) {
		return fmt.Errorf("shard: %s: records [%d, %d) hold %d bytes, %d given", src.name, i, j, n, len(data))
	}
	sl := src.l
	if src.h.spec.DType != w.spec.DType || src.h.spec.Layout != w.spec.Layout || !slices.Equal(src.h.spec.Shape, w.spec.Shape) || sl.naux != int64(w.naux) {
		return fmt.Errorf("shard: %s: sample or label spec differs from the shard being written", src.name)
	}
	if !FieldsEqual(src.h.schema, w.fields) {
		return fmt.Errorf("shard: %s: fields %s differ from the shard being written's %s", src.name, FieldsString(src.h.schema), FieldsString(w.fields))
	}
	if sl.varSize != (w.flags&FlagVarSize != 0) || sl.shapes != (w.flags&FlagShapes != 0) || sl.hasMeta != (w.flags&FlagMeta != 0) {
		return w.appendEach(src, i, j, data)
	}
	n := int64(j - i)
	if w.n+n > MaxRecords {
		return fmt.Errorf("shard: more than %d records in one shard", int64(MaxRecords))
	}
	a, b := int64(i), int64(j)
	if sl.varSize {
		for r := a; r < b; r++ {
			if n := src.off(r+1) - src.off(r); n > MaxRecordSize {
				return fmt.Errorf("shard: record %d: %d bytes, more than the limit %d", w.n+r-a, n, MaxRecordSize)
			}
		}
	}
	if err := w.writeRun(data); err != nil {
		w.err = fmt.Errorf("write shard record %d: %w", w.n, err)
		return w.err
	}
	idx := src.index
	if w.flags&FlagVarSize == 0 {
		// Fixed-size records: the block checksums run over the data in k-record steps.
		for p := data; len(p) > 0; {
			m := min(w.k-w.blockN, int64(len(p))/w.recordSize)
			w.blockCRC = crc32cUpdate(w.blockCRC, p[:m*w.recordSize])
			p = p[m*w.recordSize:]
			if w.blockN += m; w.blockN == w.k {
				w.crcs = le.AppendUint32(w.crcs, w.blockCRC)
				w.blockCRC, w.blockN = 0, 0
			}
		}
	} else {
		base := src.off(a)
		for r := a; r < b; r++ {
			lo, hi := src.off(r)-base, src.off(r+1)-base
			w.blockCRC = crc32cUpdate(w.blockCRC, data[lo:hi])
			if w.blockN++; w.blockN == w.k {
				w.crcs = le.AppendUint32(w.crcs, w.blockCRC)
				w.blockCRC, w.blockN = 0, 0
			}
			w.offs = le.AppendUint64(w.offs, uint64(w.dataLen+hi))
		}
		if w.flags&FlagShapes != 0 {
			w.shapes = append(w.shapes, idx[sl.shapesOff+a*sl.v*4:sl.shapesOff+b*sl.v*4]...)
		}
		w.flens = append(w.flens, idx[sl.fieldLens+a*sl.nf*4:sl.fieldLens+b*sl.nf*4]...)
	}
	w.n += n
	w.dataLen += int64(len(data))
	w.labels = append(w.labels, idx[sl.labels+a*8:sl.labels+b*8]...)
	w.aux = append(w.aux, idx[sl.aux+a*sl.naux*8:sl.aux+b*sl.naux*8]...)
	if w.flags&FlagMeta != 0 {
		m0 := le.Uint64(idx[sl.metaOffs+a*8:])
		base := uint64(len(w.blob)) - m0
		for r := a + 1; r <= b; r++ {
			w.metaOffs = le.AppendUint64(w.metaOffs, base+le.Uint64(idx[sl.metaOffs+r*8:]))
		}
		w.blob = append(w.blob, idx[sl.blob+int64(m0):sl.blob+int64(le.Uint64(idx[sl.metaOffs+b*8:]))]...)
	}
	return nil
}

// appendEach is AppendFrom through AppendShape, one record at a time.
func (w *Writer) appendEach(src *Reader, i, j int, data []byte) error {
	base, _ := src.DataRange(i, j)
	for r := i; r < j; r++ {
		off, n := src.DataRange(r, r+1)
		var shape []int
		if src.l.varSize {
			s, err := src.RecordShape(r)
			if err != nil {
				return err
			}
			shape = s
		}
		var meta []byte
		if src.l.hasMeta {
			meta = src.RecordMeta(r)
		}
		sample, fields, err := src.SplitFields(r, data[off-base:off-base+n])
		if err != nil {
			return err
		}
		if err := w.AppendFields(sample, shape, src.Label(r), src.Aux(r), meta, fields); err != nil {
			return err
		}
	}
	return nil
}

// directRun is the size from which AppendFrom writes a run's bytes straight to the underlying
// writer (after what the buffer holds) rather than copying them into the buffer first.
const directRun = 32 << 10

// writeRun writes the bytes of a run of records.
func (w *Writer) writeRun(data []byte) error {
	if len(data) < directRun {
		_, err := w.bw.Write(data)
		return err
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	_, err := w.out.Write(data)
	return err
}
