package video

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// needFFmpeg fails the test when ffmpeg is missing, unless PACKER_NO_FFMPEG=1 says that is
// expected (then it skips, visibly).
func needFFmpeg(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("PACKER_NO_FFMPEG") == "1" {
				t.Skipf("%s not installed and PACKER_NO_FFMPEG=1: skipping the video tests", tool)
			}
			t.Fatalf("%s not found (%v): install ffmpeg, or set PACKER_NO_FFMPEG=1 to skip the video tests", tool, err)
		}
	}
}

// ffmpeg runs ffmpeg with args, failing the test on error.
func ffmpeg(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command("ffmpeg", append([]string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// genVideo writes a synthetic video of n frames (64x48 unless size says otherwise).
func genVideo(t testing.TB, path, src string, n int, codecArgs ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"-f", "lavfi", "-i", src, "-frames:v", strconv.Itoa(n)}
	ffmpeg(t, append(append(args, codecArgs...), path)...)
}

// rawFrames decodes path with a plain ffmpeg command line (optionally through -vf) to rgb24
// and returns the frames: ffmpeg's own answer, to compare packer's frames with.
func rawFrames(t testing.TB, path string, w, h int, vf string) [][]byte {
	t.Helper()
	args := []string{"-nostdin", "-hide_banner", "-loglevel", "error", "-i", path}
	if vf != "" {
		args = append(args, "-vf", vf)
	}
	args = append(args, "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
	out, err := exec.Command("ffmpeg", args...).Output()
	if err != nil {
		t.Fatalf("ffmpeg decode %s: %v", path, err)
	}
	size := w * h * 3
	if len(out)%size != 0 {
		t.Fatalf("%s: %d bytes of rgb24 is not a whole number of %dx%d frames", path, len(out), w, h)
	}
	var frames [][]byte
	for i := 0; i < len(out); i += size {
		frames = append(frames, out[i:i+size])
	}
	return frames
}

// decoded is one record as a Source emitted it, with its frames copied.
type decoded struct {
	frames [][]byte
	w, h   int
	meta   string
	label  int64
}

// decodeAll runs src.Decode on one item and collects the records and the error.
func decodeAll(t testing.TB, src source.Source, it source.Item) ([]decoded, error) {
	t.Helper()
	var recs []decoded
	err := src.Decode(context.Background(), it, func(c source.Clip) error {
		d := decoded{meta: string(c.Meta), label: c.Label, w: c.Frames[0].W, h: c.Frames[0].H}
		for _, f := range c.Frames {
			d.frames = append(d.frames, bytes.Clone(f.Pix))
		}
		recs = append(recs, d)
		return nil
	})
	return recs, err
}

// items enumerates a source.
func items(t testing.TB, src source.Source) []source.Item {
	t.Helper()
	var its []source.Item
	if err := src.Enumerate(context.Background(), func(it source.Item) error { its = append(its, it); return nil }); err != nil {
		t.Fatal(err)
	}
	return its
}

// applySpec transforms one rgb24 frame with spec, as the pipeline does.
func applySpec(t testing.TB, spec transforms.Spec, pix []byte, w, h int) []byte {
	t.Helper()
	c := spec.MustCompile()
	out := make([]byte, c.OutputSpec(w, h, 3).Size())
	if err := c.NewWorker().Apply(transforms.Image{W: w, H: h, C: 3, Pix: pix}, out); err != nil {
		t.Fatal(err)
	}
	return out
}
