package shard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// headerInfo is a parsed shard header.
type headerInfo struct {
	version uint16
	layout  uint16 // the version whose layout rules the shard follows (layoutVersion)
	flags   uint16
	metaLen int64
	meta    []byte // the meta JSON bytes
	spec    SampleSpec
	label   LabelSpec
	index   int       // meta shard.index (versions 1 to 3); -1 in a version-4 shard
	cut     *ShardCut // meta shard.chunk and shard.piece (version 4); nil below
	k       int64     // block_records from the meta JSON
	fields  map[string]any
	schema  []Field // meta "fields" (version 3), nil below
}

// dataOffset is where the header says the data section starts.
func (h *headerInfo) dataOffset() int64 { return alignUp(HeaderFixed + h.metaLen) }

// footerInfo is a parsed shard footer.
type footerInfo struct {
	n, recordSize, dataOffset, dataLen, indexOffset, indexLen, k int64
	indexCRC                                                     uint32
}

// readFull reads len(p) bytes at off. A short read is reported as truncation of the file, any
// other failure as an I/O error naming the file.
func readFull(r io.ReaderAt, p []byte, off int64, name string) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt(name, off+int64(n), ErrTruncated, "read %d bytes, want %d", n, len(p))
	}
	return fmt.Errorf("read %s at offset %d: %w", name, off, err)
}

// layoutVersion is the version whose rules of flags and index layout a shard of version v with
// flags follows: its own below version 4; in a version-4 shard, which differs from the versions
// before it only in its meta "shard" (FORMAT.md, Versioning), 3 with FlagFields, else 2 with
// FlagShapes, else 1.
func layoutVersion(v, flags uint16) uint16 {
	switch {
	case v < 4:
		return v
	case flags&FlagFields != 0:
		return 3
	case flags&FlagShapes != 0:
		return 2
	}
	return 1
}

// parseHeaderFixed checks the fixed header fields, in the order FORMAT.md requires: magic,
// version, then everything else.
func parseHeaderFixed(b []byte, name string) (version, flags uint16, metaLen int64, err error) {
	if string(b[hdrMagicOff:hdrMagicOff+len(HeaderMagic)]) != HeaderMagic {
		return 0, 0, 0, corrupt(name, hdrMagicOff, ErrMagic, "header magic %q", b[hdrMagicOff:hdrMagicOff+len(HeaderMagic)])
	}
	version = le.Uint16(b[hdrVersionOff:])
	if version < MinVersion || version > Version {
		return 0, 0, 0, corrupt(name, hdrVersionOff, ErrVersion, "version %d (this reader knows versions %d to %d)", version, MinVersion, Version)
	}
	known := uint16(knownFlags)
	switch version {
	case 1:
		known = knownFlagsV1
	case 2:
		known = knownFlagsV2
	}
	flags = le.Uint16(b[hdrFlagsOff:])
	if flags&^known != 0 {
		return 0, 0, 0, corrupt(name, hdrFlagsOff, ErrFormat, "unknown flags %#04x for version %d", flags&^known, version)
	}
	if flags&FlagShapes != 0 && flags&FlagVarSize == 0 {
		return 0, 0, 0, corrupt(name, hdrFlagsOff, ErrFormat, "shapes flag without the variable-size flag")
	}
	if version == 3 && flags&(FlagFields|FlagVarSize) != FlagFields|FlagVarSize {
		return 0, 0, 0, corrupt(name, hdrFlagsOff, ErrFormat, "version %d shard without the fields and variable-size flags (flags %#04x)", version, flags)
	}
	if version >= 4 && flags&FlagFields != 0 && flags&FlagVarSize == 0 {
		return 0, 0, 0, corrupt(name, hdrFlagsOff, ErrFormat, "version %d shard with the fields flag without the variable-size flag (flags %#04x)", version, flags)
	}
	metaLen = int64(le.Uint32(b[hdrMetaLenOff:]))
	if metaLen > MaxMetaLen {
		return 0, 0, 0, corrupt(name, hdrMetaLenOff, ErrTooLarge, "meta length %d, limit %d", metaLen, MaxMetaLen)
	}
	return version, flags, metaLen, nil
}

