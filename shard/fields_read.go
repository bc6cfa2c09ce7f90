package shard

import (
	"fmt"
	"slices"
)

// Fields returns the shard's schema (FORMAT.md "Fields"), nil for a shard below version 3.
func (r *Reader) Fields() []Field { return slices.Clone(r.h.schema) }

// fieldLen returns the length of field k of record i (the shard has fields).
func (r *Reader) fieldLen(i, k int) int64 {
	return int64(le.Uint32(r.index[r.l.fieldLens+(int64(i)*r.l.nf+int64(k))*4:]))
}

// SampleLen returns the size of record i's sample value: the record's size less its field
// values (the whole record in a shard without fields).
func (r *Reader) SampleLen(i int) int64 {
	n := r.RecordLen(i)
	for k := range r.l.nf {
		n -= r.fieldLen(i, int(k))
	}
	return n
}

// SplitFields splits rec, the bytes of record i, into its sample value and its field values in
// schema order (FORMAT.md "Fields"). The slices alias rec. In a shard without fields, sample is
// rec and fields is nil. The lengths were checked when the shard was opened; the values'
// contents (UTF-8 text, valid JSON) are not checked here (see FieldText, Verify).
func (r *Reader) SplitFields(i int, rec []byte) (sample []byte, fields [][]byte, err error) {
	if i < 0 || int64(i) >= r.ft.n {
		return nil, nil, fmt.Errorf("shard: %s: record %d out of range [0, %d)", r.name, i, r.ft.n)
	}
	if want := r.RecordLen(i); int64(len(rec)) != want {
		return nil, nil, fmt.Errorf("shard: %s: record %d has %d bytes, %d given", r.name, i, want, len(rec))
	}
	if r.l.nf == 0 {
		return rec, nil, nil
	}
	end := int64(len(rec))
	fields = make([][]byte, r.l.nf)
	for k := int(r.l.nf) - 1; k >= 0; k-- {
		start := end - r.fieldLen(i, k)
		fields[k] = rec[start:end:end]
		end = start
	}
	return rec[:end:end], fields, nil
}

// RecordFields reads record i (checking its checksum block unless the Reader skips CRCs) and
// splits it into its sample value and its field values (SplitFields).
func (r *Reader) RecordFields(i int) (sample []byte, fields [][]byte, err error) {
	rec, err := r.Record(i)
	if err != nil {
		return nil, nil, err
	}
	return r.SplitFields(i, rec)
}

// Field returns the field named name of the schema and its position, or false.
func (r *Reader) Field(name string) (Field, int, bool) {
	k := slices.IndexFunc(r.h.schema, func(f Field) bool { return f.Name == name })
	if k < 0 {
		return Field{}, -1, false
	}
	return r.h.schema[k], k, true
}

// CheckFieldValues checks the contents of every record's text and json values: text is UTF-8,
// json one valid JSON value (FORMAT.md "Fields"; the lengths were checked at open). It reads
// only the bytes of those values, from the first text or json field to the last, one read a
// record, and does not check the block CRCs (a verifier checks them as it scans the file).
// Each bad value is passed to report, as a *CorruptionError naming the record and the field;
// an I/O error ends the check and is returned.
func (r *Reader) CheckFieldValues(report func(*CorruptionError)) error {
	first, last := -1, -1
	for k, f := range r.h.schema {
		if f.Kind == KindText || f.Kind == KindJSON {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	if first < 0 {
		return nil
	}
	var buf []byte
	for i := range r.Len() {
		// The span of fields first..last is at the record's end less the later fields.
		end := r.off(int64(i) + 1)
		for k := last + 1; k < int(r.l.nf); k++ {
			end -= r.fieldLen(i, k)
		}
		start := end
		for k := first; k <= last; k++ {
			start -= r.fieldLen(i, k)
		}
		buf = slices.Grow(buf[:0], int(end-start))[:end-start]
		if err := readFull(r.r, buf, r.ft.dataOffset+start, r.name); err != nil {
			return err
		}
		at := start
		for k := first; k <= last; k++ {
			f, n := r.h.schema[k], r.fieldLen(i, k)
			if err := f.checkValue(buf[at-start : at-start+n]); err != nil {
				report(corruptRecords(r.name, int64(i), 1, r.ft.dataOffset+at, ErrFormat, "record %d: field %q: %v", i, f.Name, err))
			}
			at += n
		}
	}
	return nil
}
