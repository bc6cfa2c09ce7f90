package parquet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"
)

// MaxPageSize bounds one page of a column chunk, compressed and decompressed: the limit the
// WebDataset and TFRecord sources put on a member or record. parquet-go allocates a page's
// buffers from the sizes its header claims and decompresses whatever its data expands to, so
// every page is checked (checkChunk) before parquet-go reads it.
const MaxPageSize = 256 << 20

// maxPageValues bounds the values of one page: parquet-go sizes the buffers a page decodes into
// from the count its header claims (up to 8 bytes a value), and a run-length encoded page can
// claim billions in a few bytes.
const maxPageValues = MaxPageSize / 8

// errPageLimit is what a page's check wraps when the page is over a limit.
var errPageLimit = errors.New("over the limit")

// checkChunk reads the page headers of a column chunk (meta, in the file r of size bytes) and
// refuses the chunk when a page would make parquet-go allocate more than MaxPageSize: a header
// claiming more (data, uncompressed size or values), or data that decompresses to more,
// whatever its header says. Decompressed data is counted, never held (LZ4 blocks, which can
// only be decoded whole, are measured by their sequences first). codec is the codec parquet-go
// decompresses the chunk with: the first row group's, for every row group.
func checkChunk(r io.ReaderAt, size int64, meta *format.ColumnMetaData, codec format.CompressionCodec) error {
	start := meta.DataPageOffset
	if meta.DictionaryPageOffset != 0 {
		start = meta.DictionaryPageOffset
	}
	n := meta.TotalCompressedSize
	if start < 4 || n < 0 || start > size || n > size-start {
		return fmt.Errorf("column chunk of %d bytes at offset %d lies outside the file of %d bytes", n, start, size)
	}
	if meta.Codec != codec {
		return fmt.Errorf("column chunk compressed with %s where the file's first one is %s", meta.Codec, codec)
	}
	cr := &countReader{r: io.NewSectionReader(r, start, n)}
	br := bufio.NewReaderSize(cr, 64<<10)
	dec := thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(br))
	var c checker
	defer c.close()
	for page := 0; ; page++ {
		if _, err := br.Peek(1); err == io.EOF {
			return nil
		}
		var h format.PageHeader
		if err := dec.Decode(&h); err != nil {
			return fmt.Errorf("page %d of the column chunk at offset %d: header: %w", page, start, err)
		}
		left := n - (cr.n - int64(br.Buffered()))
		if err := c.page(&h, br, left, codec); err != nil {
			return fmt.Errorf("page %d of the column chunk at offset %d: %w", page, start, err)
		}
	}
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// checker checks pages, keeping its decompressors from page to page.
type checker struct {
	zstd *zstd.Decoder
	gzip *gzip.Reader
}

func (c *checker) close() {
	if c.zstd != nil {
		c.zstd.Close()
	}
}

// page checks one page whose header is h and whose data follows in r, left bytes remaining in
// the chunk, and reads past its data.
func (c *checker) page(h *format.PageHeader, r io.Reader, left int64, codec format.CompressionCodec) error {
	csize, usize := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
	switch {
	case csize < 0 || usize < 0:
		return fmt.Errorf("header claims %d bytes of data, %d uncompressed", csize, usize)
	case csize > left:
		return fmt.Errorf("header claims %d bytes of data, but the column chunk has %d left", csize, left)
	case csize > MaxPageSize || usize > MaxPageSize:
		return fmt.Errorf("%w: header claims %d bytes of data, %d uncompressed; the limit is %d", errPageLimit, csize, usize, MaxPageSize)
	}
	var values, levels int64
	compressed := codec != format.Uncompressed
	switch {
	case h.DataPageHeader != nil:
		values = int64(h.DataPageHeader.NumValues)
	case h.DataPageHeaderV2 != nil:
		v2 := h.DataPageHeaderV2
		values = int64(v2.NumValues)
		levels = int64(v2.DefinitionLevelsByteLength) + int64(v2.RepetitionLevelsByteLength)
		if v2.DefinitionLevelsByteLength < 0 || v2.RepetitionLevelsByteLength < 0 || levels > csize {
			return fmt.Errorf("header claims %d+%d bytes of levels in %d bytes of data", v2.DefinitionLevelsByteLength, v2.RepetitionLevelsByteLength, csize)
		}
		if v2.IsCompressed != nil && !*v2.IsCompressed {
			compressed = false
		}
	case h.DictionaryPageHeader != nil:
		values = int64(h.DictionaryPageHeader.NumValues)
	}
	if values < 0 || values > maxPageValues {
		return fmt.Errorf("%w: header claims %d values; the limit is %d", errPageLimit, values, maxPageValues)
	}
	data := &io.LimitedReader{R: r, N: csize}
	if _, err := io.CopyN(io.Discard, data, levels); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if compressed {
		got, err := c.decompressed(codec, data, csize-levels)
		if err != nil {
			return err
		}
		if got > MaxPageSize-levels {
			return fmt.Errorf("%w: data decompresses to more than %d bytes (its header claims %d)", errPageLimit, MaxPageSize, usize)
		}
	}
	// The rest of the data (all of it when uncompressed) is skipped.
	if _, err := io.Copy(io.Discard, data); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if data.N > 0 {
		return fmt.Errorf("data: %w", io.ErrUnexpectedEOF)
	}
	return nil
}

