package shard

// indexLayout locates the parts of a shard's index (FORMAT.md, Index). Offsets are relative to
// index_offset; a part that is absent has length zero.
type indexLayout struct {
	n, naux, blocks int64
	varSize         bool
	hasMeta         bool

	offs     int64 // offsets table, (n+1)*8 bytes when varSize
	labels   int64 // n*8 bytes
	aux      int64 // n*naux*8 bytes
	metaOffs int64 // (n+1)*8 bytes when hasMeta
	blob     int64 // metablob, blobLen bytes
	blobLen  int64
	crcs     int64 // blocks*4 bytes
	size     int64 // index_len
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
	l := indexLayout{n: n, naux: naux, blocks: numBlocks(n, k), varSize: flags&FlagVarSize != 0, hasMeta: flags&FlagMeta != 0}
	var p int64
	l.offs = p
	if l.varSize {
		p += (n + 1) * 8
	}
	l.labels = p
	p += n * 8
	l.aux = p
	p += n * naux * 8
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
