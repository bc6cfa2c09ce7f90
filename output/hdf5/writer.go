package hdf5

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// writer is the output.Output of --format hdf5. Its grammar is New Write* (Close | Abort).
type writer struct {
	cfg output.Config
	tmp string            // Dir/data.h5.tmp, renamed to Dir/data.h5 by Close
	p   *fileutil.Pending // tmp, created through fileutil.Create; libhdf5 writes it through its own handle

	f      *handle
	images *column
	labels *column
	aux    []*column
	meta   *strColumn
	fields []*fieldColumn // cfg.Fields, in schema order

	n      int64 // records written
	err    error // first error; returned by every later call
	closed bool
}

// rowBuffer is what a column buffers between the writes of its dataset: rows rows in buf, and
// the rows already in the file.
type rowBuffer struct {
	name      string
	ds        *handle
	chunkRows int
	buf       []byte
	rows      int   // rows in buf
	written   int64 // rows already in the file
}

// flushWith writes the buffered rows with write (writeRows, writeStrings) and empties the buffer.
func (c *rowBuffer) flushWith(write func(ds *handle, start, n int64, buf []byte) error) error {
	if c.rows == 0 {
		return nil
	}
	if err := write(c.ds, c.written, int64(c.rows), c.buf); err != nil {
		return fmt.Errorf("/%s: %w", c.name, err)
	}
	c.written += int64(c.rows)
	c.rows = 0
	c.buf = c.buf[:0]
	return nil
}

// column buffers whole chunks of rows of one fixed-size dataset and writes each as one hyperslab.
type column struct {
	rowBuffer
	rowBytes int
}

// strColumn buffers variable-length strings (record metadata, text and json fields)
// NUL-terminated, back to back.
type strColumn struct{ rowBuffer }

// Format is the format's name: --format hdf5, the manifest's "format".
const Format = "hdf5"

// Entry is the output format entry of --format hdf5, for the command's table of formats.
var Entry = output.Entry{
	Name:       Format,
	New:        New,
	Check:      CheckStructure,
	FixedShape: true,
	Version:    Version,
	Open:       open,
	FieldCheck: checkField,
}

// Version is the manifest's format_version of an HDF5 dataset: 1, whatever the spec (an HDF5
// dataset holds fixed-shape records only).
func Version(shard.SampleSpec) int { return 1 }

// Format reports the format name and version for the manifest.
func (w *writer) Format() (string, int) { return Format, Version(w.cfg.Sample) }

