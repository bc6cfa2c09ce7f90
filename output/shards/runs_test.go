package shards

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// TestWriteFromSameFiles writes the records of two source shards once with Write, record by
// record, and once with WriteFrom in runs of random lengths, with a shard size that splits the
// runs, and checks that the two outputs are the same files and manifest entries.
func TestWriteFromSameFiles(t *testing.T) {
	specs := []shard.SampleSpec{
		{Shape: []int{5, 7}, DType: shard.Uint8, Layout: "hwc"},
		{Shape: []int{-1, 3}, DType: shard.Uint8, Layout: "hwc"},
	}
	for _, spec := range specs {
		t.Run(spec.Layout+"-"+map[bool]string{true: "fixed", false: "var"}[spec.Fixed()], func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			label := shard.LabelSpec{DType: "int64", Aux: []string{"a"}}
			var srcs []*shard.Reader
			for s := 0; s < 3; s++ {
				path := filepath.Join(t.TempDir(), "src.pks")
				fw, err := testfix.CreateFile(path, shard.WriterOptions{Sample: spec, Label: label, ShardIndex: s, HasMeta: true})
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 40+s*17; i++ {
					n := 35
					if !spec.Fixed() {
						n = 3 * (1 + rng.IntN(9))
					}
					d := make([]byte, n)
					for k := range d {
						d[k] = byte(rng.Uint32())
					}
					var meta []byte
					if i%2 == 0 {
						meta = []byte(`{"i":1}`)
					}
					if err := fw.Append(d, int64(i%5), []int64{int64(i)}, meta); err != nil {
						t.Fatal(err)
					}
				}
				if err := fw.Commit(); err != nil {
					t.Fatal(err)
				}
				r, err := shard.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				srcs = append(srcs, r)
			}
			write := func(runs bool) (string, []shard.FileEntry) {
				dir := t.TempDir()
				out, err := New(output.Config{Dir: dir, Sample: spec, Label: label, HasMeta: true, ShardSize: 700,
					Meta: map[string]any{"x": 1}})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range srcs {
					if runs {
						for i := 0; i < r.Len(); {
							j := min(r.Len(), i+1+rng.IntN(60))
							_, n := r.DataRange(i, j)
							data, err := r.ReadRecords(i, j, make([]byte, n))
							if err != nil {
								t.Fatal(err)
							}
							if err := out.(*shardOutput).WriteFrom(r, i, j, data); err != nil {
								t.Fatal(err)
							}
							i = j
						}
						continue
					}
					for i := 0; i < r.Len(); i++ {
						d, err := r.Record(i)
						if err != nil {
							t.Fatal(err)
						}
						shape, err := r.RecordShape(i)
						if err != nil {
							t.Fatal(err)
						}
						if spec.Fixed() {
							shape = nil
						}
						if err := out.Write(output.Record{Data: d, Shape: shape, Label: r.Label(i), Aux: r.Aux(i), Meta: r.RecordMeta(i)}); err != nil {
							t.Fatal(err)
						}
					}
				}
				files, err := out.Close()
				if err != nil {
					t.Fatal(err)
				}
				return dir, files
			}
			d1, f1 := write(false)
			d2, f2 := write(true)
			if len(f1) < 3 || !reflect.DeepEqual(f1, f2) {
				t.Fatalf("files differ (or too few to test the split):\n%v\n%v", f1, f2)
			}
			for _, f := range f1 {
				a, _ := os.ReadFile(filepath.Join(d1, f.Path))
				b, _ := os.ReadFile(filepath.Join(d2, f.Path))
				if !bytes.Equal(a, b) {
					t.Fatalf("%s differs", f.Path)
				}
			}
		})
	}
}
