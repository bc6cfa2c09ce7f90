package shard

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// A dataset built with --format npy (FormatNPY) is read by the same Dataset and Loader as a
// shards dataset: its images.npy is one contiguous [N, ...sample shape] array after a header,
// so it is opened as a single "shard" whose records start at the end of that header, and the
// index a shard stores is built at open from labels.npy, the aux_<name>.npy columns and
// meta.jsonl. ORDER.md then treats the dataset as one unit, as the Python reader does.
// The npy files carry no checksums: records are never CRC-checked (packer verify checks the
// files' SHA-256), and the Loader reads them through the page cache (the array's end is not
// aligned for O_DIRECT).

// npy file names inside a dataset (output/npy writes them).
const (
	npyImages    = "images.npy"
	npyLabels    = "labels.npy"
	npyMeta      = "meta.jsonl"
	npyAuxPrefix = "aux_"
)

// npyDescr is the NumPy type string of a sample element type.
func npyDescr(d DType) string {
	switch d {
	case Uint8:
		return "|u1"
	case Float16:
		return "<f2"
	case Float32:
		return "<f4"
	}
	return ""
}

// npyHeaderWant is the header dictionary NumPy and packer write for an array of descr and
// shape; readNpyHeader compares a file's dictionary with it.
func npyHeaderWant(descr string, shape []int) string {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := "(" + strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + tuple + "), }"
}

// readNpyHeader reads the header of the .npy file f, requires it to describe a C-order array
// of descr and shape, and returns the offset of the data; the file must be exactly as long
// as the data.
func readNpyHeader(f File, name, descr string, shape []int, elem int64) (int64, error) {
	bad := func(off int64, format string, args ...any) error {
		return corrupt(name, off, ErrFormat, format, args...)
	}
	var pre [12]byte
	if f.Size() < 10 {
		return 0, bad(0, "%d bytes: too short for a .npy header", f.Size())
	}
	if err := readFull(f, pre[:10], 0, name); err != nil {
		return 0, err
	}
	if string(pre[:6]) != "\x93NUMPY" {
		return 0, bad(0, "not a .npy file (magic %q)", pre[:6])
	}
	var hlen, start int64
	switch pre[6] {
	case 1:
		hlen, start = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		if err := readFull(f, pre[:12], 0, name); err != nil {
			return 0, err
		}
		hlen, start = int64(binary.LittleEndian.Uint32(pre[8:12])), 12
	default:
		return 0, bad(6, ".npy version %d.%d", pre[6], pre[7])
	}
	if hlen > 1<<16 || start+hlen > f.Size() {
		return 0, bad(8, "header length %d in a file of %d bytes", hlen, f.Size())
	}
	dict := make([]byte, hlen)
	if err := readFull(f, dict, start, name); err != nil {
		return 0, err
	}
	got := string(bytes.TrimRight(dict, " \n\x00"))
	if want := npyHeaderWant(descr, shape); got != want {
		return 0, bad(start, "header %s, want %s (the manifest's records)", got, want)
	}
	off := start + hlen
	if want := off + int64(shape[0])*elem; f.Size() != want {
		return 0, bad(off, "%d bytes, want %d for %d records of %d bytes", f.Size(), want, shape[0], elem)
	}
	return off, nil
}

