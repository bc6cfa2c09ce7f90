package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/packer-dev/packer/output/hdf5"
	"github.com/packer-dev/packer/output/npy"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// anyDataset is random access to a packed dataset of any format, for inspect and preview.
type anyDataset interface {
	Manifest() *shard.Manifest
	Len() int64
	Record(i int64) ([]byte, error)
	Info(i int64) (recordInfo, error)
	// RecordShape returns record i's own shape (the sample shape for fixed-size records).
	RecordShape(i int64) ([]int, error)
	Close() error
}

// datasetFS is the dataset at loc as the shard readers see it, through the storage seam.
func datasetFS(ctx context.Context, loc string) (shard.FS, error) {
	b, err := openStore(ctx, loc)
	if err != nil {
		return nil, err
	}
	return storage.ShardFS(ctx, b), nil
}

// readManifestAt reads the manifest of the dataset at loc.
func readManifestAt(ctx context.Context, loc string) (*shard.Manifest, error) {
	fsys, err := datasetFS(ctx, loc)
	if err != nil {
		return nil, err
	}
	return shard.ReadManifestFS(fsys)
}

// openAny opens the dataset in dir through its manifest, whatever its format.
func openAny(dir string) (anyDataset, error) {
	m, err := readManifestAt(context.Background(), dir)
	if err != nil {
		return nil, err
	}
	if o, ok := outputNamed(m.Format); ok && o.open != nil {
		if remote(dir) && m.Format != shard.FormatShards {
			return nil, fmt.Errorf("%s: a %s dataset in object storage cannot be opened by this command yet (its reader reads local files); verify checks it", dir, m.Format)
		}
		return o.open(dir, m)
	}
	return nil, fmt.Errorf("%s: format %q cannot be opened by this command", dir, m.Format)
}

func openShards(dir string, _ *shard.Manifest) (anyDataset, error) {
	fsys, err := datasetFS(context.Background(), dir)
	if err != nil {
		return nil, err
	}
	d, err := shard.OpenDatasetFS(fsys, shard.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	return shardsDataset{d}, nil
}

func openNPY(dir string, m *shard.Manifest) (anyDataset, error) {
	r, err := npy.Open(dir)
	if err != nil {
		return nil, err
	}
	return &arrayDataset{m: m, r: r}, nil
}

func openHDF5(dir string, m *shard.Manifest) (anyDataset, error) {
	r, err := hdf5.Open(dir)
	if err != nil {
		return nil, err
	}
	return &arrayDataset{m: m, r: r}, nil
}

func readManifestQuiet(dir string) (*shard.Manifest, error) {
	return readManifestAt(context.Background(), dir)
}

// shardsDataset adds per-record information to shard.Dataset.
type shardsDataset struct{ *shard.Dataset }

func (d shardsDataset) Info(i int64) (recordInfo, error) {
	if i < 0 || i >= d.Len() {
		return recordInfo{}, fmt.Errorf("record %d out of range [0, %d)", i, d.Len())
	}
	s, j := d.Locate(i)
	r, err := d.Shard(s)
	if err != nil {
		return recordInfo{}, err
	}
	ri := recordInfo{Index: i, Label: r.Label(j), Aux: r.Aux(j)}
	if meta := r.RecordMeta(j); len(meta) > 0 && json.Valid(meta) {
		ri.Meta = json.RawMessage(meta)
	}
	return ri, nil
}

// arrayReader is what the npy and hdf5 readers have in common.
type arrayReader interface {
	Len() int64
	Record(i int64) ([]byte, int64, error)
	Meta(i int64) ([]byte, error)
	Close() error
}

// arrayDataset is an anyDataset over the npy or hdf5 reader.
type arrayDataset struct {
	m *shard.Manifest
	r arrayReader
}

func (d *arrayDataset) Manifest() *shard.Manifest { return d.m }
func (d *arrayDataset) Len() int64                { return d.r.Len() }
func (d *arrayDataset) Close() error              { return d.r.Close() }

// RecordShape is the sample shape: npy and HDF5 datasets hold fixed-shape records only.
func (d *arrayDataset) RecordShape(i int64) ([]int, error) {
	if i < 0 || i >= d.r.Len() {
		return nil, fmt.Errorf("record %d out of range [0, %d)", i, d.r.Len())
	}
	return slices.Clone(d.m.Sample.Shape), nil
}

func (d *arrayDataset) Record(i int64) ([]byte, error) {
	b, _, err := d.r.Record(i)
	return b, err
}

func (d *arrayDataset) Info(i int64) (recordInfo, error) {
	_, label, err := d.r.Record(i)
	if err != nil {
		return recordInfo{}, err
	}
	ri := recordInfo{Index: i, Label: label}
	if meta, err := d.r.Meta(i); err == nil && len(meta) > 0 && json.Valid(meta) {
		ri.Meta = json.RawMessage(meta)
	}
	return ri, nil
}
