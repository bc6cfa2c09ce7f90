package shard

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// DefaultScanChunk is the size of Scan's sequential reads.
const DefaultScanChunk = 8 << 20

// ScanOptions configures ScanWith. The zero value is ready to use.
type ScanOptions struct {
	// Progress, if set, is called from the scanning goroutine with the number of bytes checked
	// since its previous call; the calls add up to the file size when the scan completes.
	Progress func(bytes int64)
	// ChunkSize is the size of the sequential reads of the data section; 0 means
	// DefaultScanChunk.
	ChunkSize int
}

// Scan checks the whole structure of a shard of size bytes read from r and calls report for
// every fault it finds: header, footer and index CRCs, inconsistent fields and offsets, the
// CRC of every data block (naming the block's record range), non-zero padding and reserved
// bytes, and truncation. It goes on past faults wherever the rest of the file can still be
// interpreted: an intact footer and index are enough to check every data block, even when the
// header or other blocks are damaged. name is used in the reports.
//
// The data section is read sequentially in large chunks by a second goroutine, so checking
// overlaps reading. Scan returns nil when it has looked at everything it could, whatever it
// reported, and an error when reading failed for another reason than the file being short. If
// report is nil, Scan returns the first fault as its error instead.
func Scan(r io.ReaderAt, size int64, name string, report func(*CorruptionError)) error {
	return ScanWith(r, size, name, ScanOptions{}, report)
}

// ScanFile runs ScanWith on the file at path.
func ScanFile(path string, opts ScanOptions, report func(*CorruptionError)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("scan shard: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("scan shard: %w", err)
	}
	return ScanWith(f, st.Size(), path, opts, report)
}

// ScanWith is Scan with options.
func ScanWith(r io.ReaderAt, size int64, name string, opts ScanOptions, report func(*CorruptionError)) error {
	var first *CorruptionError
	if report == nil {
		report = func(e *CorruptionError) {
			if first == nil {
				first = e
			}
		}
	}
	s := &scanner{r: r, size: size, name: name, opts: opts, report: report}
	if err := s.run(); err != nil {
		return err
	}
	if first != nil {
		return first
	}
	return nil
}

type scanner struct {
	r      io.ReaderAt
	size   int64
	name   string
	opts   ScanOptions
	report func(*CorruptionError)
	done   int64 // bytes counted for progress
}

// fault reports err if it is a CorruptionError and returns it otherwise (an I/O error).
func (s *scanner) fault(err error) error {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		s.report(ce)
		return nil
	}
	return err
}

func (s *scanner) progress(n int64) {
	n = min(n, s.size-s.done)
	if s.opts.Progress != nil && n > 0 {
		s.opts.Progress(n)
		s.done += n
	}
}

func (s *scanner) run() error {
	defer func() { s.progress(s.size - s.done) }()
	h, herr := readHeader(s.r, s.size, s.name)
	if herr != nil {
		if err := s.fault(herr); err != nil {
			return err
		}
		if errors.Is(herr, ErrVersion) {
			return nil // an unknown version: nothing else can be trusted
		}
	}
	hdrOK := herr == nil
	if h != nil {
		s.progress(HeaderFixed + h.metaLen)
	}
	ft, ferr := readFooter(s.r, s.size, s.name)
	if ferr != nil {
		if err := s.fault(ferr); err != nil {
			return err
		}
		if herr == nil {
			// The header alone still locates its own padding.
			return s.checkZero(HeaderFixed+h.metaLen, min(h.dataOffset(), s.size))
		}
		return nil
	}
	var l indexLayout
	if hdrOK {
		var err error
		if l, err = checkHeaderFooter(h, ft, s.name, s.size); err != nil {
			if err := s.fault(err); err != nil {
				return err
			}
			hdrOK = false
		}
	}
	if herr == nil && HeaderFixed+h.metaLen <= ft.dataOffset {
		if err := s.checkZero(HeaderFixed+h.metaLen, ft.dataOffset); err != nil {
			return err
		}
	}

	index := make([]byte, ft.indexLen) // ≤ size, checked by readFooter
	if err := readFull(s.r, index, ft.indexOffset, s.name); err != nil {
		return s.fault(err)
	}
	s.progress(ft.indexLen)
	indexOK := crc32c(index) == ft.indexCRC
	if !indexOK {
		s.report(corrupt(s.name, ft.indexOffset, ErrChecksum, "index CRC %#08x, stored %#08x", crc32c(index), ft.indexCRC))
	}
	blocksOK := true
	if hdrOK {
		if err := checkIndex(index, l, ft.dataLen, s.name, ft.indexOffset); err != nil {
			if err := s.fault(err); err != nil {
				return err
			}
			blocksOK = !l.varSize
		}
	} else {
		// Without a trustworthy header, the footer alone locates the block CRCs (the last part
		// of the index) and, for variable-size records, the offsets table (the first part).
		var flags uint16
		if ft.recordSize == 0 && ft.n > 0 {
			flags = FlagVarSize
		}
		l = newIndexLayout(ft.n, 0, ft.k, flags, 0)
		l.crcs = ft.indexLen - l.blocks*4
		if l.crcs < l.labels {
			blocksOK = false // too short for even the offsets and the CRCs
		} else if l.varSize && checkIndex(index, indexLayout{n: ft.n, varSize: true}, ft.dataLen, s.name, ft.indexOffset) != nil {
			blocksOK = false
		}
		if !blocksOK {
			s.report(corrupt(s.name, ft.indexOffset, ErrFormat, "cannot locate the block checksums; data blocks not checked"))
		}
	}
	if err := s.checkData(ft, l, index, blocksOK); err != nil {
		return err
	}
	return s.checkZero(ft.indexOffset+ft.indexLen, s.size-FooterSize)
}