// metaJSON holds the meta keys the format defines.
type metaJSON struct {
	Sample *SampleSpec `json:"sample"`
	Label  *LabelSpec  `json:"label"`
	Shard  *struct {
		Index *int   `json:"index"`
		Chunk *int64 `json:"chunk"`
		Piece *int64 `json:"piece"`
	} `json:"shard"`
	BlockRecords *int64          `json:"block_records"`
	Fields       json.RawMessage `json:"fields"`
}

// parseMeta decodes and checks the meta JSON.
func parseMeta(h *headerInfo, name string) error {
	bad := func(format string, args ...any) error {
		return corrupt(name, HeaderFixed, ErrFormat, "meta: "+format, args...)
	}
	var m metaJSON
	if err := json.Unmarshal(h.meta, &m); err != nil {
		return bad("%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(h.meta))
	dec.UseNumber()
	if err := dec.Decode(&h.fields); err != nil {
		return bad("%v", err)
	}
	if m.Sample == nil || m.Label == nil || m.Shard == nil || m.BlockRecords == nil {
		return bad("missing sample, label, shard or block_records")
	}
	h.index = -1
	if h.version >= CutVersion {
		// Version 4: the shard's chunk and piece, and nothing else (FORMAT.md, Meta).
		s := m.Shard
		if s.Index != nil || s.Chunk == nil || s.Piece == nil {
			return bad("version %d shard: shard must hold chunk and piece, not index", h.version)
		}
		if *s.Chunk < 0 || *s.Piece < 0 {
			return bad("negative shard chunk %d or piece %d", *s.Chunk, *s.Piece)
		}
		h.cut = &ShardCut{Chunk: *s.Chunk, Piece: *s.Piece}
	} else {
		if m.Shard.Index == nil {
			return bad("missing shard.index")
		}
		if *m.Shard.Index < 0 {
			return bad("negative shard index %d", *m.Shard.Index)
		}
		h.index = *m.Shard.Index
	}
	if err := m.Sample.Validate(); err != nil {
		return bad("%v", err)
	}
	if m.Label.DType != "int64" {
		return bad("label dtype %q, want int64", m.Label.DType)
	}
	if len(m.Label.Aux) > MaxAux {
		return corrupt(name, HeaderFixed, ErrTooLarge, "meta: %d aux columns, limit %d", len(m.Label.Aux), MaxAux)
	}
	if *m.BlockRecords < 1 || *m.BlockRecords > MaxRecords {
		return bad("block_records %d out of range", *m.BlockRecords)
	}
	if m.Label.Aux == nil {
		m.Label.Aux = []string{}
	}
	if h.layout >= 3 {
		// A version-1 or -2 shard may carry any key, "fields" included: it is not a schema.
		schema, err := parseFields(m.Fields, *m.Sample)
		if err != nil {
			return bad("%v", err)
		}
		h.schema = schema
	}
	h.spec, h.label, h.k = *m.Sample, *m.Label, *m.BlockRecords
	return nil
}

// parseFields decodes and checks a version-3 shard's meta "fields": a non-empty schema that
// ValidateFields accepts, with no member the format does not define.
func parseFields(raw json.RawMessage, spec SampleSpec) ([]Field, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("version 3 shard without fields")
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fmt.Errorf("fields: %v", err)
	}
	if len(elems) == 0 || len(elems) > MaxFields {
		return nil, fmt.Errorf("fields: %d fields, want 1 to %d", len(elems), MaxFields)
	}
	out := make([]Field, len(elems))
	for k, e := range elems {
		dec := json.NewDecoder(bytes.NewReader(e))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out[k]); err != nil {
			return nil, fmt.Errorf("fields: field %d: %v", k, err)
		}
	}
	if err := ValidateFields(out, spec); err != nil {
		return nil, err
	}
	return out, nil
}

