package shard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"
)

// DefaultScanChunk is the size of Scan's sequential reads.
const DefaultScanChunk = 8 << 20

// scanDepth is how many chunk buffers a scan's ring holds: the reader goroutine fills up to
// scanDepth-1 of them ahead of the one being checked.
const scanDepth = 4

// scanPiece is how many bytes of a chunk are hashed and then checked in one step, so the checks
// read bytes the hash has just brought into the CPU cache.
const scanPiece = 64 << 10

// ScanOptions configures ScanWith. The zero value is ready to use.
type ScanOptions struct {
	// Progress, if set, is called from the scanning goroutine with the number of bytes checked
	// since its previous call; the calls add up to the file size when the scan completes.
	Progress func(bytes int64)
	// ChunkSize is the size of the sequential reads; 0 means DefaultScanChunk. With Direct it is
	// rounded up to a multiple of Align.
	ChunkSize int
	// Hash, if set, receives every byte of the file exactly once, in file order from offset 0 to
	// the end, whatever faults the scan finds; it is called from the scanning goroutine, in
	// pieces of at most 64 KiB, each just before the checks of the same bytes (typically a
	// SHA-256 hash.Hash, so a file is hashed and checked in one read, and the checks find the
	// bytes in the CPU cache). Write must not keep the slice. An
	// error from Write stops the scan, which returns it (a way to cancel a scan). When the scan
	// returns an error or reports that the file is shorter than its size, Hash has received only
	// a prefix of the file.
	Hash io.Writer
	// Direct reads with O_DIRECT, bypassing the page cache, where the OS and file system support
	// it (falling back to ordinary reads where they do not, on tmpfs for example). It applies to
	// ScanFile and StreamFile; ScanWith reads its io.ReaderAt as given.
	Direct bool
}

// Scan checks the whole structure of a shard of size bytes read from r and calls report for
// every fault it finds: header, footer and index CRCs, inconsistent fields and offsets, the
// CRC of every data block (naming the block's record range), non-zero padding and reserved
// bytes, and truncation. It goes on past faults wherever the rest of the file can still be
// interpreted: an intact footer and index are enough to check every data block, even when the
// header or other blocks are damaged. name is used in the reports.
//
// Scan reads the footer first (one small read at the end), then the whole file once, in order
// from offset 0 to the end, in large chunks read by a second goroutine into a small ring of
// buffers, so checking overlaps reading. The reads block their thread (O_DIRECT reads cannot go
// through Go's poller): a program that scans several files at once on every core may want
// GOMAXPROCS raised by the number of scans, so threads blocked in reads leave no core idle
// (packer verify does). Block CRCs are computed as the data streams by and
// compared with the index once it has been read (after the data, where the file keeps it);
// only for variable-size records, whose block boundaries are in the index, is the index read
// ahead of the data as well. Scan returns nil when it has looked at everything it could,
// whatever it reported, and an error when reading failed for another reason than the file being
// short. If report is nil, Scan returns the first fault as its error instead.
func Scan(r io.ReaderAt, size int64, name string, report func(*CorruptionError)) error {
	return ScanWith(r, size, name, ScanOptions{}, report)
}

// ScanFile runs ScanWith on the file at path, with O_DIRECT reads when opts.Direct is set.
func ScanFile(path string, opts ScanOptions, report func(*CorruptionError)) error {
	src, size, err := openSource(path, opts.Direct)
	if err != nil {
		return fmt.Errorf("scan shard: %w", err)
	}
	defer src.close()
	return scanSource(src, size, path, opts, report)
}

// StreamFile reads the file at path once, sequentially and in order, exactly as ScanFile does
// (same chunks, reader goroutine and O_DIRECT handling), passing every byte to opts.Hash and
// counting it in opts.Progress, without interpreting it. It is for hashing files that are not
// shards at the speed of a scan. A file shorter than its size at open is a *CorruptionError
// wrapping ErrTruncated.
func StreamFile(path string, opts ScanOptions) error {
	src, size, err := openSource(path, opts.Direct)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer src.close()
	s := &scanner{src: src, size: size, name: path, opts: opts}
	return s.stream(func([]byte, int64) {})
}

