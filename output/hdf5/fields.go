package hdf5

// Fields (shard.Field) in data.h5: one dataset per field under the root, named as the field,
// in schema order after the others. A fixed-size field (a fixed ndarray, an image field at the
// sample's height and width) is [N, ...shape] of its dtype, chunked as /images; a variable
// ndarray is [N] variable-length sequences of its dtype (each record's rows flattened) with an
// int64 attribute "shape" (the field's shape, -1 first); bytes is [N] sequences of uint8; text
// and json are [N] variable-length UTF-8 strings. Every field's dataset has the string
// attribute "kind", and the root the attribute "fields" (the schema as JSON), present only
// when the dataset has fields, so that an image-only file keeps its bytes.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// FieldsAttr names the root attribute holding the schema (JSON) of a dataset with fields.
const FieldsAttr = "fields"

// reservedNames are the datasets and groups of data.h5 that a field may not be named as.
var reservedNames = []string{ImagesName, LabelsName, AuxGroup, MetaName}

// checkField is Entry's FieldCheck: every kind is held; a field may not take the name of a
// dataset the file has anyway, a fixed field must have bytes (HDF5 chunks have no empty
// dimension), and a variable ndarray's rows must have elements (a sequence counts elements).
func checkField(f shard.Field) error {
	if slices.Contains(reservedNames, f.Name) {
		return fmt.Errorf("data.h5 has its own /%s", f.Name)
	}
	if f.Kind != shard.KindNDArray {
		return nil
	}
	for i, d := range f.Shape {
		if d == 0 && (i > 0 || f.Shape[0] != -1) {
			return fmt.Errorf("shape %v: a dimension of 0 cannot be stored in an HDF5 dataset", f.Shape)
		}
		if d == 0 {
			return fmt.Errorf("shape %v: a row of no elements cannot be counted in a variable-length sequence", f.Shape)
		}
	}
	return nil
}

// fieldBaseType is the HDF5 type of a field's elements: its dtype for an ndarray or image
// field, uint8 for bytes. The caller closes it.
func fieldBaseType(f shard.Field) (*handle, error) {
	which := typeU8LE
	switch f.DType {
	case "int32":
		which = typeI32LE
	case "int64":
		which = typeI64LE
	case "float32":
		which = typeF32LE
	case "float64":
		which = typeF64LE
	}
	t, err := copyType(which)
	if err != nil {
		return nil, fmt.Errorf("hdf5: datatype: %w", h5error("H5Tcopy", err))
	}
	return t, nil
}

// fieldTypeOK reports whether an element type is the one a field's dtype is stored as.
func fieldTypeOK(dtype string, t typeInfo) bool {
	switch dtype {
	case "int32", "int64":
		return t.class == classInteger && t.signed && t.order == orderLE && t.size == shard.FieldDTypes[dtype]
	case "float32", "float64":
		return t.class == classFloat && t.order == orderLE && t.size == shard.FieldDTypes[dtype]
	}
	return t.class == classInteger && !t.signed && t.size == 1
}

// isText reports whether a field is stored as strings.
func isText(f shard.Field) bool { return f.Kind == shard.KindText || f.Kind == shard.KindJSON }

// vlenColumn buffers variable-length sequences: their elements back to back, and the element
// count of each.
type vlenColumn struct {
	name      string
	ds        *handle
	elemSize  int
	chunkRows int
	buf       []byte
	lens      []uint64
	written   int64
}

func (c *vlenColumn) add(v []byte) (full bool) {
	c.buf = append(c.buf, v...)
	c.lens = append(c.lens, uint64(len(v)/c.elemSize))
	return len(c.lens) == c.chunkRows
}

func (c *vlenColumn) flush() error {
	if len(c.lens) == 0 {
		return nil
	}
	if err := writeVlen(c.ds, c.written, c.lens, c.buf); err != nil {
		return fmt.Errorf("/%s: %w", c.name, err)
	}
	c.written += int64(len(c.lens))
	c.lens, c.buf = c.lens[:0], c.buf[:0]
	return nil
}

// fieldColumn is one field's dataset being written: one of fixed, str or vlen.
type fieldColumn struct {
	l     output.FieldLayout
	fixed *column
	str   *strColumn
	vlen  *vlenColumn
}

func (fc *fieldColumn) add(v []byte) error {
	switch {
	case fc.fixed != nil:
		if fc.fixed.add(v) {
			return fc.fixed.flush()
		}
	case fc.str != nil:
		if fc.str.add(v) {
			return fc.str.flush()
		}
	default:
		if fc.vlen.add(v) {
			return fc.vlen.flush()
		}
	}
	return nil
}

func (fc *fieldColumn) flush() error {
	switch {
	case fc.fixed != nil:
		return fc.fixed.flush()
	case fc.str != nil:
		return fc.str.flush()
	}
	return fc.vlen.flush()
}

// dataset is the column's open dataset.
func (fc *fieldColumn) dataset() **handle {
	switch {
	case fc.fixed != nil:
		return &fc.fixed.ds
	case fc.str != nil:
		return &fc.str.ds
	}
	return &fc.vlen.ds
}

