package shard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDatasetAuxNamesChecked: the manifest's aux column names are how a trainer finds a
// column in Batch.Aux; a manifest naming the shards' columns in another order (or other
// names) would hand over one column's values as another's. The shard is refused, naming the
// columns, as the Python reader refuses it.
func TestDatasetAuxNamesChecked(t *testing.T) {
	opts := fixedDatasetOpts
	opts.Label.Aux = []string{"coarse", "fine"}
	recs := randomRecords(opts, 10, 3)
	dir := buildDataset(t, opts, recs, []int{10})
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Label.Aux = []string{"fine", "coarse"}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDataset(dir)
	if err == nil {
		defer d.Close()
		_, err = d.Record(0)
	}
	if err == nil || !strings.Contains(err.Error(), "shard-00000.pks") || !strings.Contains(err.Error(), "aux") {
		t.Errorf("manifest with the aux columns renamed: %v, want an error naming the shard and the aux columns", err)
	}
}
