package hdf5

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// open is the reader half of Entry, for packer inspect and preview: Open over the local
// directory fsys holds. libhdf5 reads local files only, so a dataset in object storage is
// refused, naming loc.
func open(loc string, fsys shard.FS, m *shard.Manifest) (output.Dataset, error) {
	if _, ok := fsys.(shard.LocalFS); !ok {
		return nil, fmt.Errorf("%s: a %s dataset in object storage cannot be opened by this command yet (its reader reads local files); verify checks it", loc, m.Format)
	}
	r, err := Open(loc)
	if err != nil {
		return nil, err
	}
	return &dataset{m: m, r: r}, nil
}

// dataset is a Reader as an output.Dataset.
type dataset struct {
	m *shard.Manifest
	r *Reader
}

func (d *dataset) Manifest() *shard.Manifest { return d.m }
func (d *dataset) Len() int64                { return d.r.Len() }
func (d *dataset) Close() error              { return d.r.Close() }

// RecordShape is the sample shape: an HDF5 dataset holds fixed-shape records only.
func (d *dataset) RecordShape(i int64) ([]int, error) {
	if i < 0 || i >= d.r.Len() {
		return nil, fmt.Errorf("record %d out of range [0, %d)", i, d.r.Len())
	}
	return slices.Clone(d.m.Sample.Shape), nil
}

func (d *dataset) Record(i int64) ([]byte, error) {
	b, _, err := d.r.Record(i)
	return b, err
}

// Info gives the label and the metadata, not the aux columns (as inspect always showed an HDF5
// record).
func (d *dataset) Info(i int64) (output.RecordInfo, error) {
	_, label, err := d.r.Record(i)
	if err != nil {
		return output.RecordInfo{}, err
	}
	ri := output.RecordInfo{Label: label}
	if meta, err := d.r.Meta(i); err == nil && len(meta) > 0 && json.Valid(meta) {
		ri.Meta = meta
	}
	return ri, nil
}

// Fields gives record i's field values (Reader.Fields).
func (d *dataset) Fields(i int64) ([][]byte, error) { return d.r.Fields(i) }