// readHeader reads and checks the header: magic, version, flags, meta length, CRC, reserved
// bytes and meta JSON.
func readHeader(r io.ReaderAt, size int64, name string) (*headerInfo, error) {
	var fixed [HeaderFixed]byte
	if size < HeaderFixed {
		n := min(size, int64(len(HeaderMagic)))
		if err := readFull(r, fixed[:n], 0, name); err != nil {
			return nil, err
		}
		if string(fixed[:n]) != HeaderMagic[:n] || n == 0 {
			return nil, corrupt(name, 0, ErrMagic, "file of %d bytes", size)
		}
		return nil, corrupt(name, size, ErrTruncated, "file of %d bytes", size)
	}
	if err := readFull(r, fixed[:], 0, name); err != nil {
		return nil, err
	}
	version, flags, metaLen, err := parseHeaderFixed(fixed[:], name)
	if err != nil {
		return nil, err
	}
	if HeaderFixed+metaLen > size {
		return nil, corrupt(name, size, ErrTruncated, "meta JSON of %d bytes ends past the end of the file", metaLen)
	}
	h := &headerInfo{version: version, layout: layoutVersion(version, flags), flags: flags, metaLen: metaLen, meta: make([]byte, metaLen)}
	if err := readFull(r, h.meta, HeaderFixed, name); err != nil {
		return nil, err
	}
	if got, want := crc32cUpdate(crc32c(fixed[:hdrCRCOff]), h.meta), le.Uint32(fixed[hdrCRCOff:]); got != want {
		return h, corrupt(name, 0, ErrChecksum, "header CRC %#08x, stored %#08x", got, want)
	}
	for _, c := range fixed[hdrCRCOff+4:] {
		if c != 0 {
			return h, corrupt(name, hdrCRCOff+4, ErrPadding, "reserved header bytes are not zero")
		}
	}
	if err := parseMeta(h, name); err != nil {
		return h, err
	}
	return h, nil
}

// readFooter reads the footer and checks its magic, its CRC and its internal consistency
// (limits, offsets, file size). It does not compare it with the header.
func readFooter(r io.ReaderAt, size int64, name string) (*footerInfo, error) {
	if size < Align+FooterSize || size%Align != 0 {
		return nil, corrupt(name, size, ErrTruncated, "file size %d is not a positive multiple of %d past the header", size, Align)
	}
	var b [FooterSize]byte
	off := size - FooterSize
	if err := readFull(r, b[:], off, name); err != nil {
		return nil, err
	}
	if string(b[ftMagicOff:]) != FooterMagic {
		return nil, corrupt(name, off+ftMagicOff, ErrMagic, "footer magic %q", b[ftMagicOff:])
	}
	if got, want := crc32c(b[:ftFooterCRCOff]), le.Uint32(b[ftFooterCRCOff:]); got != want {
		return nil, corrupt(name, off, ErrChecksum, "footer CRC %#08x, stored %#08x", got, want)
	}
	u := func(o int) uint64 { return le.Uint64(b[o:]) }
	bad := func(e error, format string, args ...any) error {
		return corrupt(name, off, e, "footer: "+format, args...)
	}
	if u(ftRecordCountOff) > MaxRecords {
		return nil, bad(ErrTooLarge, "record count %d, limit %d", u(ftRecordCountOff), int64(MaxRecords))
	}
	if u(ftRecordSizeOff) > MaxRecordSize {
		return nil, bad(ErrTooLarge, "record size %d, limit %d", u(ftRecordSizeOff), MaxRecordSize)
	}
	for _, o := range []int{ftDataOffsetOff, ftDataLenOff, ftIndexOffsetOff, ftIndexLenOff} {
		if u(o) > uint64(size) {
			return nil, bad(ErrTruncated, "field at footer offset %d is %d, past the file size %d", o, u(o), size)
		}
	}
	f := &footerInfo{
		n: int64(u(ftRecordCountOff)), recordSize: int64(u(ftRecordSizeOff)),
		dataOffset: int64(u(ftDataOffsetOff)), dataLen: int64(u(ftDataLenOff)),
		indexOffset: int64(u(ftIndexOffsetOff)), indexLen: int64(u(ftIndexLenOff)),
		k: int64(le.Uint32(b[ftBlockRecordsOff:])), indexCRC: le.Uint32(b[ftIndexCRCOff:]),
	}
	switch {
	case f.k < 1:
		return nil, bad(ErrFormat, "block_records is 0")
	case f.dataOffset < Align || f.dataOffset%Align != 0:
		return nil, bad(ErrFormat, "data offset %d is not a positive multiple of %d", f.dataOffset, Align)
	case f.recordSize > 0 && f.dataLen != f.n*f.recordSize:
		return nil, bad(ErrFormat, "data length %d is not %d records of %d bytes", f.dataLen, f.n, f.recordSize)
	case f.indexOffset != alignUp(f.dataOffset+f.dataLen):
		return nil, bad(ErrFormat, "index offset %d, want %d", f.indexOffset, alignUp(f.dataOffset+f.dataLen))
	}
	if want := fileSize(f.indexOffset, f.indexLen); size != want {
		e := ErrFormat
		if size < want {
			e = ErrTruncated
		}
		return nil, bad(e, "file size %d, the footer implies %d", size, want)
	}
	return f, nil
}

