package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestBuildVideoSizeChangeWithCrop: a video whose resolution changes mid-stream, packed in
// clips with --crop, is packed whole (the crop gives every frame one size), not skipped for
// its shape: the build hands the transform to the video source.
func TestBuildVideoSizeChangeWithCrop(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed")
	}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.MkdirAll(filepath.Join(src, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	ff := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ffmpeg", append([]string{"-nostdin", "-loglevel", "error", "-y"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg %v: %v\n%s", args, err, out)
		}
	}
	a, b := filepath.Join(tmp, "a.ts"), filepath.Join(tmp, "b.ts")
	ff("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", "5", "-c:v", "libx264", "-preset", "ultrafast", "-f", "mpegts", a)
	ff("-f", "lavfi", "-i", "testsrc=size=32x24:rate=10", "-frames:v", "5", "-c:v", "libx264", "-preset", "ultrafast", "-output_ts_offset", "0.5", "-f", "mpegts", b)
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	joined := filepath.Join(tmp, "joined.ts")
	if err := os.WriteFile(joined, append(da, db...), 0o644); err != nil {
		t.Fatal(err)
	}
	ff("-i", joined, "-c", "copy", filepath.Join(src, "c", "v.mkv"))
	out := filepath.Join(tmp, "out")
	mustRun(t, "build", src, "--from", "video", "--clip-len", "5", "--crop", "16", "-o", out)
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Count != 2 || len(m.Skipped) != 0 {
		t.Errorf("%d records, skipped %v; want 2 clips and nothing skipped", m.Count, m.Skipped)
	}
}