// openNpy opens the npy dataset m describes in fsys as a Reader of one shard holding every
// record: its data is images.npy's array; labels, aux columns and metadata are read whole.
func openNpy(fsys FS, m *Manifest, opts ReaderOptions) (*Reader, error) {
	spec := m.Sample
	descr := npyDescr(spec.DType)
	if !spec.Fixed() || descr == "" {
		return nil, fmt.Errorf("%s: sample %v %s: an npy dataset holds fixed-size records of uint8, float16 or float32", fsName(fsys, npyImages), spec.Shape, spec.DType)
	}
	n, size := m.Count, spec.Size()
	f, err := fsys.Open(npyImages)
	if err != nil {
		return nil, fmt.Errorf("open npy: %w", err)
	}
	name := fsName(fsys, npyImages)
	off, err := readNpyHeader(f, name, descr, append([]int{int(n)}, spec.Shape...), size)
	if err != nil {
		f.Close()
		return nil, err
	}
	listed := map[string]bool{}
	for _, fe := range m.Files {
		listed[fe.Path] = true
	}
	hasMeta := listed[npyMeta]
	var flags uint16
	if hasMeta {
		flags = FlagMeta
	}
	k := max(n, 1) // one block, never checked: npy has no checksums
	naux := int64(len(m.Label.Aux))
	var blob []byte
	var metaOffs []uint64
	if hasMeta {
		if blob, metaOffs, err = readNpyMeta(fsys, n); err != nil {
			f.Close()
			return nil, err
		}
	}
	l := newIndexLayout(n, naux, k, flags, int64(len(blob)))
	index := make([]byte, l.size)
	cols := []string{npyLabels}
	for _, a := range m.Label.Aux {
		cols = append(cols, npyAuxPrefix+a+".npy")
	}
	for c, col := range cols {
		vals, err := readNpyInt64s(fsys, col, n)
		if err == nil && c == 0 {
			err = checkNpyLabels(m, vals, fsName(fsys, col))
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		for i := range n {
			if c == 0 {
				copy(index[l.labels+i*8:], vals[i*8:i*8+8])
			} else {
				copy(index[l.aux+(i*naux+int64(c-1))*8:], vals[i*8:i*8+8])
			}
		}
	}
	if hasMeta {
		for i, o := range metaOffs {
			le.PutUint64(index[l.metaOffs+int64(i)*8:], o)
		}
		copy(index[l.blob:], blob)
	}
	r := &Reader{r: f, file: f, name: name, size: f.Size(), opts: opts,
		h:     &headerInfo{version: uint16(m.FormatVersion), layout: uint16(m.FormatVersion), index: 0, flags: flags, spec: spec, label: m.Label, k: k},
		ft:    &footerInfo{n: n, recordSize: size, dataOffset: off, dataLen: n * size, k: k},
		l:     l,
		index: index,
	}
	if lf, ok := f.(*osFile); ok { // reads check that images.npy is not written over in place
		if r.st, err = lf.Stat(); err != nil {
			f.Close()
			return nil, fmt.Errorf("open npy: %w", err)
		}
	}
	r.verified = make([]atomic.Uint64, (l.blocks+63)/64)
	for b := range l.blocks {
		r.setVerified(b)
	}
	return r, nil
}

// checkNpyLabels refuses labels (labels.npy's values, little-endian int64) that disagree with
// the manifest's classes and class_counts: labels.npy has no checksum, and any single changed
// label shows there (a class loses a record and another gains one, or it leaves the classes).
func checkNpyLabels(m *Manifest, vals []byte, path string) error {
	labels := make([]int64, len(vals)/8)
	for i := range labels {
		labels[i] = int64(le.Uint64(vals[i*8:]))
	}
	t := NewLabelTally(m)
	t.Add(0, labels)
	if faults := t.Faults(m); len(faults) > 0 {
		return corrupt(path, 0, ErrFormat, "%s: the labels are damaged (packer verify checks their SHA-256)", strings.Join(faults, "; "))
	}
	return nil
}

// readNpyInt64s reads the int64 column name ([n], little-endian) whole.
func readNpyInt64s(fsys FS, name string, n int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open npy: %w", err)
	}
	defer f.Close()
	path := fsName(fsys, name)
	off, err := readNpyHeader(f, path, "<i8", []int{int(n)}, 8)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n*8)
	if err := readFull(f, b, off, path); err != nil {
		return nil, err
	}
	return b, nil
}

// readNpyMeta reads meta.jsonl: one JSON value per record and line, "null" for a record
// without metadata (stored as none, as in a shard). It returns the values back to back and
// the n+1 offsets that delimit them.
func readNpyMeta(fsys FS, n int64) ([]byte, []uint64, error) {
	f, err := fsys.Open(npyMeta)
	if err != nil {
		return nil, nil, fmt.Errorf("open npy: %w", err)
	}
	defer f.Close()
	path := fsName(fsys, npyMeta)
	data := make([]byte, f.Size())
	if err := readFull(f, data, 0, path); err != nil {
		return nil, nil, err
	}
	offs := make([]uint64, 0, n+1)
	blob := make([]byte, 0, len(data))
	var at int64
	for i := range n {
		line, rest, ok := bytes.Cut(data, []byte{'\n'})
		if !ok || !json.Valid(line) {
			return nil, nil, corruptRecords(path, i, 1, at, ErrFormat, "line %d is not one JSON value and a newline (%d lines for %d records?)", i+1, i, n)
		}
		offs = append(offs, uint64(len(blob)))
		if string(line) != "null" {
			blob = append(blob, line...)
		}
		at += int64(len(line)) + 1
		data = rest
	}
	if len(data) != 0 {
		return nil, nil, corrupt(path, at, ErrFormat, "more than %d lines for %d records", n, n)
	}
	return blob, append(offs, uint64(len(blob))), nil
}
