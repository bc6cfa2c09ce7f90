package idx

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// AppendHeader appends an IDX header for element type typ and dims to b.
func AppendHeader(b []byte, typ byte, dims []int) []byte {
	b = append(b, 0, 0, typ, byte(len(dims)))
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return b
}

// EncodeLabels returns labels as big-endian elements of type typ (ubyte, byte, short or int).
func EncodeLabels(typ byte, labels []int64) ([]byte, error) {
	var b []byte
	for _, v := range labels {
		switch typ {
		case TypeUbyte, TypeByte:
			b = append(b, byte(v))
		case TypeShort:
			b = binary.BigEndian.AppendUint16(b, uint16(v))
		case TypeInt:
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		default:
			return nil, fmt.Errorf("idx: cannot encode labels as %s", TypeName(typ))
		}
	}
	return b, nil
}

// WriteFile writes an IDX file: the header for typ and dims, then data, which must hold
// exactly the elements the dims call for. A path ending in ".gz" is gzip-compressed.
// It is meant for tests and demos.
func WriteFile(path string, typ byte, dims []int, data []byte) (err error) {
	if int64(len(data)) != int64(ElemSize(typ))*product(dims) {
		return fmt.Errorf("idx: %d data bytes for shape %v of %s", len(data), dims, TypeName(typ))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	bw := bufio.NewWriter(f)
	var w io.Writer = bw
	var gz *gzip.Writer
	if strings.HasSuffix(path, ".gz") {
		gz = gzip.NewWriter(bw)
		w = gz
	}
	if _, err := w.Write(AppendHeader(nil, typ, dims)); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	if gz != nil {
		if err := gz.Close(); err != nil {
			return err
		}
	}
	return bw.Flush()
}
