package verify

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/shard"
)

// FuzzManifest verifies a small real shard dataset under arbitrary manifests that carry a valid
// manifest_sha256 (so they get past the checksum to the cross-checks): verify must report, never
// panic, and must never call an edited manifest OK unless it describes the same data.
func FuzzManifest(f *testing.F) {
	dir := f.TempDir()
	spec := shard.SampleSpec{Shape: []int{2, 2}, DType: shard.Uint8, Layout: "hwc"}
	m := &shard.Manifest{Packer: "test", Format: "shards", FormatVersion: 1, Sample: spec,
		Classes: []string{"a", "b", "c"}, ClassCounts: []int64{2, 2, 2},
		Label: shard.LabelSpec{DType: "int64", Aux: []string{"x"}}, Source: map[string]any{"kind": "test"}, Transform: map[string]any{}}
	meta := map[string]any{"dataset": map[string]any{"packer": "test", "source": m.Source, "transform": m.Transform, "classes": m.Classes}}
	for s := range 2 {
		name := fmt.Sprintf("shard-%05d.pks", s)
		fw, err := testfix.CreateFile(filepath.Join(dir, name), shard.WriterOptions{Sample: spec, Label: m.Label, ShardIndex: s, Meta: meta})
		if err != nil {
			f.Fatal(err)
		}
		for i := range 3 {
			if err := fw.Append([]byte{byte(s), byte(i), 1, 2}, int64(i), []int64{int64(s)}, nil); err != nil {
				f.Fatal(err)
			}
		}
		if err := fw.Commit(); err != nil {
			f.Fatal(err)
		}
		m.Files = append(m.Files, shard.FileEntry{Path: name, Size: fw.FileSize(), SHA256: fw.SHA256(), Records: 3, FirstRecord: int64(3 * s)})
	}
	m.Count, m.Inputs = 6, 6
	good, err := m.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	mp := filepath.Join(dir, shard.ManifestName)
	if err := os.WriteFile(mp, good, 0o644); err != nil {
		f.Fatal(err)
	}
	if rep, err := Dir(context.Background(), dir, Options{}, nil); err != nil || !rep.OK {
		f.Fatalf("clean dataset: %v %+v", err, rep)
	}
	body := append(bytes.Clone(good[:bytes.LastIndex(good, []byte(",\n  \"manifest_sha256\""))]), "\n}\n"...)
	f.Add(body)
	f.Add(bytes.Replace(body, []byte(`"count": 6`), []byte(`"count": -6`), 1))
	f.Add(bytes.Replace(body, []byte(`"class_counts": [`), []byte(`"class_counts": [-1, `), 1))
	f.Add(bytes.Replace(body, []byte(`"first_record": 3`), []byte(`"first_record": 99999999999`), 1))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !bytes.HasSuffix(body, []byte("\n}\n")) {
			body = append(bytes.Clone(body), "\n}\n"...)
		}
		sealed, err := shard.SealManifest(body)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(mp, sealed, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := Dir(context.Background(), dir, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK {
			got, err := shard.ReadManifest(dir)
			if err != nil {
				t.Fatalf("verify OK but the manifest does not load: %v", err)
			}
			if got.Count != m.Count || len(got.Files) != len(m.Files) || fmt.Sprint(got.ClassCounts) != fmt.Sprint(m.ClassCounts) {
				t.Fatalf("verify OK for a manifest that describes other data: %+v", got)
			}
		}
	})
}