// checkHeaderFooter cross-checks a valid header and a valid footer and returns the index layout
// without the metablob length (the caller fills it from the index when FlagMeta is set).
func checkHeaderFooter(h *headerInfo, f *footerInfo, name string, size int64) (indexLayout, error) {
	off := size - FooterSize
	bad := func(format string, args ...any) error { return corrupt(name, off, ErrFormat, format, args...) }
	if f.dataOffset != h.dataOffset() {
		return indexLayout{}, bad("data offset %d, the header implies %d", f.dataOffset, h.dataOffset())
	}
	if f.k != h.k {
		return indexLayout{}, bad("block_records %d, the header says %d", f.k, h.k)
	}
	if h.layout == 2 && h.flags&FlagVarSize != 0 && h.flags&FlagShapes == 0 {
		return indexLayout{}, corrupt(name, hdrFlagsOff, ErrFormat, "version %d variable-size shard without the shapes flag", h.version)
	}
	if h.layout >= 3 && (h.flags&FlagShapes != 0) == h.spec.Fixed() {
		return indexLayout{}, corrupt(name, hdrFlagsOff, ErrFormat, "version %d shard: shapes flag %v with sample shape %v", h.version, h.flags&FlagShapes != 0, h.spec.Shape)
	}
	if h.flags&FlagVarSize != 0 {
		// A version-3 shard's records vary in size with their fields, whatever the sample shape.
		if (h.spec.Fixed() && h.layout < 3) || f.recordSize != 0 {
			return indexLayout{}, bad("variable-size flag with record size %d and sample shape %v", f.recordSize, h.spec.Shape)
		}
	} else if !h.spec.Fixed() || f.recordSize != h.spec.Size() {
		return indexLayout{}, bad("record size %d, sample spec %v %s", f.recordSize, h.spec.Shape, h.spec.DType)
	}
	nf := int64(len(h.schema))
	l := newIndexLayoutF(f.n, int64(len(h.label.Aux)), f.k, h.flags, 0, 0, nf)
	l.setShape(h.spec, h.flags)
	if h.flags&FlagMeta != 0 {
		if f.indexLen < l.size {
			return indexLayout{}, bad("index length %d, want at least %d", f.indexLen, l.size)
		}
		l = newIndexLayoutF(f.n, int64(len(h.label.Aux)), f.k, h.flags, f.indexLen-l.size, 0, nf)
		l.setShape(h.spec, h.flags)
	}
	l.setFields(h.schema, h.spec.Layout)
	if f.indexLen != l.size {
		return indexLayout{}, bad("index length %d, want %d", f.indexLen, l.size)
	}
	return l, nil
}

