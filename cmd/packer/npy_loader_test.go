package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source/cifar"
)

// loaderBatches reads one epoch of dir with the Go Loader and returns every batch, copied.
func loaderBatches(t *testing.T, dir string, opts shard.LoaderOptions) []shard.Batch {
	t.Helper()
	d, err := shard.OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ld, err := d.NewLoader(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	var out []shard.Batch
	for ld.Next() {
		b := ld.Batch()
		out = append(out, shard.Batch{Data: bytes.Clone(b.Data), Labels: slices.Clone(b.Labels),
			Aux: slices.Clone(b.Aux), Indices: slices.Clone(b.Indices), Position: b.Position})
	}
	if err := ld.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameBatches(t *testing.T, what string, got, want []shard.Batch) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d batches, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Data, w.Data) || !slices.Equal(g.Labels, w.Labels) || !slices.Equal(g.Aux, w.Aux) ||
			!slices.Equal(g.Indices, w.Indices) || g.Position != w.Position {
			t.Fatalf("%s: batch %d differs: indices %v, want %v; labels %v, want %v", what, i, g.Indices, w.Indices, g.Labels, w.Labels)
		}
	}
}

// TestGoLoaderReadsNpy: shard.OpenDataset opens a --format npy dataset, and its Loader yields
// the same batches (data, labels, aux labels, record numbers) as for the same source built as
// shards: in order for any number of shards, and shuffled (ORDER.md takes an npy dataset as
// one unit, as the Python reader does) like a one-shard build, for several seeds, worlds and
// batch sizes, uint8 and float16. Random access (Record, Label) agrees too.
func TestGoLoaderReadsNpy(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "data.bin")
	if err := cifar.WriteBinary(src, cifar.Kind100, cifar.TestRecords(cifar.Kind100, 333, 9)); err != nil {
		t.Fatal(err)
	}
	for _, dtype := range []string{"uint8", "float16"} {
		t.Run(dtype, func(t *testing.T) {
			build := func(name string, args ...string) string {
				out := filepath.Join(tmp, dtype+"-"+name)
				mustRun(t, append([]string{"build", src, "--from", "cifar100", "-o", out, "--dtype", dtype}, args...)...)
				return out
			}
			npyDir := build("npy", "--format", "npy")
			many := build("many", "--shard-size", "300KiB")
			one := build("one", "--shard-size", "1GiB")
			if m, _ := shard.ReadManifest(many); len(m.Files) < 3 {
				t.Fatalf("the many-shard build has %d files", len(m.Files))
			}
			d, err := shard.OpenDataset(npyDir)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := shard.OpenDataset(many)
			if err != nil {
				t.Fatal(err)
			}
			if d.Len() != 333 || d.NumShards() != 1 {
				t.Fatalf("npy dataset: %d records in %d shards", d.Len(), d.NumShards())
			}
			for _, i := range []int64{0, 1, 200, 332} {
				a, err1 := d.Record(i)
				b, err2 := ds.Record(i)
				la, _ := d.Label(i)
				lb, _ := ds.Label(i)
				if err1 != nil || err2 != nil || !bytes.Equal(a, b) || la != lb {
					t.Fatalf("record %d: %v %v, labels %d %d, bytes equal %v", i, err1, err2, la, lb, bytes.Equal(a, b))
				}
			}
			d.Close()
			ds.Close()
			for _, world := range []int{1, 2, 3} {
				for rank := range world {
					for _, bs := range []int{1, 32, 100} {
						o := shard.LoaderOptions{BatchSize: bs, Rank: rank, World: world, Start: int64(bs / 3)}
						what := fmt.Sprintf("in order, rank %d of %d, batch %d", rank, world, bs)
						sameBatches(t, what, loaderBatches(t, npyDir, o), loaderBatches(t, many, o))
						for _, seed := range []uint64{0, 7, 1 << 40} {
							o := shard.LoaderOptions{BatchSize: bs, Rank: rank, World: world, Shuffle: true, Seed: seed, Epoch: 2, Buffer: 50, DropLast: true}
							what := fmt.Sprintf("shuffled, seed %d, rank %d of %d, batch %d", seed, rank, world, bs)
							sameBatches(t, what, loaderBatches(t, npyDir, o), loaderBatches(t, one, o))
							o.Order = shard.OrderV1
							sameBatches(t, what+", order 1", loaderBatches(t, npyDir, o), loaderBatches(t, one, o))
						}
					}
				}
			}
			if b := loaderBatches(t, npyDir, shard.LoaderOptions{BatchSize: 4}); len(b[0].Aux) != 4 || len(b[0].Data) == 0 {
				t.Fatalf("first batch: aux %v, %d data bytes; want the coarse labels", b[0].Aux, len(b[0].Data))
			}
			// O_DIRECT is asked for but not used on the npy array; the batches are the same.
			o := shard.LoaderOptions{BatchSize: 64, Direct: true}
			sameBatches(t, "direct", loaderBatches(t, npyDir, o), loaderBatches(t, many, shard.LoaderOptions{BatchSize: 64}))
		})
	}
}
