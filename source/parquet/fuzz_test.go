package parquet

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/source"
)

// FuzzParquet reads arbitrary bytes as a Parquet file: Open may refuse it and Enumerate and
// Decode may fail, with an error, never a panic or a hang. The seeds are files written by
// parquet-go itself (plain binary images and the Hugging Face {bytes, path} struct, int64 and
// string labels).
func FuzzParquet(f *testing.F) {
	jpg, err := os.ReadFile(testfix.Corpus("grey.jpg"))
	if err != nil {
		f.Fatal(err)
	}
	type plain struct {
		Image []byte `parquet:"image"`
		Label int64  `parquet:"label"`
	}
	type image struct {
		Bytes []byte `parquet:"bytes"`
		Path  string `parquet:"path"`
	}
	type hf struct {
		Image image  `parquet:"image"`
		Label string `parquet:"label"`
	}
	var b bytes.Buffer
	if err := pq.Write(&b, []plain{{jpg, 1}, {[]byte("not an image"), 0}}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	b.Reset()
	if err := pq.Write(&b, []hf{{image{jpg, "a.jpg"}, "cat"}, {image{nil, "b.jpg"}, "dog"}}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	// Rows with fields (--fields caption,labels,objects): a string, a list of integers and the
	// Hugging Face object-detection struct, read from their repetition levels.
	type objects struct {
		Bbox     [][]float32 `parquet:"bbox,list"`
		Category []int64     `parquet:"category,list"`
	}
	type withFields struct {
		Image   []byte  `parquet:"image"`
		Caption string  `parquet:"caption"`
		Labels  []int64 `parquet:"labels,list"`
		Objects objects `parquet:"objects"`
	}
	b.Reset()
	if err := pq.Write(&b, []withFields{
		{jpg, "a cat", []int64{1, 2}, objects{[][]float32{{1, 2, 3, 4}, {0, 0, 1, 1}}, []int64{7, 8}}},
		{jpg, "", nil, objects{nil, nil}},
		{jpg, "x", []int64{3}, objects{[][]float32{{1, 2, 3}}, []int64{1}}},
	}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte("PAR1not parquetPAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		p := filepath.Join(t.TempDir(), "f.parquet")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, opts := range []Options{{}, {Fields: []string{"caption", "labels", "objects"}}} {
			src, err := Open(p, opts)
			if err != nil {
				continue
			}
			var items []source.Item
			_ = src.Enumerate(context.Background(), func(it source.Item) error {
				items = append(items, it)
				return nil
			})
			for _, it := range items {
				_ = src.Decode(context.Background(), it, func(c source.Clip) error {
					if len(c.Fields) != len(src.Info().Fields) {
						t.Fatalf("%d field values for a schema of %d", len(c.Fields), len(src.Info().Fields))
					}
					return nil
				})
			}
		}
	})
}