// Stream is StreamFile over size bytes of r (opts.Direct is ignored); name is used in errors.
func Stream(r io.ReaderAt, size int64, name string, opts ScanOptions) error {
	s := &scanner{src: &source{r: r}, size: size, name: name, opts: opts}
	return s.stream(func([]byte, int64) {})
}

// ScanWith is Scan with options.
func ScanWith(r io.ReaderAt, size int64, name string, opts ScanOptions, report func(*CorruptionError)) error {
	return scanSource(&source{r: r}, size, name, opts, report)
}

func scanSource(src *source, size int64, name string, opts ScanOptions, report func(*CorruptionError)) error {
	var first *CorruptionError
	if report == nil {
		report = func(e *CorruptionError) {
			if first == nil {
				first = e
			}
		}
	}
	s := &scanner{src: src, size: size, name: name, opts: opts, report: report}
	if err := s.run(); err != nil {
		return err
	}
	if first != nil {
		return first
	}
	return nil
}

// source is what a scan reads: an io.ReaderAt, or a file opened for O_DIRECT reads that falls
// back to ordinary reads when the file system refuses them.
type source struct {
	r      io.ReaderAt
	f      *os.File // owned by the source (ScanFile, StreamFile)
	path   string
	direct bool // reads must be aligned: offsets and lengths to Align, buffers from alignedBuf
}

