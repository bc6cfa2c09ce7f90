package hdf5

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// Reader reads a data.h5 written by this package: record i's bytes, label and metadata, for
// inspect, preview and bench. Its methods may be called from several goroutines; they run one at
// a time. Reader: Open (Len | Sample | Classes | Read | Labels | Record | Meta)* Close.
type Reader struct {
	path    string
	f       *handle
	images  *handle
	labels  *handle
	meta    *handle // nil when the file has no /meta
	n       int64
	rec     int64 // bytes per record
	sample  shard.SampleSpec
	classes []string
	layouts []output.FieldLayout // the fields of the root attribute "fields"; nil for none
	fields  []*handle            // their datasets
}

// Open opens dir/data.h5. When dir/manifest.json lists data.h5, a file of another size is
// refused as damaged without being parsed; a manifest.json that is present but fails its
// checksum or does not parse is refused too.
//
// Open trusts the file's bytes otherwise: it does not hash it (bench and preview must not read a
// whole dataset first), and libhdf5 can crash the process on a damaged file. Run Check (packer
// verify) first on a file that may be damaged.
func Open(dir string) (*Reader, error) {
	path := filepath.Join(dir, DataFile)
	m, err := shard.ReadManifest(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err // a manifest that is there but damaged or edited is not silently ignored
	}
	if err == nil {
		for _, fe := range m.Files {
			if fe.Path != DataFile {
				continue
			}
			st, err := os.Stat(path)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if st.Size() != fe.Size {
				return nil, fmt.Errorf("%s: size is %d bytes, manifest says %d: %w", path, st.Size(), fe.Size, ErrDamaged)
			}
		}
	}
	return OpenFile(path)
}

