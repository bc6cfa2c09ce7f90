package npy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// File names of an npy dataset.
const (
	ImagesFile = "images.npy"
	LabelsFile = "labels.npy"
	MetaFile   = "meta.jsonl"
	AuxPrefix  = "aux_" // aux_<name>.npy per auxiliary label column
	tmpSuffix  = ".tmp"
	bufSize    = 4 << 20
	// LabelDescr is the NumPy type of labels and auxiliary labels: little-endian int64.
	LabelDescr = "<i8"
)

// Descr returns the NumPy type string of a sample element type, or "" for an unknown one.
func Descr(d shard.DType) string {
	switch d {
	case shard.Uint8:
		return "|u1"
	case shard.Float16:
		return "<f2"
	case shard.Float32:
		return "<f4"
	}
	return ""
}

// AuxFile returns the file name of an auxiliary label column.
func AuxFile(name string) string { return AuxPrefix + name + ".npy" }

// The files of a field (shard.Field): a fixed-size field's values in FieldFile ([N, ...shape]);
// a variable one's (an ndarray with a -1 first dimension, text, bytes, json) concatenated in
// FieldValuesFile ([total rows, ...shape[1:]] of an ndarray; the bytes, uint8, of the others)
// with FieldOffsetsFile (int64, N+1 entries, record i's values are rows offsets[i] to
// offsets[i+1]; in rows for an ndarray, in bytes otherwise; offsets[0] = 0).
func FieldFile(name string) string        { return name + ".npy" }
func FieldValuesFile(name string) string  { return name + ".values.npy" }
func FieldOffsetsFile(name string) string { return name + ".offsets.npy" }

// fieldDescr returns the NumPy type string of a field's elements: its dtype for an ndarray or
// image field, |u1 for the bytes of text, bytes and json.
func fieldDescr(f shard.Field) string {
	switch f.DType {
	case "int32":
		return "<i4"
	case "int64":
		return "<i8"
	case "float32":
		return "<f4"
	case "float64":
		return "<f8"
	}
	return "|u1"
}

// fieldFiles returns the file names of a field's layout, values first.
func fieldFiles(l output.FieldLayout) []string {
	if l.Fixed {
		return []string{FieldFile(l.Field.Name)}
	}
	return []string{FieldValuesFile(l.Field.Name), FieldOffsetsFile(l.Field.Name)}
}

// checkField is Entry's FieldCheck: every kind is held (an image field at the fixed sample's
// height and width); a field may not take the name of the sample's or the labels' file, and a
// variable ndarray's rows must have elements (the offsets count rows).
func checkField(f shard.Field) error {
	if f.Name == "images" || f.Name == "labels" {
		return fmt.Errorf("its file %s would be the dataset's own %s", FieldFile(f.Name), FieldFile(f.Name))
	}
	if f.Kind == shard.KindNDArray && len(f.Shape) > 0 && f.Shape[0] == -1 && slices.Contains(f.Shape[1:], 0) {
		return fmt.Errorf("shape %v: a row of no elements cannot be counted in %s", f.Shape, FieldOffsetsFile(f.Name))
	}
	return nil
}

// fieldColumns is one field's files being written.
type fieldColumns struct {
	l       output.FieldLayout
	values  *column // FieldFile or FieldValuesFile
	offsets *column // FieldOffsetsFile; nil for a fixed field
	rows    int64   // rows in values (variable fields)
}

// checkAuxName accepts names that make safe, portable file names.
func checkAuxName(a string) error {
	if a == "" || len(a) > 64 {
		return fmt.Errorf("npy: aux column name %q must have 1 to 64 characters", a)
	}
	for _, c := range a {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("npy: aux column name %q: only letters, digits, _ and - are allowed", a)
		}
	}
	return nil
}

// column is one .npy file being written: a reserved header, then the elements.
type column struct {
	name   string            // final file name
	final  string            // final path
	p      *fileutil.Pending // the file under its temporary name (fileutil.Create)
	f      *os.File          // p's file, nil once committed
	w      *bufio.Writer
	descr  string
	sample []int // shape of one record (empty for labels)
	hlen   int   // reserved header size
}

func newColumn(dir, name, descr string, sample []int) (*column, error) {
	hdr, err := reservedHeader(descr, sample)
	if err != nil {
		return nil, err
	}
	c := &column{name: name, descr: descr, sample: sample, hlen: len(hdr)}
	if err := c.create(dir); err != nil {
		return nil, err
	}
	size := bufSize
	if len(sample) == 0 {
		size = 64 << 10
	}
	c.w = bufio.NewWriterSize(c.f, size)
	if _, err := c.w.Write(hdr); err != nil {
		return c, fmt.Errorf("npy: %s: %w", name, err)
	}
	return c, nil
}

