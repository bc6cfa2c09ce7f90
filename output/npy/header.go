package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// These constants are part of the NumPy .npy format (numpy/lib/format.py).
const (
	// Magic opens every .npy file; the major and minor version bytes follow it.
	Magic = "\x93NUMPY"
	// Align is the alignment of the data start that NumPy uses and this package writes.
	Align = 64
	// MaxHeaderLen bounds the header dictionary a reader accepts (NumPy's default
	// max_header_size is 10000).
	MaxHeaderLen = 1 << 16
	// MaxDims bounds the number of dimensions (NumPy's limit is 64).
	MaxDims = 32
)

// ErrFormat is wrapped by every error that reports a malformed .npy header or a file whose
// structure disagrees with its manifest: the file is damaged or not what packer wrote.
var ErrFormat = errors.New("npy: invalid format")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// Header is the parsed header of a .npy file.
type Header struct {
	Descr   string // NumPy type string, for example "|u1", "<f4", "<i8"
	Shape   []int  // array shape (nil or empty for a scalar)
	Fortran bool   // column-major data order
}

// Count returns the number of elements of the shape, or -1 when it overflows int64.
func (h Header) Count() int64 {
	n := int64(1)
	for _, d := range h.Shape {
		if d != 0 && n > (1<<62)/int64(d) {
			return -1
		}
		n *= int64(d)
	}
	return n
}

// DataSize returns the byte size of the data the header describes, or -1 when it does not fit
// in an int64 or the type string is not a simple one.
func (h Header) DataSize() int64 {
	n, es := h.Count(), int64(DescrSize(h.Descr))
	if n < 0 || es == 0 || n > (1<<62)/es {
		return -1
	}
	return n * es
}

// DescrSize returns the element size of a simple NumPy type string ("<f4" → 4), or 0 when the
// string is not one: a byte order character (<, >, |, =), a kind (b, i, u, f, c) and a size.
func DescrSize(descr string) int {
	if len(descr) < 3 || !strings.ContainsRune("<>|=", rune(descr[0])) || !strings.ContainsRune("biufc", rune(descr[1])) {
		return 0
	}
	n, err := strconv.Atoi(descr[2:])
	if err != nil || n <= 0 || n > 16 || descr[2] == '+' {
		return 0
	}
	return n
}

// ReadHeader reads the magic, version and header of a .npy file from r and returns the header
// and the offset at which the data starts. It accepts format versions 1.0, 2.0 and 3.0, checks
// the header length against MaxHeaderLen before reading it, and parses the dictionary with a
// strict parser for the literal subset NumPy writes (no evaluation).
func ReadHeader(r io.Reader) (Header, int64, error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return Header{}, 0, truncated(err)
	}
	if string(pre[:6]) != Magic {
		return Header{}, 0, formatErr("bad magic %q (want %q)", pre[:6], Magic)
	}
	var hlen, off int64
	switch major, minor := pre[6], pre[7]; {
	case major == 1 && minor == 0:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return Header{}, 0, truncated(err)
		}
		hlen, off = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case (major == 2 || major == 3) && minor == 0:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return Header{}, 0, truncated(err)
		}
		hlen, off = int64(binary.LittleEndian.Uint32(b[:])), 12
	default:
		return Header{}, 0, formatErr("unsupported version %d.%d", major, minor)
	}
	if hlen > MaxHeaderLen {
		return Header{}, 0, formatErr("header length %d over the limit of %d", hlen, MaxHeaderLen)
	}
	buf := make([]byte, hlen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Header{}, 0, truncated(err)
	}
	h, err := parseDict(buf)
	if err != nil {
		return Header{}, 0, err
	}
	return h, off + hlen, nil
}

func truncated(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return formatErr("truncated header")
	}
	return err
}

// parser is a tiny recursive-descent parser for the header dictionary.
type parser struct {
	b   []byte
	pos int
}

func (p *parser) skipSpace() {
	for p.pos < len(p.b) && (p.b[p.pos] == ' ' || p.b[p.pos] == '\t' || p.b[p.pos] == '\n' || p.b[p.pos] == '\r') {
		p.pos++
	}
}

// accept consumes c after optional space and reports whether it was there.
func (p *parser) accept(c byte) bool {
	p.skipSpace()
	if p.pos < len(p.b) && p.b[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *parser) errorf(format string, args ...any) error {
	return formatErr("header at byte %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) str() (string, error) {
	p.skipSpace()
	if p.pos >= len(p.b) || (p.b[p.pos] != '\'' && p.b[p.pos] != '"') {
		return "", p.errorf("want a string")
	}
	q := p.b[p.pos]
	end := bytes.IndexByte(p.b[p.pos+1:], q)
	if end < 0 {
		return "", p.errorf("unterminated string")
	}
	s := p.b[p.pos+1 : p.pos+1+end]
	if bytes.IndexByte(s, '\\') >= 0 {
		return "", p.errorf("escapes in strings are not supported")
	}
	p.pos += end + 2
	return string(s), nil
}

func (p *parser) word() string {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.b) && (p.b[p.pos] >= 'A' && p.b[p.pos] <= 'Z' || p.b[p.pos] >= 'a' && p.b[p.pos] <= 'z') {
		p.pos++
	}
	return string(p.b[start:p.pos])
}

func (p *parser) int() (int64, error) {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.b) && p.b[p.pos] >= '0' && p.b[p.pos] <= '9' {
		p.pos++
	}
	n, err := strconv.ParseInt(string(p.b[start:p.pos]), 10, 64)
	if start == p.pos || p.pos-start > maxCountDigits || err != nil {
		return 0, p.errorf("want a dimension (a non-negative 64-bit integer)")
	}
	if p.pos < len(p.b) && p.b[p.pos] == 'L' { // Python 2 long
		p.pos++
	}
	return n, nil
}