// New creates Dir/data.h5 (under a temporary name until Close) for records of cfg.Sample.
// Samples must have a fixed shape: HDF5 datasets are rectangular.
func New(cfg output.Config) (output.Output, error) {
	if err := cfg.Sample.Validate(); err != nil {
		return nil, fmt.Errorf("hdf5: %w", err)
	}
	if !cfg.Sample.Fixed() {
		return nil, fmt.Errorf("hdf5: samples of varying shape %v cannot be stored in one rectangular dataset (use --format shards)", cfg.Sample.Shape)
	}
	if cfg.Label.DType != "" && cfg.Label.DType != "int64" {
		return nil, fmt.Errorf("hdf5: label dtype %q is not supported (int64 only)", cfg.Label.DType)
	}
	for _, a := range cfg.Label.Aux {
		if err := checkAuxName(a); err != nil {
			return nil, err
		}
	}
	if err := Load(); err != nil {
		return nil, fmt.Errorf("hdf5: %s: %w", cfg.Dir, err)
	}
	w := &writer{
		cfg: cfg,
		tmp: filepath.Join(cfg.Dir, DataFile+".tmp"),
	}
	if err := lib(w.create); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

func checkAuxName(a string) error {
	if a == "" || a == "." || a == ".." || strings.ContainsAny(a, "/\x00") {
		return fmt.Errorf("hdf5: auxiliary label name %q cannot be a dataset name", a)
	}
	return nil
}

// Chunk sizes. Every dataset is chunked along axis 0 only, so a chunk is a run of whole records:
// an image chunk is as many records as fit in ChunkBytes (at least one), an int64 column chunk is
// 8192 labels (64 KiB), and a metadata chunk is 4096 strings (64 KiB of heap references).
const (
	ChunkBytes     = 1 << 20
	labelChunkRows = 8192
	metaChunkRows  = 4096
)

// imageChunkRows returns the number of records per /images chunk for records of size rec bytes.
func imageChunkRows(rec int64) int {
	if rec >= ChunkBytes {
		return 1
	}
	return int(ChunkBytes / rec)
}

func (w *writer) create() error {
	p, err := fileutil.Create(w.cfg.Dir, DataFile, false)
	if err != nil {
		return fmt.Errorf("hdf5: %w", err)
	}
	w.p = p
	f, err := createFile(w.tmp)
	if err != nil {
		return fmt.Errorf("hdf5: create %s: %w", w.tmp, h5error("H5Fcreate", err))
	}
	w.f = f
	if err := fileSetup(f); err != nil {
		return fmt.Errorf("hdf5: %s: %w", w.tmp, err)
	}

	attrs := []struct {
		name string
		v    any
	}{
		{"format", FormatName},
		{"classes", nonNil(w.cfg.Classes)},
		{"sample", w.cfg.Sample},
		{"label", labelSpec(w.cfg.Label)},
		{"spec", w.cfg.Meta},
	}
	for _, a := range attrs {
		s, ok := a.v.(string)
		if !ok {
			b, err := marshal(a.v)
			if err != nil {
				return fmt.Errorf("hdf5: attribute %s: %w", a.name, err)
			}
			s = string(b)
		}
		if err := setStrAttr(f.ID(), a.name, s); err != nil {
			return fmt.Errorf("hdf5: %s: %w", w.tmp, err)
		}
	}

	rec := w.cfg.Sample.Size()
	elem, err := imageType(w.cfg.Sample.DType)
	if err != nil {
		return err
	}
	defer elem.Close()
	shape := make([]uint64, len(w.cfg.Sample.Shape))
	for i, d := range w.cfg.Sample.Shape {
		shape[i] = uint64(d)
	}
	w.images, err = w.newColumn(ImagesName, elem, shape, int(rec), imageChunkRows(rec))
	if err != nil {
		return err
	}
	i64, err := copyType(typeI64LE)
	if err != nil {
		return fmt.Errorf("hdf5: datatype: %w", h5error("H5Tcopy", err))
	}
	defer i64.Close()
	w.labels, err = w.newColumn(LabelsName, i64, nil, 8, labelChunkRows)
	if err != nil {
		return err
	}
	if len(w.cfg.Label.Aux) > 0 {
		g, err := createGroup(f, AuxGroup)
		if err != nil {
			return fmt.Errorf("hdf5: %s: %w", w.tmp, err)
		}
		g.Close()
		for _, a := range w.cfg.Label.Aux {
			c, err := w.newColumn(AuxGroup+"/"+a, i64, nil, 8, labelChunkRows)
			if err != nil {
				return err
			}
			w.aux = append(w.aux, c)
		}
	}
	if w.cfg.HasMeta {
		st, err := copyType(typeCS1)
		if err != nil {
			return fmt.Errorf("hdf5: string type: %w", h5error("H5Tcopy", err))
		}
		defer st.Close()
		if err := makeVlenUTF8(st); err != nil {
			return fmt.Errorf("hdf5: %w", err)
		}
		ds, err := w.createDataset(MetaName, st, nil, metaChunkRows, false)
		if err != nil {
			return err
		}
		w.meta = &strColumn{rowBuffer{name: MetaName, ds: ds, chunkRows: metaChunkRows}}
	}
	return w.createFields()
}

// imageType returns the HDF5 file type for a sample dtype; the caller closes it.
func imageType(d shard.DType) (*handle, error) {
	var base int
	switch d {
	case shard.Uint8:
		base = typeU8LE
	case shard.Float16, shard.Float32:
		base = typeF32LE
	default:
		return nil, fmt.Errorf("hdf5: unsupported dtype %q", d)
	}
	t, err := copyType(base)
	if err != nil {
		return nil, fmt.Errorf("hdf5: datatype: %w", h5error("H5Tcopy", err))
	}
	if d == shard.Float16 {
		if err := makeFloat16(t); err != nil {
			t.Close()
			return nil, fmt.Errorf("hdf5: %w", err)
		}
	}
	return t, nil
}

// createDataset makes an empty dataset [0, shape...] with an unlimited first axis, chunked by
// chunkRows records, with no object times and (fill) a zero fill value.
func (w *writer) createDataset(name string, t *handle, shape []uint64, chunkRows int, fill bool) (*handle, error) {
	dimsNow := append([]uint64{0}, shape...)
	maxDims := append([]uint64{unlimDim}, shape...) // H5S_UNLIMITED on axis 0
	chunk := append([]uint64{uint64(chunkRows)}, shape...)
	space, err := createSimpleSpace(dimsNow, maxDims)
	if err != nil {
		return nil, fmt.Errorf("hdf5: dataspace for %s: %w", name, h5error("H5Screate_simple", err))
	}
	defer space.Close()
	dcpl, err := newPropList(plistDCPL)
	if err != nil {
		return nil, fmt.Errorf("hdf5: %w", h5error("H5Pcreate", err))
	}
	defer dcpl.Close()
	if err := setChunk(dcpl, chunk); err != nil {
		return nil, fmt.Errorf("hdf5: chunk %v for %s: %w", chunk, name, h5error("H5Pset_chunk", err))
	}
	var fillType *handle // nil: no fill value
	if fill {
		fillType = t
	}
	if err := dcplSetup(dcpl, fillType); err != nil {
		return nil, fmt.Errorf("hdf5: %s: %w", name, err)
	}
	ds, err := createDataset(w.f, name, t, space, dcpl)
	if err != nil {
		return nil, fmt.Errorf("hdf5: %s: create dataset /%s: %w", w.tmp, name, h5error("H5Dcreate2", err))
	}
	return ds, nil
}

func (w *writer) newColumn(name string, t *handle, shape []uint64, rowBytes, chunkRows int) (*column, error) {
	ds, err := w.createDataset(name, t, shape, chunkRows, true)
	if err != nil {
		return nil, err
	}
	return &column{rowBuffer{name: name, ds: ds, chunkRows: chunkRows}, rowBytes}, nil
}

// add appends one row; the caller flushes when full reports true.
func (c *column) add(row []byte) (full bool) {
	if c.buf == nil {
		c.buf = make([]byte, 0, c.rowBytes*c.chunkRows)
	}
	c.buf = append(c.buf, row...)
	c.rows++
	return c.rows == c.chunkRows
}

func (c *column) flush() error { return c.flushWith(writeRows) }

func (c *strColumn) add(s []byte) (full bool) {
	c.buf = append(c.buf, s...)
	c.buf = append(c.buf, 0)
	c.rows++
	return c.rows == c.chunkRows
}

func (c *strColumn) flush() error { return c.flushWith(writeStrings) }

// Write appends one record. Records are buffered and written a whole chunk at a time.
func (w *writer) Write(r output.Record) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("hdf5: Write after Close")
	}
	if int64(len(r.Data)) != w.cfg.Sample.Size() {
		return fmt.Errorf("hdf5: record %d: %d bytes, want %d for shape %v %s", w.n, len(r.Data), w.cfg.Sample.Size(), w.cfg.Sample.Shape, w.cfg.Sample.DType)
	}
	if len(r.Aux) != len(w.aux) {
		return fmt.Errorf("hdf5: record %d: %d auxiliary labels, want %d", w.n, len(r.Aux), len(w.aux))
	}
	if w.meta == nil && len(r.Meta) > 0 {
		return fmt.Errorf("hdf5: record %d carries metadata but the output was created without HasMeta", w.n)
	}
	if w.meta != nil && bytes.IndexByte(r.Meta, 0) >= 0 {
		return fmt.Errorf("hdf5: record %d: metadata contains a NUL byte", w.n)
	}
	if len(w.fields) > 0 || len(r.Fields) > 0 {
		if err := w.checkFieldValues(r); err != nil {
			return fmt.Errorf("hdf5: record %d: %w", w.n, err)
		}
	}
	w.err = lib(func() error {
		if w.images.add(r.Data) {
			if err := w.images.flush(); err != nil {
				return err
			}
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(r.Label))
		if w.labels.add(b[:]) {
			if err := w.labels.flush(); err != nil {
				return err
			}
		}
		for i, c := range w.aux {
			binary.LittleEndian.PutUint64(b[:], uint64(r.Aux[i]))
			if c.add(b[:]) {
				if err := c.flush(); err != nil {
					return err
				}
			}
		}
		if w.meta != nil && w.meta.add(r.Meta) {
			if err := w.meta.flush(); err != nil {
				return err
			}
		}
		for k, fc := range w.fields {
			if err := fc.add(r.Fields[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if w.err != nil {
		w.err = fmt.Errorf("hdf5: %s: record %d: %w", w.tmp, w.n, w.err)
		return w.err
	}
	w.n++
	return nil
}

// Close writes the buffered records, closes the file, checks its structure, syncs it, renames it
// to data.h5 and returns its manifest entry.
func (w *writer) Close() ([]shard.FileEntry, error) {
	if w.err != nil {
		w.Abort()
		return nil, w.err
	}
	if w.closed {
		return nil, errors.New("hdf5: Close called twice")
	}
	w.closed = true
	err := lib(func() error {
		var errs []error
		for _, c := range append([]*column{w.images, w.labels}, w.aux...) {
			errs = append(errs, c.flush())
		}
		if w.meta != nil {
			errs = append(errs, w.meta.flush())
		}
		for _, fc := range w.fields {
			errs = append(errs, fc.flush())
		}
		return errors.Join(append(errs, w.closeHandles())...)
	})
	if err != nil {
		w.err = fmt.Errorf("hdf5: %s: %w", w.tmp, err)
		w.Abort()
		return nil, w.err
	}
	exp := expect{count: w.n, sample: w.cfg.Sample, aux: w.cfg.Label.Aux, meta: w.cfg.HasMeta, fields: w.cfg.Fields}
	if errs := checkFile(w.tmp, exp); len(errs) > 0 {
		w.err = fmt.Errorf("hdf5: file just written fails its check: %w", errors.Join(errs...))
		w.Abort()
		return nil, w.err
	}
	entry, err := w.commit()
	if err != nil {
		w.err = fmt.Errorf("hdf5: %w", err)
		w.Abort()
		return nil, w.err
	}
	entry.Records = w.n
	return []shard.FileEntry{entry}, nil
}

// closeHandles closes every dataset and the file; it runs inside lib.
func (w *writer) closeHandles() error {
	var errs []error
	cols := append([]*column{w.images, w.labels}, w.aux...)
	for _, c := range cols {
		if c != nil && c.ds != nil {
			if err := c.ds.Close(); err != nil {
				errs = append(errs, h5error("close /"+c.name, err))
			}
			c.ds = nil
		}
	}
	if w.meta != nil && w.meta.ds != nil {
		if err := w.meta.ds.Close(); err != nil {
			errs = append(errs, h5error("close /"+MetaName, err))
		}
		w.meta.ds = nil
	}
	for _, fc := range w.fields {
		if ds := fc.dataset(); *ds != nil {
			if err := (*ds).Close(); err != nil {
				errs = append(errs, h5error("close /"+fc.l.Field.Name, err))
			}
			*ds = nil
		}
	}
	if w.f != nil {
		if err := w.f.Close(); err != nil {
			errs = append(errs, h5error("close file", err))
		}
		w.f = nil
	}
	return errors.Join(errs...)
}

// Abort closes the file and removes it. It is safe to call at any time, more than once.
func (w *writer) Abort() {
	_ = lib(w.closeHandles)
	w.closed = true
	if w.err == nil {
		w.err = errors.New("hdf5: output aborted")
	}
	if w.p != nil {
		w.p.Abort()
	} else {
		_ = os.Remove(w.tmp)
	}
}

// commit syncs the finished file (through the handle fileutil.Create opened; libhdf5 has closed
// its own), renames it to data.h5, syncs the directory (fileutil.Pending.Commit, then fileutil.SyncDir)
// and returns its manifest entry.
func (w *writer) commit() (shard.FileEntry, error) {
	h := sha256.New()
	var size int64
	err := w.p.Commit(func(f *os.File) error {
		var err error
		if _, err = f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if size, err = io.Copy(h, f); err != nil {
			return fmt.Errorf("read back %s: %w", w.tmp, err)
		}
		return nil
	})
	if err != nil {
		return shard.FileEntry{}, err
	}
	if err := fileutil.SyncDir(w.cfg.Dir); err != nil {
		return shard.FileEntry{}, err
	}
	return shard.FileEntry{Path: DataFile, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// marshal encodes v as compact JSON with sorted map keys and no HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func labelSpec(l shard.LabelSpec) shard.LabelSpec {
	if l.DType == "" {
		l.DType = "int64"
	}
	l.Aux = nonNil(l.Aux)
	return l
}