// create creates the column's file under its temporary name.
func (c *column) create(dir string) error {
	c.final = filepath.Join(dir, c.name)
	p, err := fileutil.Create(dir, c.name, false)
	if err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	c.p, c.f = p, p.File()
	return nil
}

// finish writes the final header for n records, syncs and closes the file, re-reads it to
// check the header and compute its SHA-256, and renames it to its final name.
func (c *column) finish(n int64) (shard.FileEntry, error) {
	if err := c.w.Flush(); err != nil {
		return shard.FileEntry{}, fmt.Errorf("npy: %s: %w", c.name, err)
	}
	shape := make([]int64, 1+len(c.sample))
	shape[0] = n
	for i, d := range c.sample {
		shape[i+1] = int64(d)
	}
	hdr, err := headerFor(c.descr, shape, c.hlen)
	if err != nil {
		return shard.FileEntry{}, err
	}
	if _, err := c.f.WriteAt(hdr, 0); err != nil {
		return shard.FileEntry{}, fmt.Errorf("npy: %s: %w", c.name, err)
	}
	// The SHA-256 covers the final header, which is only known now, so the file is read back
	// once, after the sync: that also proves the header parses and the size is what was written.
	var size int64
	h := sha256.New()
	c.f = nil // Commit closes it on every path
	err = c.p.Commit(func(f *os.File) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		br := bufio.NewReaderSize(io.TeeReader(f, h), 64<<10)
		got, off, err := ReadHeader(br)
		if err != nil {
			return fmt.Errorf("header just written does not parse: %w", err)
		}
		if got.Descr != c.descr || got.Fortran || !equalShape(got.Shape, shape) || off != int64(c.hlen) {
			return fmt.Errorf("header just written reads back as %+v", got)
		}
		if _, err := io.CopyBuffer(io.Discard, br, make([]byte, bufSize)); err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		if size, err = f.Seek(0, io.SeekCurrent); err != nil {
			return err
		}
		if want := int64(c.hlen) + got.DataSize(); size != want {
			return fmt.Errorf("file is %d bytes after writing, want %d", size, want)
		}
		return nil
	})
	if err != nil {
		return shard.FileEntry{}, fmt.Errorf("npy: %s: %w", c.name, err)
	}
	return shard.FileEntry{Path: c.name, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func equalShape(a []int, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if int64(a[i]) != b[i] {
			return false
		}
	}
	return true
}

func (c *column) abort() {
	if c.p != nil {
		c.p.Abort()
	}
	c.f = nil
	os.Remove(c.final)
}

// Writer is a output.Output that writes images.npy, labels.npy, one aux_<name>.npy per
// auxiliary label column and, when records carry metadata, meta.jsonl (one JSON value per
// line, "null" for a record without metadata).
//
// Call order: Write* (Close | Abort). A Writer is not safe for concurrent use. After an
// error, every later Write and Close returns the same error.
type Writer struct {
	cfg     output.Config
	recSize int64
	images  *column
	labels  *column
	aux     []*column
	meta    *column // meta.jsonl: no header, but the same temp-then-rename life
	fields  []*fieldColumns
	metaBuf bytes.Buffer
	n       int64
	err     error
	done    bool
	scratch [8]byte
}

var _ output.Output = (*Writer)(nil)

// Entry is the output format entry of --format npy, for the command's table of formats.
var Entry = output.Entry{
	Name:       shard.FormatNPY,
	New:        New,
	Check:      Check,
	FixedShape: true,
	Version:    Version,
	Open:       open,
	FieldCheck: checkField,
}

// Version is the manifest's format_version of an npy dataset: 1, whatever the spec (an npy
// dataset holds fixed-shape records only).
func Version(shard.SampleSpec) int { return 1 }

// Format reports the format name and version for the manifest.
func (w *Writer) Format() (string, int) { return shard.FormatNPY, Version(w.cfg.Sample) }

// New creates the files of an npy dataset in cfg.Dir. The sample spec must be fixed-size:
// .npy holds one [N, ...] array.
func New(cfg output.Config) (output.Output, error) {
	return NewWriter(cfg)
}

