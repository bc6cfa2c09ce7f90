package idx

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/source"
)

// FuzzIDX opens arbitrary images and labels files (raw or gzip) and enumerates and decodes
// every record. It must never panic, and header values must never drive an allocation.
func FuzzIDX(f *testing.F) {
	images := append(AppendHeader(nil, TypeUbyte, []int{3, 2, 2}), pixels(3, 4, 0)...)
	labels := append(AppendHeader(nil, TypeUbyte, []int{3}), 1, 2, 12)
	short, _ := EncodeLabels(TypeShort, []int64{-1, 2, 3})
	f.Add(images, labels)
	f.Add(images, append(AppendHeader(nil, TypeShort, []int{3}), short...))
	f.Add(gzipBytes(images), gzipBytes(labels))
	f.Add(AppendHeader(nil, TypeUbyte, []int{1 << 31, 28, 28}), labels)
	f.Add(append(AppendHeader(nil, TypeUbyte, []int{1, 2, 2, 3}), make([]byte, 12)...), append(AppendHeader(nil, TypeInt, []int{1}), 0, 0, 0, 5))
	f.Fuzz(func(t *testing.T, images, labels []byte) {
		if len(images)+len(labels) > 1<<20 {
			return
		}
		dir := t.TempDir()
		ip, lp := filepath.Join(dir, "images"), filepath.Join(dir, "labels")
		if err := os.WriteFile(ip, images, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(lp, labels, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenFiles(ip, lp, nil)
		if err != nil {
			return
		}
		n := int64(0)
		err = s.Enumerate(context.Background(), func(it source.Item) error {
			n++
			return s.Decode(context.Background(), it, func(c source.Clip) error {
				im := c.Frames[0]
				if im.W*im.H*im.C != len(im.Pix) {
					t.Fatalf("%s: %dx%dx%d image with %d bytes", it.Name, im.W, im.H, im.C, len(im.Pix))
				}
				return nil
			})
		})
		if err == nil && n != s.Len() {
			t.Fatalf("%d records, Len %d", n, s.Len())
		}
	})
}
