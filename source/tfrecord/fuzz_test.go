package tfrecord

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/source"
)

// FuzzFile reads arbitrary bytes as a TFRecord file: Enumerate must not fail or panic, and every
// item must decode to one record or be a bad input naming itself.
func FuzzFile(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x05\x00\x00\x00\x00\x00\x00\x00garbage-crc-data-crc"))
	f.Add([]byte("\x0a\x03\x0a\x01\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x.tfrecord"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var items []source.Item
		if err := src.Enumerate(context.Background(), func(it source.Item) error { items = append(items, it); return nil }); err != nil {
			t.Fatalf("Enumerate: %v", err)
		}
		for _, it := range items {
			n := 0
			err := src.Decode(context.Background(), it, func(source.Clip) error { n++; return nil })
			var ie *source.InputError
			if err == nil && n != 1 || err != nil && (!errors.As(err, &ie) || ie.Input != it.Name) {
				t.Fatalf("item %s: %d records, %v", it.Name, n, err)
			}
		}
	})
}

// FuzzExample parses arbitrary bytes as a tf.train.Example: an error or an image and a label,
// never a panic.
func FuzzExample(f *testing.F) {
	f.Add([]byte("\x0a\x00"))
	f.Add([]byte("\x0a\x1c\x0a\x1a\x0a\x0dimage/encoded\x12\x09\x0a\x07\x0a\x05bytes"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &Source{opts: Options{ImageKey: DefaultImageKey, LabelKey: DefaultLabelKey}}
		img, label, err := s.parse(data)
		if err == nil && (img == nil || label < 0) {
			t.Fatalf("no error but image %v label %d", img != nil, label)
		}
	})
}