// NewWriter is New with the concrete type.
func NewWriter(cfg output.Config) (*Writer, error) {
	if err := cfg.Sample.Validate(); err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	if !cfg.Sample.Fixed() {
		return nil, fmt.Errorf("npy: records of shape %v vary in size; .npy holds one fixed-shape array (use --format shards)", cfg.Sample.Shape)
	}
	descr := Descr(cfg.Sample.DType)
	if descr == "" {
		return nil, fmt.Errorf("npy: unsupported dtype %q", cfg.Sample.DType)
	}
	if cfg.Label.DType != "" && cfg.Label.DType != "int64" {
		return nil, fmt.Errorf("npy: unsupported label dtype %q (want int64)", cfg.Label.DType)
	}
	seen := map[string]bool{}
	for _, a := range cfg.Label.Aux {
		if err := checkAuxName(a); err != nil {
			return nil, err
		}
		if seen[a] {
			return nil, fmt.Errorf("npy: aux column %q repeated", a)
		}
		seen[a] = true
	}
	w := &Writer{cfg: cfg, recSize: cfg.Sample.Size()}
	fail := func(err error) (*Writer, error) {
		w.Abort()
		return nil, err
	}
	var err error
	if w.images, err = newColumn(cfg.Dir, ImagesFile, descr, cfg.Sample.Shape); err != nil {
		return fail(err)
	}
	if w.labels, err = newColumn(cfg.Dir, LabelsFile, LabelDescr, nil); err != nil {
		return fail(err)
	}
	for _, a := range cfg.Label.Aux {
		c, err := newColumn(cfg.Dir, AuxFile(a), LabelDescr, nil)
		if c != nil {
			w.aux = append(w.aux, c)
		}
		if err != nil {
			return fail(err)
		}
	}
	if cfg.HasMeta {
		c := &column{name: MetaFile}
		if err := c.create(cfg.Dir); err != nil {
			return fail(err)
		}
		c.w = bufio.NewWriterSize(c.f, 256<<10)
		w.meta = c
	}
	if err := w.createFields(seen); err != nil {
		return fail(err)
	}
	return w, nil
}

// createFields creates the files of cfg.Fields; aux holds the aux columns' names, whose files a
// field's may not take.
func (w *Writer) createFields(aux map[string]bool) error {
	layouts, err := output.FieldLayouts(w.cfg.Fields, w.cfg.Sample)
	if err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	for _, l := range layouts {
		if err := checkField(l.Field); err != nil {
			return fmt.Errorf("npy: field %q: %w", l.Field.Name, err)
		}
		if a, ok := strings.CutPrefix(l.Field.Name, AuxPrefix); ok && aux[a] {
			return fmt.Errorf("npy: field %q: its file %s is the aux column %q's", l.Field.Name, FieldFile(l.Field.Name), a)
		}
		fc := &fieldColumns{l: l}
		w.fields = append(w.fields, fc)
		descr := fieldDescr(l.Field)
		if l.Fixed {
			fc.values, err = newColumn(w.cfg.Dir, FieldFile(l.Field.Name), descr, l.Shape)
			if err != nil {
				return err
			}
			continue
		}
		var row []int // a row's shape: shape[1:] of an ndarray, one byte of the others
		if len(l.Shape) > 0 {
			row = l.Shape[1:]
		}
		if fc.values, err = newColumn(w.cfg.Dir, FieldValuesFile(l.Field.Name), descr, row); err != nil {
			return err
		}
		if fc.offsets, err = newColumn(w.cfg.Dir, FieldOffsetsFile(l.Field.Name), LabelDescr, nil); err != nil {
			return err
		}
		if err := w.putInt(fc.offsets, 0); err != nil {
			return err
		}
	}
	return nil
}

// writeFields appends record r's field values.
func (w *Writer) writeFields(r output.Record) error {
	if len(r.Fields) != len(w.fields) {
		return fmt.Errorf("npy: record %d has %d field values, want %d", w.n, len(r.Fields), len(w.fields))
	}
	for k, fc := range w.fields {
		v := r.Fields[k]
		if err := fc.l.Check(v); err != nil {
			return fmt.Errorf("npy: record %d: %w", w.n, err)
		}
		if _, err := fc.values.w.Write(v); err != nil {
			return fmt.Errorf("npy: %s: %w", fc.values.name, err)
		}
		if fc.offsets != nil {
			fc.rows += int64(len(v) / fc.l.RowBytes)
			if err := w.putInt(fc.offsets, fc.rows); err != nil {
				return err
			}
		}
	}
	return nil
}

