package main

import (
	"strings"
	"testing"

	"github.com/packer-dev/packer/output/hdf5"
	"github.com/packer-dev/packer/shard"
)

// TestOutputTable: the table of output formats has one row per name, every row is complete,
// the default is the shard format, and the --format help and error list the names as they
// always have.
func TestOutputTable(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range outputs {
		if o.Name == "" || seen[o.Name] {
			t.Errorf("format name %q empty or repeated", o.Name)
		}
		seen[o.Name] = true
		if o.New == nil || o.Version == nil || o.Open == nil {
			t.Errorf("%s: constructor, version or opener missing", o.Name)
		}
		if o.FixedShape && o.Check == nil {
			t.Errorf("%s: a format verify does not read itself needs a structure check", o.Name)
		}
		if got, err := outputFor(o.Name); err != nil || got.Name != o.Name {
			t.Errorf("outputFor(%q) = %q, %v", o.Name, got.Name, err)
		}
	}
	if outputs[0].Name != shard.FormatShards {
		t.Errorf("default format %q, want %q", outputs[0].Name, shard.FormatShards)
	}
	if want := "output format: shards|npy|hdf5 (npy and hdf5 need a fixed size: --crop or --size)"; formatHelp() != want {
		t.Errorf("--format help %q, want %q", formatHelp(), want)
	}
	_, err := outputFor("zip")
	if err == nil || !strings.Contains(err.Error(), `unknown --format "zip" (want shards, npy or hdf5)`) {
		t.Errorf("outputFor(zip) = %v", err)
	}
	c := formatCheckers()
	if _, ok := c[shard.FormatShards]; len(c) != 3 || !ok || c[shard.FormatNPY] == nil || c[hdf5.Format] == nil {
		t.Errorf("verify's checkers %v, want every format of the table, with checks for npy and hdf5", c)
	}
}
