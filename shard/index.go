package shard

import (
	"fmt"
	"slices"
)

// indexLayout locates the parts of a shard's index (FORMAT.md, Index). Offsets are relative to
// index_offset; a part that is absent has length zero.
type indexLayout struct {
	n, naux, blocks int64
	k               int64 // block_records
	varSize         bool
	hasMeta         bool
	shapes          bool  // FlagShapes: the shapes part is present
	nf              int64 // fields of the schema (FlagFields): the fieldlens part holds nf values a record

	// v is the number of -1 dimensions of the sample shape; dims are the shape's dimensions
	// and elem the dtype size (set by setShape, used to check and expand record shapes).
	v    int64
	dims []int
	elem int64

	// The schema of a version-3 shard (set by setFields): its fields, the sample layout, the
	// position of each field's rows_of field (-1 for none) and whether any field is an image.
	schema []Field
	layout string
	rowsOf []int
	images bool

	offs      int64 // offsets table, (n+1)*8 bytes when varSize
	shapesOff int64 // shapes part, n*v*4 bytes when shapes
	labels    int64 // n*8 bytes
	aux       int64 // n*naux*8 bytes
	fieldLens int64 // n*nf*4 bytes when nf > 0
	metaOffs  int64 // (n+1)*8 bytes when hasMeta
	blob      int64 // metablob, blobLen bytes
	blobLen   int64
	crcs      int64 // blocks*4 bytes
	size      int64 // index_len
}

// numBlocks returns ceil(n/k), the number of checksum blocks of n records.
func numBlocks(n, k int64) int64 {
	if n == 0 {
		return 0
	}
	return (n-1)/k + 1
}

// newIndexLayout computes the layout for n records with naux aux columns, checksum blocks of k
// records and a metablob of blobLen bytes. All inputs must already be within FORMAT.md's limits,
// so no product overflows.
func newIndexLayout(n, naux, k int64, flags uint16, blobLen int64) indexLayout {
	return newIndexLayoutV(n, naux, k, flags, blobLen, 0)
}

// newIndexLayoutV is newIndexLayout for a sample shape with v dimensions of -1 (the shapes
// part, when FlagShapes is set, holds v values per record).
func newIndexLayoutV(n, naux, k int64, flags uint16, blobLen, v int64) indexLayout {
	return newIndexLayoutF(n, naux, k, flags, blobLen, v, 0)
}

// newIndexLayoutF is newIndexLayoutV for a version-3 shard with nf fields (FlagFields; the
// fieldlens part holds nf values per record). nf is ignored without FlagFields.
func newIndexLayoutF(n, naux, k int64, flags uint16, blobLen, v, nf int64) indexLayout {
	l := indexLayout{n: n, naux: naux, blocks: numBlocks(n, k), k: k, varSize: flags&FlagVarSize != 0, hasMeta: flags&FlagMeta != 0, shapes: flags&FlagShapes != 0}
	if flags&FlagFields == 0 {
		nf = 0
	}
	l.nf = nf
	var p int64
	l.offs = p
	if l.varSize {
		p += (n + 1) * 8
	}
	l.shapesOff = p
	if l.shapes {
		l.v = v
		p += n * v * 4
	}
	l.labels = p
	p += n * 8
	l.aux = p
	p += n * naux * 8
	l.fieldLens = p
	p += n * nf * 4
	l.metaOffs = p
	if l.hasMeta {
		p += (n + 1) * 8
	}
	l.blob = p
	if l.hasMeta {
		l.blobLen = blobLen
		p += blobLen
	}
	l.crcs = p
	p += l.blocks * 4
	l.size = p
	return l
}

// fileSize returns the shard file size for an index of l.size bytes at indexOffset.
func fileSize(indexOffset, indexLen int64) int64 {
	return alignUp(indexOffset + indexLen + FooterSize)
}

// varDims returns the number of -1 dimensions of shape.
func varDims(shape []int) int64 {
	var v int64
	for _, d := range shape {
		if d < 0 {
			v++
		}
	}
	return v
}

// setShape records the sample spec in l (sizes of the shapes part, dimensions and element
// size used to check and expand record shapes). It recomputes the layout when FlagShapes is
// set, so it must be called before l's offsets are used.
func (l *indexLayout) setShape(spec SampleSpec, flags uint16) {
	v := varDims(spec.Shape)
	if flags&FlagShapes != 0 && l.v != v {
		*l = newIndexLayoutF(l.n, l.naux, l.k, flags, l.blobLen, v, l.nf)
	}
	l.v, l.dims, l.elem = v, spec.Shape, int64(spec.DType.Size())
}

// setFields records a version-3 shard's schema in l, for checkFieldLens.
func (l *indexLayout) setFields(schema []Field, layout string) {
	l.schema, l.layout, l.rowsOf = schema, layout, rowsOfIndex(schema)
	l.images = slices.ContainsFunc(schema, func(f Field) bool { return f.Kind == KindImage })
}

// checkShape checks record i's stored shape values (each ≥ 1) against its size in bytes.
func (l *indexLayout) checkShape(index []byte, i int64, size uint64) error {
	vals := index[l.shapesOff+i*l.v*4 : l.shapesOff+(i+1)*l.v*4]
	prod := uint64(l.elem)
	j := 0
	for _, d := range l.dims {
		if d < 0 {
			d = int(le.Uint32(vals[j*4:]))
			if d < 1 {
				return fmt.Errorf("shape value %d is %d, want at least 1", j, d)
			}
			j++
		}
		// prod stays ≤ MaxRecordSize before each step, so it cannot overflow.
		prod *= uint64(d)
		if prod > MaxRecordSize {
			return fmt.Errorf("shape %v is more than the record size limit %d", l.expand(index, i), int64(MaxRecordSize))
		}
	}
	if prod != size {
		return fmt.Errorf("shape %v holds %d bytes, the record has %d", l.expand(index, i), prod, size)
	}
	return nil
}

// expand returns record i's shape: the sample shape with each -1 replaced by the record's
// stored value. l.shapes must be set.
func (l *indexLayout) expand(index []byte, i int64) []int {
	out := make([]int, len(l.dims))
	j := int64(0)
	for k, d := range l.dims {
		if d < 0 {
			d = int(le.Uint32(index[l.shapesOff+(i*l.v+j)*4:]))
			j++
		}
		out[k] = d
	}
	return out
}
