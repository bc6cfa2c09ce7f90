package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// anyDataset is random access to a packed dataset of any format, for inspect and preview: what
// the format's entry opens (output.Entry.Open).
type anyDataset = output.Dataset

// datasetFS is the dataset at loc as the shard readers see it, through the storage seam.
func datasetFS(ctx context.Context, loc string) (shard.FS, error) {
	b, err := openStore(ctx, loc)
	if err != nil {
		return nil, err
	}
	return storage.ShardFS(ctx, b), nil
}

// readManifestAt reads the manifest of the dataset at loc (readManifest).
func readManifestAt(ctx context.Context, loc string) (*shard.Manifest, error) {
	fsys, err := datasetFS(ctx, loc)
	if err != nil {
		return nil, err
	}
	return readManifest(fsys)
}

// readManifest reads the manifest of the dataset fsys holds, refusing a format that no row of
// the table of outputs names (an invalid manifest, named with its path).
func readManifest(fsys shard.FS) (*shard.Manifest, error) {
	return shard.ReadManifestFormats(fsys, outputNames(false))
}

// openAny opens the dataset in dir through its manifest, whatever its format, with the reader
// half of the format's entry.
func openAny(dir string) (anyDataset, error) {
	ctx := context.Background()
	fsys, err := datasetFS(ctx, dir)
	if err != nil {
		return nil, err
	}
	m, err := readManifest(fsys)
	if err != nil {
		return nil, err
	}
	if o, ok := outputNamed(m.Format); ok && o.Open != nil {
		return o.Open(dir, fsys, m)
	}
	return nil, fmt.Errorf("%s: format %q cannot be opened by this command", dir, m.Format)
}

func readManifestQuiet(dir string) (*shard.Manifest, error) {
	return readManifestAt(context.Background(), dir)
}

// infoOf returns what inspect and preview show of record i of ds: its number, label, aux
// labels and metadata (when it is one JSON value).
func infoOf(ds anyDataset, i int64) (recordInfo, error) {
	in, err := ds.Info(i)
	if err != nil {
		return recordInfo{}, err
	}
	ri := recordInfo{Index: i, Label: in.Label, Aux: in.Aux}
	if len(in.Meta) > 0 && json.Valid(in.Meta) {
		ri.Meta = json.RawMessage(in.Meta)
	}
	return ri, nil
}
