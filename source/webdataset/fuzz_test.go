package webdataset

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/source"
)

// FuzzShard reads arbitrary bytes as a shard: Enumerate must not fail or panic, and every item
// must decode to one record or be a bad input naming itself.
func FuzzShard(f *testing.F) {
	tarOf := func(members ...[2]string) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, m := range members {
			tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg})
			tw.Write([]byte(m[1]))
		}
		tw.Close()
		return b.Bytes()
	}
	jpg, _ := os.ReadFile(testfix.Corpus("grey.jpg"))
	f.Add(tarOf([2]string{"a.jpg", string(jpg)}, [2]string{"a.cls", "1"}))
	f.Add(tarOf([2]string{"a.cls", "x"}, [2]string{"b.png", "garbage"}, [2]string{"b.cls", "2"}))
	f.Add(tarOf([2]string{"d/k.tar.jpg", string(jpg)}, [2]string{"d/k.tar.cls", " 7 "})[:700])
	f.Add([]byte("not a tar at all"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "s.tar"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var items []source.Item
		if err := src.Enumerate(context.Background(), func(it source.Item) error {
			items = append(items, it)
			return nil
		}); err != nil {
			t.Fatalf("Enumerate: %v", err)
		}
		for i, it := range items {
			if it.Seq != int64(i) {
				t.Fatalf("item %d has Seq %d", i, it.Seq)
			}
			n := 0
			err := src.Decode(context.Background(), it, func(source.Clip) error { n++; return nil })
			var ie *source.InputError
			switch {
			case err == nil && n != 1:
				t.Fatalf("item %s: %d records", it.Name, n)
			case err != nil && (!errors.As(err, &ie) || ie.Input != it.Name):
				t.Fatalf("item %s: %v is not a bad input naming it", it.Name, err)
			}
		}
	})
}