func openSource(path string, direct bool) (*source, int64, error) {
	var (
		f   *os.File
		err error
	)
	if direct {
		f, direct, err = openDirect(func(flag int) (*os.File, error) { return os.OpenFile(path, flag, 0) })
	} else {
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return &source{r: f, f: f, path: path, direct: direct}, st.Size(), nil
}

func (src *source) close() {
	if src.f != nil {
		src.f.Close()
	}
}

// readAt reads len(p) bytes at off like readFull. For a direct source, off must be a multiple of
// Align and cap(p) at least alignUp(len(p)); the read is rounded up to whole blocks (the file
// may end inside the last one). If the file system refuses the direct read, the file is reopened
// without O_DIRECT and the read retried.
func (src *source) readAt(p []byte, off int64, name string) error {
	if !src.direct {
		return readFull(src.r, p, off, name)
	}
	q := p[:alignUp(int64(len(p)))]
	n, err := src.f.ReadAt(q, off)
	if n >= len(p) {
		return nil
	}
	if err != nil && directUnsupported(err) {
		f, oerr := os.Open(src.path)
		if oerr != nil {
			return fmt.Errorf("read %s at offset %d: %w", name, off, oerr)
		}
		src.f.Close()
		src.r, src.f, src.direct = f, f, false
		return readFull(f, p, off, name)
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt(name, off+int64(n), ErrTruncated, "read %d bytes, want %d", n, len(p))
	}
	return fmt.Errorf("read %s at offset %d: %w", name, off, err)
}

// bufAt is an io.ReaderAt over the bytes [base, base+len(b)) of a file.
type bufAt struct {
	b    []byte
	base int64
}

func (r bufAt) ReadAt(p []byte, off int64) (int, error) {
	if off < r.base || off-r.base > int64(len(r.b)) {
		return 0, io.EOF
	}
	n := copy(p, r.b[off-r.base:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// zeroRange is a range [a, b) of the file that must be zero; first is the offset of its first
// non-zero byte seen so far, or -1.
type zeroRange struct {
	a, b, first int64
	set         bool
}

func (z *zeroRange) init(a, b int64) { *z = zeroRange{a: a, b: b, first: -1, set: a < b} }

func (z *zeroRange) check(p []byte, off int64) {
	if !z.set || z.first >= 0 {
		return
	}
	q, qoff := clip(p, off, z.a, z.b)
	for i, c := range q {
		if c != 0 {
			z.first = qoff + int64(i)
			return
		}
	}
}

func (s *scanner) reportZero(z *zeroRange) {
	if z.set && z.first >= 0 {
		s.report(corrupt(s.name, z.first, ErrPadding, "padding [%d, %d) is not zero", z.a, z.b))
	}
}

// clip returns the part of p (which holds the file bytes from off) inside [a, b), and its offset.
func clip(p []byte, off, a, b int64) ([]byte, int64) {
	end := off + int64(len(p))
	a, b = max(a, off), min(b, end)
	if a >= b {
		return nil, a
	}
	return p[a-off : b-off], a
}

type scanner struct {
	src    *source
	size   int64
	name   string
	opts   ScanOptions
	report func(*CorruptionError)
	done   int64 // bytes counted for progress

	// Footer, read before the stream.
	ft   *footerInfo
	ferr error

	// Header, collected from the stream.
	hdr        []byte
	hdrNeed    int64
	hdrDone    bool
	h          *headerInfo
	herr       error
	stopChecks bool // an unknown version: nothing else can be trusted

	// Layout, decided when the header is done (or when the data starts, if it starts first).
	decided      bool
	hdrOK        bool
	l            indexLayout
	blocksOK     bool
	cannotLocate bool
	idxErr       error // checkIndex's verdict, when made before the data (variable sizes)

	index       []byte // the index, read ahead (variable sizes) or collected from the stream
	indexAhead  bool
	indexFailed bool // the index could not be read
	indexErr    *CorruptionError

	// Data blocks: CRCs computed so far, in block order.
	nblocks, blk, blkEnd, pos int64
	crc                       uint32
	crcs                      []uint32

	padHeader, padData, padIndex zeroRange
}

func (s *scanner) progress(n int64) {
	n = min(n, s.size-s.done)
	if s.opts.Progress != nil && n > 0 {
		s.opts.Progress(n)
		s.done += n
	}
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

func (s *scanner) run() error {
	defer func() { s.progress(s.size - s.done) }()
	if err := s.readFooterFirst(); err != nil {
		return err
	}
	s.hdrNeed = min(s.size, HeaderFixed)
	if err := s.stream(s.consume); err != nil {
		return s.fault(err)
	}
	if !s.hdrDone {
		s.headerDone() // an empty file
	}
	s.finish()
	return nil
}

// readFooterFirst reads the footer (one small read of the file's last block) and, for
// variable-size records, the index, whose offsets table locates the data blocks.
func (s *scanner) readFooterFirst() error {
	var fr io.ReaderAt = s.src.r
	if s.size >= Align+FooterSize && s.size%Align == 0 {
		buf, free := alignedBuf(Align)
		defer free()
		if err := s.src.readAt(buf, s.size-Align, s.name); err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				return err
			}
			s.ferr = ce
			return nil
		}
		fr = bufAt{buf, s.size - Align}
	}
	s.ft, s.ferr = readFooter(fr, s.size, s.name)
	if s.ferr != nil {
		var ce *CorruptionError
		if !errors.As(s.ferr, &ce) {
			return s.ferr
		}
		return nil
	}
	ft := s.ft
	s.padData.init(ft.dataOffset+ft.dataLen, ft.indexOffset)
	s.padIndex.init(ft.indexOffset+ft.indexLen, s.size-FooterSize)
	if ft.recordSize == 0 && ft.n > 0 {
		// Block boundaries are in the offsets table: read the index ahead of the data.
		s.indexAhead = true
		n := alignUp(ft.indexLen) // ≤ size - indexOffset, checked by readFooter
		buf, free := alignedBuf(int(max(n, 1)))
		defer free()
		if err := s.src.readAt(buf[:ft.indexLen], ft.indexOffset, s.name); err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				return err
			}
			s.indexErr, s.indexFailed = ce, true // reported in its place, after the header
			return nil
		}
		s.index = bytes.Clone(buf[:ft.indexLen])
	} else {
		s.index = make([]byte, 0, ft.indexLen) // ≤ size, checked by readFooter
	}
	return nil
}

// consume checks the chunk p, the file's bytes from off.
func (s *scanner) consume(p []byte, off int64) {
	if !s.hdrDone && off < s.hdrNeed {
		s.collectHeader(p, off)
	}
	if s.stopChecks {
		return
	}
	s.padHeader.check(p, off)
	if s.ferr != nil {
		return
	}
	ft := s.ft
	if q, _ := clip(p, off, ft.dataOffset, ft.dataOffset+ft.dataLen); len(q) > 0 {
		if !s.decided {
			s.decide(false, indexLayout{}) // the header runs into the data: it cannot be right
		}
		s.dataBytes(q)
	}
	s.padData.check(p, off)
	if !s.indexAhead {
		if q, _ := clip(p, off, ft.indexOffset, ft.indexOffset+ft.indexLen); len(q) > 0 {
			s.index = append(s.index, q...)
		}
	}
	s.padIndex.check(p, off)
}

// collectHeader gathers the header from the stream and checks it once it is complete.
func (s *scanner) collectHeader(p []byte, off int64) {
	for !s.hdrDone {
		q, _ := clip(p, off, int64(len(s.hdr)), s.hdrNeed)
		s.hdr = append(s.hdr, q...)
		if int64(len(s.hdr)) < s.hdrNeed {
			return
		}
		if s.hdrNeed == HeaderFixed {
			// The fixed part says how long the meta JSON is.
			if _, _, metaLen, err := parseHeaderFixed(s.hdr, s.name); err == nil && HeaderFixed+metaLen <= s.size && metaLen > 0 {
				s.hdrNeed = HeaderFixed + metaLen
				continue
			}
		}
		s.headerDone()
	}
}

// headerDone checks the collected header against itself and the footer.
func (s *scanner) headerDone() {
	s.hdrDone = true
	s.h, s.herr = readHeader(bufAt{s.hdr, 0}, s.size, s.name)
	s.hdr = nil
	h := s.h
	if s.herr != nil {
		s.report(asCorruption(s.herr))
		if errors.Is(s.herr, ErrVersion) {
			s.stopChecks = true
			return
		}
	}
	if s.ferr != nil {
		s.report(asCorruption(s.ferr))
		if s.herr == nil {
			// The header alone still locates its own padding.
			s.padHeader.init(HeaderFixed+h.metaLen, min(h.dataOffset(), s.size))
		}
		return
	}
	ft := s.ft
	hdrOK := s.herr == nil
	var l indexLayout
	if hdrOK {
		var err error
		if l, err = checkHeaderFooter(h, ft, s.name, s.size); err != nil {
			s.report(asCorruption(err))
			hdrOK = false
		}
	}
	if s.herr == nil && HeaderFixed+h.metaLen <= ft.dataOffset {
		s.padHeader.init(HeaderFixed+h.metaLen, ft.dataOffset)
	}
	if !s.decided {
		s.decide(hdrOK, l)
	}
}

// asCorruption returns the *CorruptionError in err (header and footer checks return no other).
func asCorruption(err error) *CorruptionError {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return ce
	}
	return &CorruptionError{Record: -1, Offset: -1, Err: err}
}