// Write appends one record. r.Data is not kept after Write returns.
func (w *Writer) Write(r output.Record) error {
	if w.done {
		panic("npy: Write after Close or Abort")
	}
	if w.err != nil {
		return w.err
	}
	if int64(len(r.Data)) != w.recSize {
		return w.fail(fmt.Errorf("npy: record %d has %d bytes, want %d for shape %v %s", w.n, len(r.Data), w.recSize, w.cfg.Sample.Shape, w.cfg.Sample.DType))
	}
	if len(r.Aux) != len(w.aux) {
		return w.fail(fmt.Errorf("npy: record %d has %d aux labels, want %d", w.n, len(r.Aux), len(w.aux)))
	}
	if w.meta == nil && len(r.Meta) > 0 {
		return w.fail(fmt.Errorf("npy: record %d carries metadata but the output was created without HasMeta", w.n))
	}
	if _, err := w.images.w.Write(r.Data); err != nil {
		return w.fail(fmt.Errorf("npy: %s: %w", ImagesFile, err))
	}
	if err := w.putInt(w.labels, r.Label); err != nil {
		return w.fail(err)
	}
	for i, c := range w.aux {
		if err := w.putInt(c, r.Aux[i]); err != nil {
			return w.fail(err)
		}
	}
	if w.meta != nil {
		w.metaBuf.Reset()
		if len(r.Meta) == 0 {
			w.metaBuf.WriteString("null")
		} else if err := json.Compact(&w.metaBuf, r.Meta); err != nil {
			return w.fail(fmt.Errorf("npy: record %d: metadata is not valid JSON: %w", w.n, err))
		}
		w.metaBuf.WriteByte('\n')
		if _, err := w.meta.w.Write(w.metaBuf.Bytes()); err != nil {
			return w.fail(fmt.Errorf("npy: %s: %w", MetaFile, err))
		}
	}
	if len(w.fields) > 0 || len(r.Fields) > 0 {
		if err := w.writeFields(r); err != nil {
			return w.fail(err)
		}
	}
	w.n++
	return nil
}

func (w *Writer) putInt(c *column, v int64) error {
	binary.LittleEndian.PutUint64(w.scratch[:], uint64(v))
	if _, err := c.w.Write(w.scratch[:]); err != nil {
		return fmt.Errorf("npy: %s: %w", c.name, err)
	}
	return nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// Len returns the number of records written so far.
func (w *Writer) Len() int64 { return w.n }

// Close finishes every file: final header, sync, read back for the SHA-256, rename to the
// final name, then a sync of the directory. It returns the files in the order images.npy,
// labels.npy, aux_<name>.npy (in column order), meta.jsonl, then the fields' files in schema
// order (NAME.npy, or NAME.values.npy and NAME.offsets.npy). On error, everything written is
// removed.
func (w *Writer) Close() ([]shard.FileEntry, error) {
	if w.done {
		panic("npy: Close after Close or Abort")
	}
	if w.err != nil {
		w.Abort()
		return nil, w.err
	}
	var files []shard.FileEntry
	cols := append([]*column{w.images, w.labels}, w.aux...)
	for _, c := range cols {
		fe, err := c.finish(w.n)
		if err != nil {
			w.err = err
			w.Abort()
			return nil, err
		}
		files = append(files, fe)
	}
	if w.meta != nil {
		fe, err := w.finishMeta()
		if err != nil {
			w.err = err
			w.Abort()
			return nil, err
		}
		files = append(files, fe)
	}
	for _, fc := range w.fields {
		counts := []int64{w.n}
		if fc.offsets != nil {
			counts = []int64{fc.rows, w.n + 1}
		}
		for j, c := range []*column{fc.values, fc.offsets}[:len(counts)] {
			fe, err := c.finish(counts[j])
			if err != nil {
				w.err = err
				w.Abort()
				return nil, err
			}
			files = append(files, fe)
		}
	}
	if err := fileutil.SyncDir(w.cfg.Dir); err != nil {
		w.err = fmt.Errorf("npy: %w", err)
		w.Abort()
		return nil, w.err
	}
	w.done = true
	return files, nil
}

func (w *Writer) finishMeta() (shard.FileEntry, error) {
	c := w.meta
	if err := c.w.Flush(); err != nil {
		return shard.FileEntry{}, fmt.Errorf("npy: %s: %w", c.name, err)
	}
	var size int64
	h := sha256.New()
	c.f = nil // Commit closes it on every path
	err := c.p.Commit(func(f *os.File) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		var err error
		if size, err = io.CopyBuffer(h, f, make([]byte, 256<<10)); err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		return nil
	})
	if err != nil {
		return shard.FileEntry{}, fmt.Errorf("npy: %s: %w", c.name, err)
	}
	return shard.FileEntry{Path: c.name, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Abort closes and removes every file written, under its temporary or final name.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	cols := append([]*column{w.images, w.labels, w.meta}, w.aux...)
	for _, fc := range w.fields {
		cols = append(cols, fc.values, fc.offsets)
	}
	for _, c := range cols {
		if c != nil {
			c.abort()
		}
	}
}