// createFields creates the datasets of the writer's fields and the root attribute "fields";
// it runs inside lib.
func (w *writer) createFields() error {
	if len(w.cfg.Fields) == 0 {
		return nil
	}
	layouts, err := output.FieldLayouts(w.cfg.Fields, w.cfg.Sample)
	if err != nil {
		return fmt.Errorf("hdf5: %w", err)
	}
	schema, err := marshal(w.cfg.Fields)
	if err != nil {
		return fmt.Errorf("hdf5: attribute %s: %w", FieldsAttr, err)
	}
	if err := setStrAttr(w.f.ID(), FieldsAttr, string(schema)); err != nil {
		return fmt.Errorf("hdf5: %s: %w", w.tmp, err)
	}
	for _, l := range layouts {
		f := l.Field
		if err := checkField(f); err != nil {
			return fmt.Errorf("hdf5: field %q: %w", f.Name, err)
		}
		fc := &fieldColumn{l: l}
		if err := w.createField(fc); err != nil {
			return err
		}
		w.fields = append(w.fields, fc)
		ds := *fc.dataset()
		if err := setStrAttr(ds.ID(), "kind", string(f.Kind)); err != nil {
			return fmt.Errorf("hdf5: %s: /%s: %w", w.tmp, f.Name, err)
		}
		if fc.vlen != nil && f.Kind == shard.KindNDArray {
			shape := make([]int64, len(f.Shape))
			for i, d := range f.Shape {
				shape[i] = int64(d)
			}
			if err := setInt64sAttr(ds.ID(), "shape", shape); err != nil {
				return fmt.Errorf("hdf5: %s: /%s: %w", w.tmp, f.Name, err)
			}
		}
	}
	return nil
}

// createField creates one field's dataset.
func (w *writer) createField(fc *fieldColumn) error {
	l := fc.l
	if isText(l.Field) {
		st, err := copyType(typeCS1)
		if err != nil {
			return fmt.Errorf("hdf5: string type: %w", h5error("H5Tcopy", err))
		}
		defer st.Close()
		if err := makeVlenUTF8(st); err != nil {
			return fmt.Errorf("hdf5: %w", err)
		}
		ds, err := w.createDataset(l.Field.Name, st, nil, metaChunkRows, false)
		if err != nil {
			return err
		}
		fc.str = &strColumn{rowBuffer{name: l.Field.Name, ds: ds, chunkRows: metaChunkRows}}
		return nil
	}
	base, err := fieldBaseType(l.Field)
	if err != nil {
		return err
	}
	defer base.Close()
	if l.Fixed {
		shape := make([]uint64, len(l.Shape))
		for i, d := range l.Shape {
			shape[i] = uint64(d)
		}
		fc.fixed, err = w.newColumn(l.Field.Name, base, shape, l.RowBytes, imageChunkRows(int64(l.RowBytes)))
		return err
	}
	vt, err := createVlenType(base)
	if err != nil {
		return fmt.Errorf("hdf5: sequence type: %w", h5error("H5Tvlen_create", err))
	}
	defer vt.Close()
	ds, err := w.createDataset(l.Field.Name, vt, nil, metaChunkRows, false)
	if err != nil {
		return err
	}
	fc.vlen = &vlenColumn{name: l.Field.Name, ds: ds, elemSize: l.ElemSize, chunkRows: metaChunkRows}
	return nil
}

// checkFieldValues checks record r's field values before anything of it is written.
func (w *writer) checkFieldValues(r output.Record) error {
	if len(r.Fields) != len(w.fields) {
		return fmt.Errorf("%d field values, want %d", len(r.Fields), len(w.fields))
	}
	for k, fc := range w.fields {
		if err := fc.l.Check(r.Fields[k]); err != nil {
			return err
		}
		if fc.str != nil && bytes.IndexByte(r.Fields[k], 0) >= 0 {
			return fmt.Errorf("field %q: a NUL byte cannot be stored in an HDF5 string", fc.l.Field.Name)
		}
	}
	return nil
}

// openFields opens the datasets of the schema in the root attribute "fields", if any; it runs
// inside lib.
func (r *Reader) openFields() error {
	if !attrExists(r.f, FieldsAttr) {
		return nil
	}
	s, err := strAttr(r.f.ID(), FieldsAttr)
	if err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	var fields []shard.Field
	if err := json.Unmarshal([]byte(s), &fields); err != nil {
		return fmt.Errorf("%s: root attribute %q: %v: %w", r.path, FieldsAttr, err, ErrFormat)
	}
	if r.layouts, err = output.FieldLayouts(fields, r.sample); err != nil {
		return fmt.Errorf("%s: root attribute %q: %v: %w", r.path, FieldsAttr, err, ErrFormat)
	}
	for _, l := range r.layouts {
		ds, err := r.dataset(l.Field.Name, nil)
		if err != nil {
			return err
		}
		r.fields = append(r.fields, ds)
		if err := checkFieldDataset(ds, l, r.n); err != nil {
			return fmt.Errorf("%s: %w", r.path, err)
		}
	}
	return nil
}