// errOver stops a decompression at MaxPageSize+1 bytes.
var errOver = errors.New("over")

// limitWriter discards what is written, counting it, and fails past max bytes.
type limitWriter struct{ n, max int64 }

func (w *limitWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	if w.n > w.max {
		return 0, errOver
	}
	return len(p), nil
}

// decompressed returns how many bytes the csize bytes of r decompress to with codec, counting
// at most MaxPageSize+1 of them.
func (c *checker) decompressed(codec format.CompressionCodec, r io.Reader, csize int64) (int64, error) {
	lw := &limitWriter{max: MaxPageSize}
	var zr io.Reader
	switch codec {
	case format.Snappy:
		// A raw snappy block starts with its decoded length, from which the decoder sizes its
		// output, and fails unless the data decodes to exactly that.
		var head [binary.MaxVarintLen64]byte
		k, _ := io.ReadFull(r, head[:min(int64(len(head)), csize)])
		v, m := binary.Uvarint(head[:k])
		if m <= 0 {
			return 0, fmt.Errorf("data: not a snappy block")
		}
		return int64(min(v, MaxPageSize+1)), nil
	case format.Lz4Raw:
		if csize > MaxPageSize {
			return 0, fmt.Errorf("%w: %d bytes of LZ4 data", errPageLimit, csize)
		}
		blk := make([]byte, csize)
		if _, err := io.ReadFull(r, blk); err != nil {
			return 0, fmt.Errorf("data: %w", err)
		}
		n, err := lz4Size(blk)
		if err != nil || n > MaxPageSize {
			return n, err
		}
		// parquet-go retries a block that fails to decode with an ever larger buffer: only a
		// block that decodes into its measured size is passed on.
		if k, err := lz4.UncompressBlock(blk, make([]byte, n)); err != nil || int64(k) != n {
			return 0, fmt.Errorf("data: damaged LZ4 block (%d bytes decoded of %d): %v", k, n, err)
		}
		return n, nil
	case format.Gzip:
		if c.gzip == nil {
			g, err := gzip.NewReader(r)
			if err != nil {
				return 0, fmt.Errorf("data: gzip: %w", err)
			}
			c.gzip = g
		} else if err := c.gzip.Reset(r); err != nil {
			return 0, fmt.Errorf("data: gzip: %w", err)
		}
		zr = c.gzip
	case format.Zstd:
		if c.zstd == nil {
			d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(MaxPageSize+1))
			if err != nil {
				return 0, err
			}
			c.zstd = d
		}
		if err := c.zstd.Reset(r); err != nil {
			return 0, fmt.Errorf("data: zstd: %w", err)
		}
		zr = c.zstd
	case format.Brotli:
		zr = brotli.NewReader(r)
	default:
		return 0, fmt.Errorf("compression codec %s is not supported", codec)
	}
	if _, err := io.Copy(lw, zr); err != nil && err != errOver {
		return 0, fmt.Errorf("data: %s: %w", codec, err)
	}
	return lw.n, nil
}

// lz4Size returns the size an LZ4 block decodes to, walking its sequences without decoding
// them; it fails on a block that is cut short or whose match reaches before its start.
func lz4Size(b []byte) (int64, error) {
	var out int64
	bad := func(what string) (int64, error) {
		return 0, fmt.Errorf("data: damaged LZ4 block: %s at byte %d of %d", what, len(b), out)
	}
	length := func(n int64) (int64, bool) {
		if n != 15 {
			return n, true
		}
		for len(b) > 0 {
			x := b[0]
			b = b[1:]
			n += int64(x)
			if n > MaxPageSize+255 {
				return n, true
			}
			if x != 255 {
				return n, true
			}
		}
		return 0, false
	}
	for len(b) > 0 {
		tok := b[0]
		b = b[1:]
		lit, ok := length(int64(tok >> 4))
		if !ok || lit > int64(len(b)) {
			return bad("literals cut short")
		}
		b = b[lit:]
		out += lit
		if len(b) == 0 {
			return out, nil // the last sequence has literals only
		}
		if len(b) < 2 {
			return bad("offset cut short")
		}
		off := int64(binary.LittleEndian.Uint16(b))
		b = b[2:]
		if off == 0 || off > out {
			return bad("match offset out of range")
		}
		ml, ok := length(int64(tok & 15))
		if !ok {
			return bad("match length cut short")
		}
		out += ml + 4
		if out > MaxPageSize {
			return out, nil
		}
	}
	return out, nil
}
