package video

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// TestFramesSizeChangeNotASkipReason: a frame folder whose frames change size is packed
// whole wherever every record can still hold its frames: one record per frame (--clip-len
// 0), or clips whose frames a crop or an exact size brings to one size. Only a clip that
// cannot be one rectangular array (frames of one clip that transform to different sizes) is
// skipped, with ErrSizeChange naming the frames and the options that would fix it.
func TestFramesSizeChangeNotASkipReason(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	dir := filepath.Join(root, "c", "resized")
	os.MkdirAll(dir, 0o755)
	sizes := []string{"32x24", "32x24", "40x30", "32x24"}
	for i, sz := range sizes {
		ffmpeg(t, "-f", "lavfi", "-i", "testsrc=size="+sz, "-frames:v", "1", filepath.Join(dir, "f"+string(rune('1'+i))+".png"))
	}
	run := func(opts Options, spec transforms.Spec) ([]decoded, error) {
		t.Helper()
		src, err := OpenFrames(root, opts)
		if err != nil {
			t.Fatal(err)
		}
		src.PlanDecode(source.DecodePlan{Transform: spec.MustCompile()})
		its := items(t, src)
		if len(its) != 1 {
			t.Fatalf("%d items", len(its))
		}
		return decodeAll(t, src, its[0])
	}
	// One record per frame, each at its own size.
	recs, err := run(Options{}, transforms.Spec{})
	if err != nil || len(recs) != 4 {
		t.Fatalf("--clip-len 0: %d records, %v; want 4 records", len(recs), err)
	}
	if recs[2].w != 40 || recs[2].h != 30 || recs[3].w != 32 {
		t.Errorf("--clip-len 0: frame sizes %dx%d, %dx%d", recs[2].w, recs[2].h, recs[3].w, recs[3].h)
	}
	// Clips of 2 with a crop: both clips packed.
	for _, spec := range []transforms.Spec{{CropW: 16, CropH: 16}, {Width: 20, Height: 10}} {
		recs, err = run(Options{ClipLen: 2}, spec)
		if err != nil || len(recs) != 2 {
			t.Errorf("--clip-len 2 %+v: %d records, %v; want 2 clips", spec, len(recs), err)
		}
	}
	// Clips of 2 without a fixed size: the clip [f3, f4] cannot be one array.
	_, err = run(Options{ClipLen: 2}, transforms.Spec{})
	var ie *source.InputError
	if !errors.As(err, &ie) || !errors.Is(err, ErrSizeChange) || !strings.Contains(err.Error(), "--crop") {
		t.Errorf("--clip-len 2, no fixed size: %v, want an InputError wrapping ErrSizeChange that names --crop", err)
	}
}

// TestVideoSizeChangeNotASkipReason: the same for a video whose resolution changes
// mid-stream (two H.264 streams of different sizes joined): one record per frame keeps every
// frame at its own size, clips with a crop are packed, and only clips that cannot be one
// array are refused, with ErrSizeChange naming the fix.
func TestVideoSizeChangeNotASkipReason(t *testing.T) {
	needFFmpeg(t)
	root, tmp := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(root, "c"), 0o755)
	a, b := filepath.Join(tmp, "a.ts"), filepath.Join(tmp, "b.ts")
	genVideo(t, a, "testsrc=size=64x48:rate=10", 5, "-c:v", "libx264", "-preset", "ultrafast", "-f", "mpegts")
	genVideo(t, b, "testsrc=size=32x24:rate=10", 5, "-c:v", "libx264", "-preset", "ultrafast", "-output_ts_offset", "0.5", "-f", "mpegts")
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	joined := filepath.Join(tmp, "joined.ts")
	os.WriteFile(joined, append(da, db...), 0o644)
	ffmpeg(t, "-i", joined, "-c", "copy", filepath.Join(root, "c", "sizechange.mkv"))
	run := func(opts Options, spec transforms.Spec) ([]decoded, error) {
		t.Helper()
		src, err := Open(root, opts)
		if err != nil {
			t.Fatal(err)
		}
		src.PlanDecode(source.DecodePlan{Transform: spec.MustCompile()})
		its := items(t, src)
		if len(its) != 1 {
			t.Fatalf("%d items", len(its))
		}
		return decodeAll(t, src, its[0])
	}
	recs, err := run(Options{}, transforms.Spec{})
	if err != nil || len(recs) != 10 {
		t.Fatalf("--clip-len 0: %d records, %v; want 10", len(recs), err)
	}
	for i, r := range recs {
		w, h := 64, 48
		if i >= 5 {
			w, h = 32, 24
		}
		if r.w != w || r.h != h || len(r.frames[0]) != w*h*3 {
			t.Errorf("frame %d: %dx%d, %d bytes; want %dx%d", i, r.w, r.h, len(r.frames[0]), w, h)
		}
	}
	recs, err = run(Options{ClipLen: 5}, transforms.Spec{CropW: 16, CropH: 16})
	if err != nil || len(recs) != 2 {
		t.Errorf("--clip-len 5 --crop 16: %d clips, %v; want 2", len(recs), err)
	}
	_, err = run(Options{ClipLen: 5}, transforms.Spec{})
	var ie *source.InputError
	if !errors.As(err, &ie) || !errors.Is(err, ErrSizeChange) || !strings.Contains(err.Error(), "--crop") {
		t.Errorf("--clip-len 5, no fixed size: %v, want an InputError wrapping ErrSizeChange that names --crop", err)
	}
}