// OpenFile opens an HDF5 file written by this package. Errors name the file and the dataset.
func OpenFile(path string) (*Reader, error) {
	if err := Load(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r := &Reader{path: path}
	err := lib(func() error {
		if err := r.open(); err != nil {
			r.closeHandles()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reader) open() error {
	f, err := openFile(r.path)
	if err != nil {
		return fmt.Errorf("%s: not a readable HDF5 file: %w", r.path, h5error("H5Fopen", err))
	}
	r.f = f
	// Whole-chunk reads bypass the chunk cache: with no cache, libhdf5 reads each chunk
	// straight into the caller's buffer instead of through a cached copy.
	dapl, err := newPropList(plistDAPL)
	if err != nil {
		return fmt.Errorf("%s: %w", r.path, h5error("H5Pcreate", err))
	}
	defer dapl.Close()
	if err := setChunkCache(dapl, 0, 0, 1); err != nil {
		return fmt.Errorf("%s: %w", r.path, h5error("H5Pset_chunk_cache", err))
	}
	if r.images, err = r.dataset(ImagesName, dapl); err != nil {
		return err
	}
	if r.labels, err = r.dataset(LabelsName, nil); err != nil {
		return err
	}
	if linkExists(f.ID(), MetaName) {
		if r.meta, err = r.dataset(MetaName, nil); err != nil {
			return err
		}
	}
	idims, _, err := dims(r.images)
	if err != nil {
		return fmt.Errorf("%s: /%s: %w", r.path, ImagesName, err)
	}
	ldims, _, err := dims(r.labels)
	if err != nil {
		return fmt.Errorf("%s: /%s: %w", r.path, LabelsName, err)
	}
	if len(idims) < 2 || len(ldims) != 1 || idims[0] != ldims[0] {
		return fmt.Errorf("%s: /%s has shape %v and /%s %v: want [N, ...] and [N]: %w", r.path, ImagesName, idims, LabelsName, ldims, ErrFormat)
	}
	r.n = int64(ldims[0])
	it, err := datasetType(r.images)
	if err != nil {
		return fmt.Errorf("%s: /%s: %w", r.path, ImagesName, err)
	}
	dt, ok := dtypeOf(it)
	if !ok {
		return fmt.Errorf("%s: /%s: element type (class %d, %d bytes) is not uint8, float16 or float32: %w", r.path, ImagesName, it.class, it.size, ErrFormat)
	}
	lt, err := datasetType(r.labels)
	if err != nil {
		return fmt.Errorf("%s: /%s: %w", r.path, LabelsName, err)
	}
	if !isInt64(lt) {
		return fmt.Errorf("%s: /%s: element type is not little-endian int64: %w", r.path, LabelsName, ErrFormat)
	}
	r.sample = shard.SampleSpec{DType: dt}
	r.rec = int64(it.size)
	for _, d := range idims[1:] {
		r.sample.Shape = append(r.sample.Shape, int(d))
		r.rec *= int64(d)
	}
	if r.rec <= 0 || r.rec > shard.MaxRecordSize {
		return fmt.Errorf("%s: /%s: record size %d out of range: %w", r.path, ImagesName, r.rec, ErrFormat)
	}
	if s, err := strAttr(r.f.ID(), "sample"); err == nil {
		var spec shard.SampleSpec
		if json.Unmarshal([]byte(s), &spec) == nil && slices.Equal(spec.Shape, r.sample.Shape) && spec.DType == dt {
			r.sample.Layout = spec.Layout
		}
	}
	if s, err := strAttr(r.f.ID(), "classes"); err == nil {
		_ = json.Unmarshal([]byte(s), &r.classes)
	}
	return r.openFields()
}

func (r *Reader) dataset(name string, dapl *handle) (*handle, error) {
	if !linkExists(r.f.ID(), name) {
		return nil, fmt.Errorf("%s: no dataset /%s: %w", r.path, name, ErrFormat)
	}
	var ds *handle
	var err error
	if dapl != nil {
		ds, err = openDataset(r.f, name, dapl)
	} else {
		ds, err = openDataset(r.f, name, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: open /%s: %w", r.path, name, h5error("H5Dopen", err))
	}
	return ds, nil
}

// Len returns the number of records.
func (r *Reader) Len() int64 { return r.n }

// Sample returns the record spec: shape and dtype from /images, layout from the "sample"
// attribute.
func (r *Reader) Sample() shard.SampleSpec { return r.sample }

// RecordSize returns the size of one record in bytes.
func (r *Reader) RecordSize() int64 { return r.rec }

// Classes returns the class names from the "classes" attribute (nil when absent).
func (r *Reader) Classes() []string { return r.classes }

// Read reads records [start, start+n) into dst, which must hold exactly n records.
func (r *Reader) Read(start, n int64, dst []byte) error {
	if start < 0 || n < 0 || start > r.n || n > r.n-start {
		return fmt.Errorf("%s: records %d+%d out of range [0, %d)", r.path, start, n, r.n)
	}
	if int64(len(dst)) != n*r.rec {
		return fmt.Errorf("%s: buffer of %d bytes for %d records of %d bytes", r.path, len(dst), n, r.rec)
	}
	return lib(func() error {
		if r.images == nil {
			return errors.New("hdf5: Reader is closed")
		}
		if err := readRows(r.images, start, n, dst); err != nil {
			return fmt.Errorf("%s: /%s: %w", r.path, ImagesName, err)
		}
		return nil
	})
}

// Labels returns the labels of records [start, start+n).
func (r *Reader) Labels(start, n int64) ([]int64, error) {
	if start < 0 || n < 0 || start > r.n || n > r.n-start {
		return nil, fmt.Errorf("%s: records %d+%d out of range [0, %d)", r.path, start, n, r.n)
	}
	buf := make([]byte, 8*n)
	err := lib(func() error {
		if r.labels == nil {
			return errors.New("hdf5: Reader is closed")
		}
		if err := readRows(r.labels, start, n, buf); err != nil {
			return fmt.Errorf("%s: /%s: %w", r.path, LabelsName, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return out, nil
}

// Record returns record i's bytes and label.
func (r *Reader) Record(i int64) ([]byte, int64, error) {
	if i < 0 || i >= r.n {
		return nil, 0, fmt.Errorf("%s: record %d out of range [0, %d)", r.path, i, r.n)
	}
	data := make([]byte, r.rec)
	if err := r.Read(i, 1, data); err != nil {
		return nil, 0, err
	}
	l, err := r.Labels(i, 1)
	if err != nil {
		return nil, 0, err
	}
	return data, l[0], nil
}

// Meta returns record i's metadata, or nil when the file has none.
func (r *Reader) Meta(i int64) ([]byte, error) {
	if i < 0 || i >= r.n {
		return nil, fmt.Errorf("%s: record %d out of range [0, %d)", r.path, i, r.n)
	}
	var out []byte
	err := lib(func() error {
		if r.meta == nil {
			return nil
		}
		var err error
		if out, err = readString(r.meta, i); err != nil {
			return fmt.Errorf("%s: /%s: %w", r.path, MetaName, err)
		}
		return nil
	})
	return out, err
}

// Attr returns the root string attribute name ("format", "classes", "sample", "label" or
// "spec"; JSON except "format").
func (r *Reader) Attr(name string) (string, error) {
	var out string
	err := lib(func() error {
		if r.f == nil {
			return errors.New("hdf5: Reader is closed")
		}
		var err error
		if out, err = strAttr(r.f.ID(), name); err != nil {
			return fmt.Errorf("%s: %w", r.path, err)
		}
		return nil
	})
	return out, err
}

// Aux returns the auxiliary labels /aux/<name> of records [start, start+n).
func (r *Reader) Aux(name string, start, n int64) ([]int64, error) {
	if err := checkAuxName(name); err != nil {
		return nil, err
	}
	if start < 0 || n < 0 || start > r.n || n > r.n-start {
		return nil, fmt.Errorf("%s: records %d+%d out of range [0, %d)", r.path, start, n, r.n)
	}
	buf := make([]byte, 8*n)
	path := AuxGroup + "/" + name
	err := lib(func() error {
		if r.f == nil {
			return errors.New("hdf5: Reader is closed")
		}
		if !linkExists(r.f.ID(), AuxGroup) {
			return fmt.Errorf("%s: no dataset /%s: %w", r.path, path, ErrFormat)
		}
		ds, err := r.dataset(path, nil)
		if err != nil {
			return err
		}
		defer ds.Close()
		if t, err := datasetType(ds); err != nil || !isInt64(t) {
			return fmt.Errorf("%s: /%s: element type is not little-endian int64: %w", r.path, path, ErrFormat)
		}
		if d, _, err := dims(ds); err != nil || len(d) != 1 || d[0] != uint64(r.n) {
			return fmt.Errorf("%s: /%s: shape %v, want [%d]: %w", r.path, path, d, r.n, ErrFormat)
		}
		if err := readRows(ds, start, n, buf); err != nil {
			return fmt.Errorf("%s: /%s: %w", r.path, path, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return out, nil
}

// Close releases the file.
func (r *Reader) Close() error {
	return lib(r.closeHandles)
}

func (r *Reader) closeHandles() error {
	var errs []error
	dss := []**handle{&r.images, &r.labels, &r.meta}
	for k := range r.fields {
		dss = append(dss, &r.fields[k])
	}
	for _, ds := range dss {
		if *ds != nil {
			if err := (*ds).Close(); err != nil {
				errs = append(errs, h5error("close dataset", err))
			}
			*ds = nil
		}
	}
	if r.f != nil {
		if err := r.f.Close(); err != nil {
			errs = append(errs, h5error("close file", err))
		}
		r.f = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	return nil
}

// dtypeOf maps an element type to a sample dtype.
func dtypeOf(t typeInfo) (shard.DType, bool) {
	switch {
	case t.class == classInteger && t.size == 1 && !t.signed:
		return shard.Uint8, true
	case t.class == classFloat && t.size == 2 && t.order == orderLE:
		return shard.Float16, true
	case t.class == classFloat && t.size == 4 && t.order == orderLE:
		return shard.Float32, true
	}
	return "", false
}

func isInt64(t typeInfo) bool {
	return t.class == classInteger && t.size == 8 && t.signed && t.order == orderLE
}
