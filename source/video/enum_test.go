package video

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// buildWithin runs the whole pipeline on src with a fixed crop and fails the test when it does
// not finish within limit (a FIFO opened for reading blocks forever).
func buildWithin(t *testing.T, src source.Source, limit time.Duration) (*shard.Manifest, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	done := make(chan error, 1)
	go func() {
		_, err := pipeline.Build(context.Background(), pipeline.Options{
			Source: src, Transform: transforms.Spec{CropW: 8, CropH: 8}.MustCompile(), Output: shards.Entry, Out: out, Workers: 2,
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(limit):
		t.Fatalf("build did not finish within %v (an input blocked?)", limit)
	}
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	return m, out
}

func skippedReasons(m *shard.Manifest) map[string]string {
	r := map[string]string{}
	for _, s := range m.Skipped {
		r[s.Input] = s.Reason
	}
	return r
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func checkSkipped(t *testing.T, m *shard.Manifest, want map[string]string) {
	t.Helper()
	got := skippedReasons(m)
	for name, reason := range want {
		if !strings.Contains(got[name], reason) {
			t.Errorf("skipped[%q] = %q, want a reason containing %q", name, got[name], reason)
		}
	}
	if len(got) != len(want) || len(m.Skipped) != len(want) {
		t.Errorf("skipped %q, want exactly the inputs of %q", got, want)
	}
}

// TestVideoSpecialFilesAreListed: every entry with a video extension in a class folder is an
// input: a symlink to a video is packed, a dangling symlink, a loop, a FIFO and a link to a
// device are skipped with their reason, without ever being opened; names that differ only in
// bytes that are not UTF-8 stay distinct.
func TestVideoSpecialFilesAreListed(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	a := filepath.Join(root, "a")
	genVideo(t, filepath.Join(a, "good.mp4"), "testsrc2=size=16x12:rate=10", 3)
	must(t, os.Symlink("good.mp4", filepath.Join(a, "link.mp4")))
	must(t, os.Symlink("missing.mp4", filepath.Join(a, "dangling.mp4")))
	must(t, os.Symlink("loop.mkv", filepath.Join(a, "loop.mkv")))
	must(t, os.Symlink("/dev/null", filepath.Join(a, "null.webm")))
	must(t, syscall.Mkfifo(filepath.Join(a, "fifo.avi"), 0o644))
	must(t, os.WriteFile(filepath.Join(a, "bad\xff.mkv"), []byte("not a video"), 0o644))
	must(t, os.WriteFile(filepath.Join(a, "bad\xfe.mkv"), []byte("not a video"), 0o644))
	must(t, os.Mkdir(filepath.Join(root, "b\xff"), 0o755))
	must(t, os.Symlink(filepath.Join(a, "good.mp4"), filepath.Join(root, "b\xff", "v.mov")))
	src, err := Open(root, Options{Timeout: 20 * time.Second})
	must(t, err)
	m, _ := buildWithin(t, src, 60*time.Second)
	if m.Count != 9 {
		t.Errorf("packed %d records, want 9 (3 frames of good.mp4 and of each link to it)", m.Count)
	}
	if strings.Join(m.Classes, "|") != `a|b\xff` {
		t.Errorf("classes %q", m.Classes)
	}
	checkSkipped(t, m, map[string]string{
		"a/dangling.mp4": "dangling symlink",
		"a/loop.mkv":     "symlink loop",
		"a/null.webm":    "not a regular file: character device",
		"a/fifo.avi":     "not a regular file: FIFO",
		`a/bad\xff.mkv`:  "",
		`a/bad\xfe.mkv`:  "",
	})
}

func writePNG(t *testing.T, p string, w, h int, v byte) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = v + byte(i)
	}
	img.Set(0, 0, color.RGBA{v, v, v, 255})
	var b bytes.Buffer
	must(t, png.Encode(&b, img))
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, b.Bytes(), 0o644))
}

// TestFramesSpecialFilesAreListed: a video folder with a frame that cannot be read (a FIFO, a
// dangling symlink) is skipped with the frame's reason instead of being packed without the
// frame; a dangling symlink where a video folder would be is skipped, not ignored; video
// folder names that differ only in bytes that are not UTF-8 stay distinct in the records'
// metadata.
func TestFramesSpecialFilesAreListed(t *testing.T) {
	root := t.TempDir()
	a := filepath.Join(root, "a")
	for i, n := range []string{"000.png", "001.png", "002.png"} {
		writePNG(t, filepath.Join(a, "v1", n), 10, 10, byte(i))
	}
	writePNG(t, filepath.Join(a, "v2", "000.png"), 10, 10, 1)
	must(t, syscall.Mkfifo(filepath.Join(a, "v2", "001.png"), 0o644))
	must(t, os.Symlink("missing", filepath.Join(a, "v3")))
	writePNG(t, filepath.Join(a, "v4", "000.png"), 10, 10, 1)
	must(t, os.Symlink("missing.png", filepath.Join(a, "v4", "001.png")))
	writePNG(t, filepath.Join(a, "v\xff", "000.png"), 10, 10, 1)
	writePNG(t, filepath.Join(a, "v\xfe", "000.png"), 10, 10, 1)
	src, err := OpenFrames(root, Options{})
	must(t, err)
	m, out := buildWithin(t, src, 30*time.Second)
	if m.Count != 5 {
		t.Errorf("packed %d records, want 5 (3 frames of v1, one of each v\\x..)", m.Count)
	}
	checkSkipped(t, m, map[string]string{
		"a/v2": "frame 1 (001.png): not a regular file: FIFO",
		"a/v3": "dangling symlink",
		"a/v4": "frame 1 (001.png): dangling symlink",
	})
	got := strings.Join(recordVideos(t, out), " ")
	if want := `a/v1 a/v1 a/v1 a/v\xfe a/v\xff`; got != want {
		t.Errorf("records' videos %q, want %q", got, want)
	}
}

// recordVideos returns the "video" field of every record's metadata.
func recordVideos(t *testing.T, dir string) []string {
	t.Helper()
	ds, err := shard.OpenDataset(dir)
	must(t, err)
	defer ds.Close()
	var out []string
	counts := ds.ShardCounts()
	for s := 0; s < ds.NumShards(); s++ {
		r, err := ds.Shard(s)
		must(t, err)
		for i := 0; i < int(counts[s]); i++ {
			var meta struct{ Video string }
			must(t, json.Unmarshal(r.RecordMeta(i), &meta))
			out = append(out, meta.Video)
		}
	}
	return out
}
