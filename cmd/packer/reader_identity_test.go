package main

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestGoReaderRefusesManifestClassesUnlikeTheShards: a resealed manifest naming the classes in
// another order than the shards' headers would serve every record under another class name;
// the Go reader refuses the shard (verify already reports it), as the Python reader does.
func TestGoReaderRefusesManifestClassesUnlikeTheShards(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	for c, cls := range []string{"cat", "dog", "emu"} {
		if err := os.MkdirAll(filepath.Join(src, cls), 0o755); err != nil {
			t.Fatal(err)
		}
		for k := range 2 {
			img := image.NewRGBA(image.Rect(0, 0, 10+k, 8+c))
			img.Set(0, 0, color.RGBA{uint8(40 * c), uint8(k), 7, 255})
			f, err := os.Create(filepath.Join(src, cls, string(rune('0'+k))+".png"))
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, img); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	out := filepath.Join(tmp, "out")
	mustRun(t, "build", src, "-o", out)
	editManifest(t, out, func(m map[string]any) { m["classes"] = []string{"dog", "cat", "emu"} })
	d, err := shard.OpenDataset(out)
	if err == nil {
		defer d.Close()
		_, err = d.Record(0)
	}
	if err == nil || !strings.Contains(err.Error(), "shard-00000.pks") || !strings.Contains(err.Error(), "classes") {
		t.Errorf("reading a dataset whose manifest renames the classes: %v, want an error naming the shard and the classes", err)
	}
}