// decide fixes how the data is checked: the index layout and whether the block CRCs can be
// located. With a valid header that agrees with the footer (hdrOK), l is its layout; otherwise
// the footer alone locates the block CRCs (the last part of the index) and, for variable-size
// records, the offsets table (the first part).
func (s *scanner) decide(hdrOK bool, l indexLayout) {
	s.decided, s.hdrOK = true, hdrOK
	ft := s.ft
	blocksOK := true
	if hdrOK {
		// With no records the index is not read ahead (nothing to locate): finish checks it.
		if l.varSize && s.indexAhead {
			if s.indexFailed {
				blocksOK = false
			} else {
				// A bad shapes part does not stop the data checks: the offsets locate the blocks.
				lo := l
				lo.shapes, lo.nf = false, 0
				if s.idxErr = checkIndex(s.index, lo, ft.dataLen, s.name, ft.indexOffset); s.idxErr != nil {
					blocksOK = false
				} else {
					s.idxErr = checkShapes(s.index, l, s.name, ft.indexOffset)
				}
			}
		}
	} else {
		var flags uint16
		if ft.recordSize == 0 && ft.n > 0 {
			flags = FlagVarSize
		}
		l = newIndexLayout(ft.n, 0, ft.k, flags, 0)
		l.crcs = ft.indexLen - l.blocks*4
		if l.crcs < l.labels {
			blocksOK = false // too short for even the offsets and the CRCs
		} else if l.varSize && (s.indexFailed || checkIndex(s.index, indexLayout{n: ft.n, varSize: true}, ft.dataLen, s.name, ft.indexOffset) != nil) {
			blocksOK = false
		}
		s.cannotLocate = !blocksOK && !s.indexFailed
	}
	s.l, s.blocksOK = l, blocksOK
	if blocksOK {
		s.nblocks = l.blocks
		if ft.n > 0 { // no records: no blocks, and a variable-size index not yet read
			s.blkEnd = s.recordOff(min(ft.k, ft.n))
		}
	}
}

