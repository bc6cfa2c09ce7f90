package npy

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// open is the reader half of Entry: the shard package reads an npy dataset (images.npy as one
// shard holding every record; the one Go npy reader), and a record's information is given as
// packer inspect has always shown an npy record: its label and its meta.jsonl line ("null" for a
// record without metadata, where the dataset has metadata), the aux columns left out. The
// fields' files are read here (Fields).
func open(loc string, fsys shard.FS, m *shard.Manifest) (output.Dataset, error) {
	d, err := output.OpenShardDataset(loc, fsys, m)
	if err != nil {
		return nil, err
	}
	ds := &dataset{Dataset: d, meta: hasMeta(m)}
	if len(m.Fields) > 0 {
		if ds.fields, err = openFields(fsys, m); err != nil {
			ds.Close()
			return nil, fmt.Errorf("%s: %w", loc, err)
		}
	}
	return ds, nil
}

type dataset struct {
	output.Dataset
	meta   bool          // the dataset has meta.jsonl
	fields []fieldArrays // the manifest's fields, in schema order
}

// fieldArrays is one field's open files: values, and for a variable field its offsets.
type fieldArrays struct {
	l       output.FieldLayout
	values  array
	offsets array // f nil for a fixed field
}

// array is an open .npy file whose header was checked: its data starts at off and holds rows
// rows of rowBytes bytes.
type array struct {
	name     string
	f        shard.File
	off      int64
	rows     int64
	rowBytes int64
}

func (d *dataset) Info(i int64) (output.RecordInfo, error) {
	ri, err := d.Dataset.Info(i)
	ri.Aux = nil
	if err == nil && d.meta && len(ri.Meta) == 0 {
		ri.Meta = []byte("null")
	}
	return ri, err
}

func hasMeta(m *shard.Manifest) bool {
	for _, f := range m.Files {
		if f.Path == MetaFile {
			return true
		}
	}
	return false
}

// openFields opens the files of m's fields and checks their headers against the manifest.
func openFields(fsys shard.FS, m *shard.Manifest) ([]fieldArrays, error) {
	layouts, err := output.FieldLayouts(m.Fields, m.Sample)
	if err != nil {
		return nil, err
	}
	var out []fieldArrays
	closeAll := func() {
		for _, ff := range out {
			ff.values.close()
			ff.offsets.close()
		}
	}
	for _, l := range layouts {
		ff := fieldArrays{l: l}
		var row []int
		if l.Fixed {
			row = l.Shape
		} else if len(l.Shape) > 0 {
			row = l.Shape[1:]
		}
		names := fieldFiles(l)
		ff.values, err = openArray(fsys, names[0], fieldDescr(l.Field), row, -1)
		if err == nil && l.Fixed && ff.values.rows != m.Count {
			err = fmt.Errorf("%s: %d rows, manifest says %d records: %w", names[0], ff.values.rows, m.Count, ErrFormat)
		}
		if err == nil && !l.Fixed {
			ff.offsets, err = openArray(fsys, names[1], LabelDescr, nil, m.Count+1)
		}
		out = append(out, ff)
		if err != nil {
			closeAll()
			return nil, err
		}
	}
	return out, nil
}

// openArray opens the .npy file name and checks that it holds rows of the given shape and type
// (rows rows, or any number when rows is -1) and no more or fewer bytes.
func openArray(fsys shard.FS, name, descr string, row []int, rows int64) (array, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return array{}, fmt.Errorf("%s: %w", name, err)
	}
	h, off, err := ReadHeader(io.NewSectionReader(f, 0, f.Size()))
	a := array{name: name, f: f, off: off, rowBytes: int64(DescrSize(descr))}
	for _, d := range row {
		a.rowBytes *= int64(d)
	}
	switch {
	case err != nil:
	case h.Descr != descr || h.Fortran || len(h.Shape) != 1+len(row) || !equalShape(h.Shape[1:], toInt64(row)):
		err = fmt.Errorf("%s: array %s %v, want %s [N, %v]: %w", name, h.Descr, h.Shape, descr, row, ErrFormat)
	case rows >= 0 && int64(h.Shape[0]) != rows:
		err = fmt.Errorf("%s: %d rows, want %d: %w", name, h.Shape[0], rows, ErrFormat)
	case h.DataSize() < 0 || off+h.DataSize() != f.Size():
		err = fmt.Errorf("%s: %d bytes, header %v %s needs %d: %w", name, f.Size(), h.Shape, h.Descr, off+h.DataSize(), ErrFormat)
	}
	if err != nil {
		f.Close()
		return array{}, fmt.Errorf("%s: %w", name, err)
	}
	a.rows = int64(h.Shape[0])
	return a, nil
}

func toInt64(d []int) []int64 {
	out := make([]int64, len(d))
	for i, v := range d {
		out[i] = int64(v)
	}
	return out
}

func (a array) close() {
	if a.f != nil {
		a.f.Close()
	}
}

// read reads rows [start, end) of a.
func (a array) read(start, end int64) ([]byte, error) {
	if start < 0 || end < start || end > a.rows {
		return nil, fmt.Errorf("%s: rows [%d, %d) out of range [0, %d): %w", a.name, start, end, a.rows, ErrFormat)
	}
	b := make([]byte, (end-start)*a.rowBytes)
	if _, err := a.f.ReadAt(b, a.off+start*a.rowBytes); err != nil {
		return nil, fmt.Errorf("%s: %w", a.name, err)
	}
	return b, nil
}

// Fields reads record i's field values from the fields' files: a fixed field's row i, a
// variable field's rows offsets[i] to offsets[i+1] of its values.
func (d *dataset) Fields(i int64) ([][]byte, error) {
	if i < 0 || i >= d.Len() {
		return nil, fmt.Errorf("record %d out of range [0, %d)", i, d.Len())
	}
	if d.fields == nil {
		return nil, nil
	}
	out := make([][]byte, len(d.fields))
	for k, ff := range d.fields {
		var err error
		if ff.offsets.f == nil {
			out[k], err = ff.values.read(i, i+1)
		} else {
			var b []byte
			if b, err = ff.offsets.read(i, i+2); err == nil {
				start, end := int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))
				out[k], err = ff.values.read(start, end)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	return out, nil
}

func (d *dataset) Close() error {
	for _, ff := range d.fields {
		ff.values.close()
		ff.offsets.close()
	}
	return d.Dataset.Close()
}
