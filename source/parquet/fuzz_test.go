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
	f.Add([]byte("PAR1not parquetPAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		p := filepath.Join(t.TempDir(), "f.parquet")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := Open(p, Options{})
		if err != nil {
			return
		}
		var items []source.Item
		_ = src.Enumerate(context.Background(), func(it source.Item) error {
			items = append(items, it)
			return nil
		})
		for _, it := range items {
			_ = src.Decode(context.Background(), it, func(source.Clip) error { return nil })
		}
	})
}