// recordOff is the data-relative offset of record i.
func (s *scanner) recordOff(i int64) int64 {
	if s.l.varSize {
		return int64(le.Uint64(s.index[s.l.offs+i*8:]))
	}
	return i * s.ft.recordSize
}

// dataBytes extends the block CRCs with p, the data section's next bytes (the stream is in order).
// Blocks that end (including empty ones) are closed in order.
func (s *scanner) dataBytes(p []byte) {
	for len(p) > 0 || (s.blk < s.nblocks && s.blkEnd == s.pos) {
		if s.blk < s.nblocks && s.pos == s.blkEnd {
			s.crcs = append(s.crcs, s.crc)
			s.blk++
			s.crc = 0
			if s.blk < s.nblocks {
				s.blkEnd = s.recordOff(min((s.blk+1)*s.ft.k, s.ft.n))
			}
			continue
		}
		take := int64(len(p))
		if s.blk < s.nblocks {
			take = min(take, s.blkEnd-s.pos)
			s.crc = crc32cUpdate(s.crc, p[:take])
		}
		s.pos += take
		p = p[take:]
	}
}

// finish reports what could only be judged once the whole file was read, in the order of the
// file: header padding, index, data blocks, data padding, index padding.
func (s *scanner) finish() {
	if s.stopChecks {
		return
	}
	s.reportZero(&s.padHeader)
	if s.ferr != nil {
		return
	}
	if s.indexFailed {
		s.report(s.indexErr)
		return
	}
	if !s.decided {
		s.decide(false, indexLayout{}) // cannot happen: the stream covers the header
	}
	ft := s.ft
	if int64(len(s.index)) != ft.indexLen {
		return // cannot happen: the stream covers the index
	}
	if got := crc32c(s.index); got != ft.indexCRC {
		s.report(corrupt(s.name, ft.indexOffset, ErrChecksum, "index CRC %#08x, stored %#08x", got, ft.indexCRC))
	}
	if s.hdrOK {
		err := s.idxErr
		if !s.indexAhead {
			err = checkIndex(s.index, s.l, ft.dataLen, s.name, ft.indexOffset)
		}
		if err != nil {
			s.report(asCorruption(err))
		}
	} else if s.cannotLocate {
		s.report(corrupt(s.name, ft.indexOffset, ErrFormat, "cannot locate the block checksums; data blocks not checked"))
	}
	if s.blocksOK {
		s.dataBytes(nil) // close trailing empty blocks
		for b, got := range s.crcs {
			blk := int64(b)
			a := blk * ft.k
			n := min(a+ft.k, ft.n) - a
			if want := le.Uint32(s.index[s.l.crcs+blk*4:]); got != want {
				s.report(corruptRecords(s.name, a, n, ft.dataOffset+s.recordOff(a), ErrChecksum, "block %d CRC %#08x, stored %#08x", blk, got, want))
			}
		}
	}
	s.reportZero(&s.padData)
	s.reportZero(&s.padIndex)
}

