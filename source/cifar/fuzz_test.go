package cifar

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/source"
)

// FuzzCIFAR opens arbitrary bytes as a single CIFAR file, a tar or a .tar.gz of either kind,
// and enumerates and decodes everything. It must never panic.
func FuzzCIFAR(f *testing.F) {
	var rec10, rec100 []byte
	for _, r := range TestRecords(Kind10, 2, 1) {
		rec10, _ = AppendRecord(rec10, Kind10, r)
	}
	for _, r := range TestRecords(Kind100, 2, 1) {
		rec100, _ = AppendRecord(rec100, Kind100, r)
	}
	f.Add(rec10)
	f.Add(rec100)
	f.Add([]byte{})
	f.Add(append([]byte{200}, rec10[1:]...))
	for _, kind := range []string{Kind10, Kind100} {
		order := archiveOrder[kind]
		if b, err := TestArchive(kind, 1, order); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		dir := t.TempDir()
		p := filepath.Join(dir, "in.bin")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{Kind10, Kind100} {
			for _, split := range []string{"train", "test"} {
				s, err := open(p, kind, split, 1<<16, 1<<20, nil)
				if err != nil {
					continue
				}
				n := int64(0)
				err = s.Enumerate(context.Background(), func(it source.Item) error {
					n++
					if err := s.Decode(context.Background(), it, func(c source.Clip) error {
						if len(c.Frames) != 1 || len(c.Frames[0].Pix) != ImageSize {
							t.Fatalf("%s: bad clip", it.Name)
						}
						return nil
					}); err != nil {
						if _, ok := err.(*source.InputError); !ok {
							t.Fatalf("%s: decode error %v is not an input error", it.Name, err)
						}
					}
					return nil
				})
				if err == nil && n != s.Len() {
					t.Fatalf("enumerated %d records, Len says %d", n, s.Len())
				}
			}
		}
	})
}