// checkFieldDataset checks a field's dataset's shape and element type against its layout.
func checkFieldDataset(ds *handle, l output.FieldLayout, n int64) error {
	name := l.Field.Name
	cur, _, err := dims(ds)
	if err != nil {
		return fmt.Errorf("/%s: %w", name, err)
	}
	want := []uint64{uint64(n)}
	if l.Fixed {
		for _, d := range l.Shape {
			want = append(want, uint64(d))
		}
	}
	if !slices.Equal(cur, want) {
		return fmt.Errorf("/%s has shape %v, want %v: %w", name, cur, want, ErrFormat)
	}
	t, err := datasetType(ds)
	if err != nil {
		return fmt.Errorf("/%s: %w", name, err)
	}
	switch {
	case isText(l.Field):
		if !t.vlenStr {
			return fmt.Errorf("/%s: element type is not a variable-length string: %w", name, ErrFormat)
		}
	case l.Fixed:
		if !fieldTypeOK(l.Field.DType, t) {
			return fmt.Errorf("/%s: element type (class %d, %d bytes) is not %s: %w", name, t.class, t.size, l.Field.DType, ErrFormat)
		}
	default:
		bt, err := vlenBaseType(ds)
		if t.class != classVlen || err != nil || !fieldTypeOK(l.Field.DType, bt) {
			return fmt.Errorf("/%s: element type is not a variable-length sequence of %s: %w", name, cmp.Or(l.Field.DType, "uint8"), ErrFormat)
		}
	}
	return nil
}

// readField reads record i's value of field k; it runs inside lib.
func (r *Reader) readField(k int, i int64) ([]byte, error) {
	l, ds := r.layouts[k], r.fields[k]
	var v []byte
	var err error
	switch {
	case isText(l.Field):
		if v, err = readString(ds, i); v == nil && err == nil {
			v = []byte{}
		}
	case l.Fixed:
		v = make([]byte, l.RowBytes)
		err = readRows(ds, i, 1, v)
	default:
		v, err = readVlen(ds, i)
	}
	if err == nil {
		err = l.Check(v)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: /%s: record %d: %w", r.path, l.Field.Name, i, err)
	}
	return v, nil
}

// Fields returns record i's field values, in the schema's order (nil for a file without
// fields).
func (r *Reader) Fields(i int64) ([][]byte, error) {
	if i < 0 || i >= r.n {
		return nil, fmt.Errorf("%s: record %d out of range [0, %d)", r.path, i, r.n)
	}
	if len(r.layouts) == 0 {
		return nil, nil
	}
	out := make([][]byte, len(r.layouts))
	err := lib(func() error {
		if r.f == nil {
			return fmt.Errorf("%s: Reader is closed", r.path)
		}
		for k := range r.layouts {
			var err error
			if out[k], err = r.readField(k, i); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Schema returns the fields the file holds (nil for none).
func (r *Reader) Schema() []shard.Field {
	var out []shard.Field
	for _, l := range r.layouts {
		out = append(out, l.Field)
	}
	return out
}

// checkFields checks the fields' datasets of a data.h5 (inside lib, for checkFile): the root
// attribute "fields" is the schema (absent without fields), each field's dataset has the
// layout's shape and type, and the first and last records' values read back and fit it.
func checkFields(f *handle, exp expect, fail func(string, ...any)) {
	has := attrExists(f, FieldsAttr)
	if len(exp.fields) == 0 {
		if has {
			fail("root attribute %q lists fields the manifest does not: %w", FieldsAttr, ErrFormat)
		}
		return
	}
	want, err := marshal(exp.fields)
	if err != nil {
		fail("fields: %v", err)
		return
	}
	if s, err := strAttr(f.ID(), FieldsAttr); err != nil || s != string(want) {
		fail("root attribute %q is %q, the manifest's fields are %s: %w", FieldsAttr, s, want, ErrFormat)
	}
	layouts, err := output.FieldLayouts(exp.fields, exp.sample)
	if err != nil {
		fail("fields: %v: %w", err, ErrFormat)
		return
	}
	r := &Reader{f: f, n: exp.count, layouts: layouts}
	defer func() {
		for _, ds := range r.fields {
			ds.Close()
		}
	}()
	for k, l := range layouts {
		if !linkExists(f.ID(), l.Field.Name) {
			fail("no dataset /%s for field %q: %w", l.Field.Name, l.Field.Name, ErrFormat)
			return
		}
		ds, err := openDataset(f, l.Field.Name, nil)
		if err != nil {
			fail("open /%s: %w", l.Field.Name, h5error("H5Dopen", err))
			return
		}
		r.fields = append(r.fields, ds)
		if err := checkFieldDataset(ds, l, exp.count); err != nil {
			fail("%w", err)
			continue
		}
		for _, i := range []int64{0, exp.count - 1} {
			if i < 0 {
				break
			}
			if _, err := r.readField(k, i); err != nil {
				fail("/%s: record %d: %w", l.Field.Name, i, errors.Unwrap(err))
			}
		}
	}
}
