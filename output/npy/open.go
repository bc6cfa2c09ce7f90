package npy

import (
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// open is the reader half of Entry: the shard package reads an npy dataset (images.npy as one
// shard holding every record; the one Go npy reader), and a record's information is given as
// packer inspect has always shown an npy record: its label and its meta.jsonl line ("null" for a
// record without metadata, where the dataset has metadata), the aux columns left out.
func open(loc string, fsys shard.FS, m *shard.Manifest) (output.Dataset, error) {
	d, err := output.OpenShardDataset(loc, fsys, m)
	if err != nil {
		return nil, err
	}
	return dataset{d, hasMeta(m)}, nil
}

type dataset struct {
	output.Dataset
	meta bool // the dataset has meta.jsonl
}

func (d dataset) Info(i int64) (output.RecordInfo, error) {
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
