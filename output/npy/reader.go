package npy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/packer-dev/packer/shard"
)

// Reader gives random access to an npy dataset: the records of images.npy, the labels, the
// auxiliary label columns and the metadata lines. Its methods are safe for concurrent use.
type Reader struct {
	dir      string
	m        *shard.Manifest
	images   *array
	labels   *array
	aux      map[string]*array
	n        int64
	rec      int64
	metaOnce sync.Once
	metaOffs []int64 // start of each meta.jsonl line, plus the end
	metaErr  error
}

// array is an open .npy file.
type array struct {
	name string
	f    *os.File
	hdr  Header
	off  int64
	elem int64 // bytes per first-axis entry
}

func openArray(dir, name string) (*array, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	h, off, err := ReadHeader(bufio.NewReaderSize(io.NewSectionReader(f, 0, MaxHeaderLen+16), 4096))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("npy: %s: %w", name, err)
	}
	es := int64(DescrSize(h.Descr))
	if es == 0 || h.Fortran || len(h.Shape) == 0 {
		f.Close()
		return nil, fmt.Errorf("npy: %s: dtype %s, fortran %v, shape %v: %w", name, h.Descr, h.Fortran, h.Shape, ErrFormat)
	}
	elem := es
	for _, d := range h.Shape[1:] {
		elem *= int64(d)
	}
	if elem > shard.MaxRecordSize {
		f.Close()
		return nil, fmt.Errorf("npy: %s: record of %d bytes over the limit: %w", name, elem, ErrFormat)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("npy: %w", err)
	}
	if ds := h.DataSize(); ds < 0 || st.Size() < off+ds {
		want := off + ds
		f.Close()
		return nil, fmt.Errorf("npy: %s: %d bytes, header %v %s needs %d: %w", name, st.Size(), h.Shape, h.Descr, want, ErrFormat)
	}
	return &array{name: name, f: f, hdr: h, off: off, elem: elem}, nil
}

// Open opens the npy dataset in dir through its manifest, checking that every file's header
// agrees with it. It does not check contents: that is verify's job.
func Open(dir string) (*Reader, error) {
	m, err := shard.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if m.Format != shard.FormatNPY {
		return nil, fmt.Errorf("npy: %s holds a %q dataset", dir, m.Format)
	}
	files, err := expected(m)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	r := &Reader{dir: dir, m: m, n: m.Count, rec: m.Sample.Size(), aux: map[string]*array{}}
	for i, ef := range files {
		a, err := openArray(dir, ef.name)
		if err != nil {
			r.Close()
			return nil, err
		}
		switch {
		case i == 0:
			r.images = a
		case i == 1:
			r.labels = a
		default:
			r.aux[m.Label.Aux[i-2]] = a
		}
		if a.hdr.Descr != ef.descr || !equalShape(a.hdr.Shape, ef.shape) {
			r.Close()
			return nil, fmt.Errorf("npy: %s: %s %v, manifest says %s %v: %w", ef.name, a.hdr.Descr, a.hdr.Shape, ef.descr, ef.shape, ErrFormat)
		}
	}
	return r, nil
}

// Manifest returns the dataset's manifest.
func (r *Reader) Manifest() *shard.Manifest { return r.m }

// Len returns the number of records.
func (r *Reader) Len() int64 { return r.n }

// Sample returns the spec of one record.
func (r *Reader) Sample() shard.SampleSpec { return r.m.Sample }

// RecordSize returns the byte size of one record.
func (r *Reader) RecordSize() int64 { return r.rec }

// Classes returns the class names.
func (r *Reader) Classes() []string { return r.m.Classes }

func (r *Reader) check(start, n int64) error {
	if start < 0 || n < 0 || start > r.n || n > r.n-start {
		return fmt.Errorf("npy: records [%d, %d) out of range [0, %d)", start, start+n, r.n)
	}
	return nil
}

// Read reads records [start, start+n) into dst, which must hold n*RecordSize() bytes.
func (r *Reader) Read(start, n int64, dst []byte) error {
	if err := r.check(start, n); err != nil {
		return err
	}
	if int64(len(dst)) != n*r.rec {
		return fmt.Errorf("npy: destination is %d bytes, want %d", len(dst), n*r.rec)
	}
	return readAt(r.images, start, dst)
}

func readAt(a *array, start int64, dst []byte) error {
	if _, err := a.f.ReadAt(dst, a.off+start*a.elem); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("npy: %s: %w", a.name, err)
	}
	return nil
}

// Record returns record i and its label.
func (r *Reader) Record(i int64) ([]byte, int64, error) {
	if err := r.check(i, 1); err != nil {
		return nil, 0, err
	}
	b := make([]byte, r.rec)
	if err := readAt(r.images, i, b); err != nil {
		return nil, 0, err
	}
	l, err := r.Labels(i, 1)
	if err != nil {
		return nil, 0, err
	}
	return b, l[0], nil
}

// Labels returns the labels of records [start, start+n).
func (r *Reader) Labels(start, n int64) ([]int64, error) { return r.ints(r.labels, start, n) }

// Aux returns the auxiliary label column name for records [start, start+n).
func (r *Reader) Aux(name string, start, n int64) ([]int64, error) {
	a, ok := r.aux[name]
	if !ok {
		return nil, fmt.Errorf("npy: no aux column %q", name)
	}
	return r.ints(a, start, n)
}

func (r *Reader) ints(a *array, start, n int64) ([]int64, error) {
	if err := r.check(start, n); err != nil {
		return nil, err
	}
	b := make([]byte, 8*n)
	if err := readAt(a, start, b); err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out, nil
}

// Meta returns record i's metadata line (nil when the dataset has no meta.jsonl). The first
// call indexes the file's lines.
func (r *Reader) Meta(i int64) ([]byte, error) {
	if err := r.check(i, 1); err != nil {
		return nil, err
	}
	r.metaOnce.Do(r.indexMeta)
	if r.metaErr != nil {
		return nil, r.metaErr
	}
	if r.metaOffs == nil {
		return nil, nil
	}
	f, err := os.Open(filepath.Join(r.dir, MetaFile))
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	defer f.Close()
	b := make([]byte, r.metaOffs[i+1]-r.metaOffs[i]-1)
	if _, err := f.ReadAt(b, r.metaOffs[i]); err != nil {
		return nil, fmt.Errorf("npy: %s: %w", MetaFile, err)
	}
	return b, nil
}

func (r *Reader) indexMeta() {
	f, err := os.Open(filepath.Join(r.dir, MetaFile))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		r.metaErr = fmt.Errorf("npy: %w", err)
		return
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	offs := []int64{0}
	var pos int64
	for int64(len(offs)) <= r.n {
		line, err := readLine(br)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			r.metaErr = fmt.Errorf("npy: %s: line %d: %w", MetaFile, len(offs), err)
			return
		}
		pos += int64(len(line)) + 1
		offs = append(offs, pos)
	}
	r.metaOffs = offs
}

// Close closes the files.
func (r *Reader) Close() error {
	var errs []error
	for _, a := range append([]*array{r.images, r.labels}, mapValues(r.aux)...) {
		if a != nil {
			errs = append(errs, a.f.Close())
		}
	}
	return errors.Join(errs...)
}

func mapValues(m map[string]*array) []*array {
	var out []*array
	for _, a := range m {
		out = append(out, a)
	}
	return out
}