// checkZero reports a fault if the bytes [a, b) are not all zero.
func (s *scanner) checkZero(a, b int64) error {
	buf := make([]byte, min(max(b-a, 0), 1<<20))
	for off := a; off < b; {
		p := buf[:min(b-off, int64(len(buf)))]
		if err := readFull(s.r, p, off, s.name); err != nil {
			return s.fault(err)
		}
		for i, c := range p {
			if c != 0 {
				s.report(corrupt(s.name, off+int64(i), ErrPadding, "padding [%d, %d) is not zero", a, b))
				s.progress(b - off)
				return nil
			}
		}
		off += int64(len(p))
		s.progress(int64(len(p)))
	}
	return nil
}

// checkData reads [data_offset, index_offset) in large chunks, checks each block's CRC (when
// blocksOK) and that the padding after the data is zero.
func (s *scanner) checkData(ft *footerInfo, l indexLayout, index []byte, blocksOK bool) error {
	off := func(i int64) int64 {
		if l.varSize {
			return int64(le.Uint64(index[l.offs+i*8:]))
		}
		return i * ft.recordSize
	}
	var (
		blk, blkEnd int64
		crc         uint32
		padReported bool
		pos         int64 // data-relative position
	)
	nblocks := l.blocks
	if !blocksOK {
		nblocks = 0
	}
	if nblocks > 0 {
		blkEnd = off(min(ft.k, ft.n))
	}
	process := func(p []byte) {
		for len(p) > 0 || (blk < nblocks && blkEnd == pos) {
			if blk < nblocks && pos == blkEnd {
				a := blk * ft.k
				b := min(a+ft.k, ft.n)
				if want := le.Uint32(index[l.crcs+blk*4:]); crc != want {
					s.report(corruptRecords(s.name, a, b-a, ft.dataOffset+off(a), ErrChecksum, "block %d CRC %#08x, stored %#08x", blk, crc, want))
				}
				blk++
				crc = 0
				if blk < nblocks {
					blkEnd = off(min((blk+1)*ft.k, ft.n))
				}
				continue
			}
			if pos >= ft.dataLen {
				for i, c := range p {
					if c != 0 && !padReported {
						s.report(corrupt(s.name, ft.dataOffset+pos+int64(i), ErrPadding, "padding [%d, %d) is not zero", ft.dataOffset+ft.dataLen, ft.indexOffset))
						padReported = true
					}
				}
				pos += int64(len(p))
				return
			}
			take := min(int64(len(p)), ft.dataLen-pos)
			if blk < nblocks {
				take = min(take, blkEnd-pos)
				crc = crc32cUpdate(crc, p[:take])
			}
			pos += take
			p = p[take:]
		}
	}
	err := s.readChunks(ft.dataOffset, ft.indexOffset, process)
	if err != nil {
		return s.fault(err)
	}
	process(nil)
	return nil
}

// readChunks reads [a, b) sequentially in chunks on a second goroutine, two buffers deep, and
// calls fn with each chunk in order.
func (s *scanner) readChunks(a, b int64, fn func(p []byte)) error {
	if a >= b {
		return nil
	}
	chunk := int64(s.opts.ChunkSize)
	if chunk <= 0 {
		chunk = DefaultScanChunk
	}
	chunk = min(chunk, b-a)
	type result struct {
		buf []byte
		err error
	}
	const depth = 2
	free := make(chan []byte, depth)
	full := make(chan result, depth)
	stop := make(chan struct{})
	for range depth {
		free <- make([]byte, chunk)
	}
	go func() {
		defer close(full)
		for off := a; off < b; {
			var buf []byte
			select {
			case buf = <-free:
			case <-stop:
				return
			}
			p := buf[:min(b-off, chunk)]
			err := readFull(s.r, p, off, s.name)
			full <- result{p, err}
			if err != nil {
				return
			}
			off += int64(len(p))
		}
	}()
	defer func() {
		close(stop)
		for range full {
		}
	}()
	for res := range full {
		if res.err != nil {
			return res.err
		}
		fn(res.buf)
		s.progress(int64(len(res.buf)))
		free <- res.buf[:cap(res.buf)]
	}
	return nil
}