// stream reads the whole file, [0, size), sequentially in chunks on a second goroutine into a
// ring of scanDepth aligned buffers, and calls fn with each chunk in order, in pieces of at most
// scanPiece bytes, each after passing it to opts.Hash. It returns the first read error (a
// *CorruptionError for a short file).
//
// Hash and checks run one after the other on the same goroutine, piece by piece: the checks
// (CRC-32C) then read bytes that are still in the CPU cache, which costs less CPU than running
// them beside the hash on another goroutine; Scan is CPU-bound when it hashes (SHA-256 is
// slower than the disk), and the scans of several files use the other cores.
func (s *scanner) stream(fn func(p []byte, off int64)) error {
	if s.size <= 0 {
		return nil
	}
	chunk := int64(s.opts.ChunkSize)
	if chunk <= 0 {
		chunk = DefaultScanChunk
	}
	if s.src.direct {
		chunk = alignUp(chunk)
	}
	chunk = min(chunk, s.size)
	type result struct {
		buf []byte
		off int64
		err error
	}
	depth := int(min(scanDepth, (s.size+chunk-1)/chunk))
	free := make(chan []byte, depth)
	full := make(chan result, depth)
	stop := make(chan struct{})
	var frees []func()
	defer func() {
		for _, f := range frees {
			f()
		}
	}()
	for range depth {
		b, f := alignedBuf(int(alignUp(chunk)))
		frees = append(frees, f)
		free <- b[:chunk]
	}
	go func() {
		defer close(full)
		for off := int64(0); off < s.size; {
			var buf []byte
			select {
			case buf = <-free:
			case <-stop:
				return
			}
			p := buf[:min(s.size-off, chunk)]
			err := s.src.readAt(p, off, s.name)
			full <- result{p, off, err}
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
		for i := 0; i < len(res.buf); i += scanPiece {
			p := res.buf[i:min(len(res.buf), i+scanPiece)]
			if s.opts.Hash != nil {
				if _, err := s.opts.Hash.Write(p); err != nil {
					return err
				}
			}
			fn(p, res.off+int64(i))
		}
		s.progress(int64(len(res.buf)))
		free <- res.buf[:chunk]
	}
	return nil
}

// alignedBuf returns n bytes (n > 0) aligned to Align, for O_DIRECT reads, and a function that
// releases them. Buffers of hugePage bytes or more start on a huge page boundary and are offered
// to the kernel for transparent huge pages, where the OS has them: an O_DIRECT read pins every
// page of its buffer, and pinning 8 MiB as 4 huge pages instead of 2048 small ones takes most
// of the system time out of a scan.
func alignedBuf(n int) ([]byte, func()) {
	var a MmapAllocator
	if hugePage > 0 && n >= hugePage {
		if m, err := a.Alloc(n + hugePage); err == nil {
			base, h := uintptr(unsafe.Pointer(&m[0])), uintptr(hugePage)
			skip := int((base+h-1)&^(h-1) - base)
			b := m[skip : skip+n : skip+int(alignUp(int64(n)))]
			adviseHuge(b)
			return b, func() { _ = a.Free(m) }
		}
	}
	b, err := a.Alloc(n)
	if err != nil {
		// Out of address space for a mapping: fall back to the Go heap.
		b = make([]byte, n+Align)
		skip := int(alignUp(int64(uintptr(unsafe.Pointer(&b[0])))) - int64(uintptr(unsafe.Pointer(&b[0]))))
		return b[skip : skip+n : skip+n], func() {}
	}
	return b, func() { _ = a.Free(b) }
}