func (p *parser) shape() ([]int, error) {
	if !p.accept('(') {
		return nil, p.errorf("shape must be a tuple")
	}
	shape := []int{}
	if p.accept(')') {
		return shape, nil
	}
	for {
		d, err := p.int()
		if err != nil {
			return nil, err
		}
		if len(shape) == MaxDims {
			return nil, p.errorf("more than %d dimensions", MaxDims)
		}
		shape = append(shape, int(d))
		comma := p.accept(',')
		if p.accept(')') {
			if len(shape) == 1 && !comma {
				return nil, p.errorf("(n) is not a tuple; want (n,)")
			}
			return shape, nil
		}
		if !comma {
			return nil, p.errorf("want , or ) in shape")
		}
	}
}

func parseDict(b []byte) (Header, error) {
	p := &parser{b: b}
	var h Header
	if !p.accept('{') {
		return h, p.errorf("want {")
	}
	seen := map[string]bool{}
	for !p.accept('}') {
		key, err := p.str()
		if err != nil {
			return h, err
		}
		if seen[key] {
			return h, p.errorf("key %q repeated", key)
		}
		seen[key] = true
		if !p.accept(':') {
			return h, p.errorf("want : after %q", key)
		}
		switch key {
		case "descr":
			p.skipSpace()
			if p.pos < len(p.b) && p.b[p.pos] == '[' {
				return h, p.errorf("structured dtypes are not supported")
			}
			if h.Descr, err = p.str(); err != nil {
				return h, err
			}
		case "fortran_order":
			switch w := p.word(); w {
			case "True":
				h.Fortran = true
			case "False":
				h.Fortran = false
			default:
				return h, p.errorf("fortran_order must be True or False")
			}
		case "shape":
			if h.Shape, err = p.shape(); err != nil {
				return h, err
			}
		default:
			return h, p.errorf("unknown key %q", key)
		}
		if !p.accept(',') {
			if !p.accept('}') {
				return h, p.errorf("want , or }")
			}
			break
		}
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, formatErr("header has no %q", k)
		}
	}
	// What follows the dictionary must be padding: spaces, ending with a newline (NumPy also
	// pads older files with NUL bytes before the newline, which it tolerates; so do we).
	for ; p.pos < len(p.b); p.pos++ {
		if c := p.b[p.pos]; c != ' ' && c != '\n' && c != 0 {
			return h, p.errorf("unexpected %q after the dictionary", c)
		}
	}
	if h.Count() < 0 {
		return h, formatErr("shape %v overflows", h.Shape)
	}
	return h, nil
}

// shapeString formats a shape as a Python tuple: "(3,)", "(3, 28, 28, 1)", "()".
func shapeString(shape []int64) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, d := range shape {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	if len(shape) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}

// maxCountDigits is the width reserved for the record count, the largest int64.
const maxCountDigits = 19

// headerFor returns a version 1.0 header for descr and shape, padded with spaces and a final
// newline to exactly size bytes (magic included), or to the next multiple of Align when size
// is 0.
func headerFor(descr string, shape []int64, size int) ([]byte, error) {
	dict := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shapeString(shape) + ", }"
	n := 10 + len(dict) + 1
	if size == 0 {
		size = n + (-n & (Align - 1))
	}
	if n > size || size-10 > 0xFFFF {
		return nil, fmt.Errorf("npy: header for shape %v does not fit in %d bytes", shape, size)
	}
	b := make([]byte, 0, size)
	b = append(b, Magic...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(size-10))
	b = append(b, dict...)
	for len(b) < size-1 {
		b = append(b, ' ')
	}
	return append(b, '\n'), nil
}

// reservedHeader returns the header written before the count is known: it has the size of
// the header for the largest count, so the final header fits in the same bytes.
func reservedHeader(descr string, sample []int) ([]byte, error) {
	shape := make([]int64, 1+len(sample))
	shape[0] = 1e18 // maxCountDigits digits
	for i, d := range sample {
		shape[i+1] = int64(d)
	}
	big, err := headerFor(descr, shape, 0)
	if err != nil {
		return nil, err
	}
	shape[0] = 0
	return headerFor(descr, shape, len(big))
}