// checkIndex checks the offsets tables of an index whose CRC matched.
func checkIndex(index []byte, l indexLayout, dataLen int64, name string, indexOffset int64) error {
	if l.varSize {
		prev := uint64(0)
		for i := int64(0); i <= l.n; i++ {
			o := le.Uint64(index[l.offs+i*8:])
			if (i == 0 && o != 0) || o < prev || o-prev > MaxRecordSize || (i == l.n && o != uint64(dataLen)) {
				first := max(i-1, 0)
				return corruptRecords(name, first, 1, indexOffset+l.offs+i*8, ErrFormat, "offsets table entry %d is %d (previous %d, data length %d)", i, o, prev, dataLen)
			}
			prev = o
		}
	}
	if l.hasMeta {
		prev := uint64(0)
		for i := int64(0); i <= l.n; i++ {
			o := le.Uint64(index[l.metaOffs+i*8:])
			if (i == 0 && o != 0) || o < prev || (i == l.n && o != uint64(l.blobLen)) {
				first := max(i-1, 0)
				return corruptRecords(name, first, 1, indexOffset+l.metaOffs+i*8, ErrFormat, "metadata offsets entry %d is %d (previous %d, blob length %d)", i, o, prev, l.blobLen)
			}
			prev = o
		}
	}
	return checkShapes(index, l, name, indexOffset)
}

// checkShapes checks the shapes part (FlagShapes) of an index whose offsets table is valid:
// every value ≥ 1 and every record's shape consistent with its size.
func checkShapes(index []byte, l indexLayout, name string, indexOffset int64) error {
	if l.nf > 0 {
		return checkFieldLens(index, l, name, indexOffset)
	}
	if !l.shapes {
		return nil
	}
	for i := int64(0); i < l.n; i++ {
		size := le.Uint64(index[l.offs+(i+1)*8:]) - le.Uint64(index[l.offs+i*8:])
		if err := l.checkShape(index, i, size); err != nil {
			return corruptRecords(name, i, 1, indexOffset+l.shapesOff+i*l.v*4, ErrFormat, "record %d: %v", i, err)
		}
	}
	return nil
}

// checkFieldLens checks the fieldlens part (FlagFields) of an index whose offsets table is
// valid, with the shapes part: for every record, the field lengths sum to at most the record's
// size, the rest (the sample value) is the size of the record's shape, each length fits its
// field's kind and shape, and a field with rows_of has as many rows as its boxes field.
func checkFieldLens(index []byte, l indexLayout, name string, indexOffset int64) error {
	fixed := int64(-1) // the sample value's size when the sample shape has no -1
	if !l.shapes {
		fixed = l.elem
		for _, d := range l.dims {
			fixed *= int64(d)
		}
	}
	lens := make([]int64, l.nf)
	for i := int64(0); i < l.n; i++ {
		size := int64(le.Uint64(index[l.offs+(i+1)*8:]) - le.Uint64(index[l.offs+i*8:]))
		at := indexOffset + l.fieldLens + i*l.nf*4
		var sum int64
		for k := range lens {
			lens[k] = int64(le.Uint32(index[l.fieldLens+(i*l.nf+int64(k))*4:]))
			sum += lens[k]
		}
		if sum > size {
			return corruptRecords(name, i, 1, at, ErrFormat, "record %d: field lengths sum to %d bytes, the record has %d", i, sum, size)
		}
		sample := size - sum
		var err error
		rec := l.dims
		switch {
		case l.shapes:
			if err = l.checkShape(index, i, uint64(sample)); err == nil && l.images {
				rec = l.expand(index, i)
			}
		case sample != fixed:
			err = fmt.Errorf("the sample value has %d bytes, its shape %v has %d", sample, l.dims, fixed)
		}
		if err != nil {
			return corruptRecords(name, i, 1, at, ErrFormat, "record %d: %v", i, err)
		}
		h, w := sampleHW(l.layout, rec)
		for k, f := range l.schema {
			if err := f.checkLen(lens[k], h, w); err != nil {
				return corruptRecords(name, i, 1, at, ErrFormat, "record %d: field %q: %v", i, f.Name, err)
			}
		}
		for k, j := range l.rowsOf {
			if j < 0 {
				continue
			}
			f, g := l.schema[k], l.schema[j]
			if a, b := lens[k]/f.rowBytes(), lens[j]/g.rowBytes(); a != b {
				return corruptRecords(name, i, 1, at, ErrFormat, "record %d: field %q has %d rows, its rows_of field %q has %d", i, f.Name, a, g.Name, b)
			}
		}
	}
	return nil
}
