package video

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// codecs are the containers and codecs the suite generates: every extension packer accepts.
var codecs = []struct {
	name string // file name
	args []string
}{
	{"h264.mp4", []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "ultrafast"}},
	{"mpeg4.mov", []string{"-c:v", "mpeg4", "-q:v", "3"}},
	{"ffv1.mkv", []string{"-c:v", "ffv1"}},
	{"vp9.mkv", []string{"-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "200k"}},
	{"mjpeg.avi", []string{"-c:v", "mjpeg", "-q:v", "3"}},
	{"vp8.webm", []string{"-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "200k"}},
}

// TestDecodeFidelity checks, for every container and codec and for frame counts around the
// clip length 4, that each clip frame equals ffmpeg's own rgb24 output for that frame, and
// the clips start where they should.
func TestDecodeFidelity(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	// Every clip edge with H.264 (3, 4, 5, 8 and 9 frames for T=4), two counts for the rest.
	total := 0
	for i, c := range codecs {
		counts := []int{4, 9}
		if i == 0 {
			counts = []int{3, 4, 5, 8, 9}
		}
		for _, n := range counts {
			genVideo(t, filepath.Join(root, "c", fmt.Sprintf("n%d_%s", n, c.name)), "testsrc2=size=64x48:rate=10", n, c.args...)
			total++
		}
	}
	src, err := Open(root, Options{ClipLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	its := items(t, src)
	if len(its) != total {
		t.Fatalf("%d items, want %d", len(its), total)
	}
	for _, it := range its {
		t.Run(it.Name, func(t *testing.T) {
			var n int
			fmt.Sscanf(filepath.Base(it.Name), "n%d_", &n)
			recs, err := decodeAll(t, src, it)
			if n < 4 {
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte(fmt.Sprintf("video has %d frames, fewer than --clip-len 4", n))) {
					t.Fatalf("short video: err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			raw := rawFrames(t, it.Path, 64, 48, "")
			if len(raw) != n {
				t.Fatalf("ffmpeg decoded %d frames, want %d", len(raw), n)
			}
			if len(recs) != n/4 {
				t.Fatalf("%d clips, want %d", len(recs), n/4)
			}
			for k, r := range recs {
				var m recordMeta
				if err := json.Unmarshal([]byte(r.meta), &m); err != nil {
					t.Fatal(err)
				}
				if m.Frame != 4*k || m.Frames != 4 || m.Video != it.Name || m.Time == nil || *m.Time != roundMicro(float64(4*k)/10) {
					t.Errorf("clip %d meta %s", k, r.meta)
				}
				for j, f := range r.frames {
					if !bytes.Equal(f, raw[4*k+j]) {
						t.Fatalf("clip %d frame %d differs from ffmpeg's rgb24 frame %d", k, j, 4*k+j)
					}
				}
			}
		})
	}
}

// TestDecodeFPS checks --fps against ffmpeg's fps filter, per-frame records, and times.
func TestDecodeFPS(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	p := filepath.Join(root, "c", "v.mp4")
	genVideo(t, p, "testsrc2=size=64x48:rate=25", 25, codecs[0].args...)
	src, err := Open(root, Options{FPS: 10})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := decodeAll(t, src, items(t, src)[0])
	if err != nil {
		t.Fatal(err)
	}
	raw := rawFrames(t, p, 64, 48, "fps=10")
	if len(recs) != len(raw) || len(raw) < 9 {
		t.Fatalf("%d records, ffmpeg's fps=10 gives %d frames", len(recs), len(raw))
	}
	for i, r := range recs {
		if len(r.frames) != 1 || !bytes.Equal(r.frames[0], raw[i]) {
			t.Fatalf("record %d differs from ffmpeg's fps=10 frame", i)
		}
		want := fmt.Sprintf(`{"frame":%d,"frames":1,"label":0,"time":%v,"video":"c/v.mp4"}`, i, roundMicro(float64(i)/10))
		if r.meta != want {
			t.Errorf("record %d meta %s, want %s", i, r.meta, want)
		}
	}
	if info := src.Info(); info.Spec["fps"] != 10.0 || info.ClipLen != 0 || !info.HasMeta {
		t.Errorf("info %+v", info)
	}
}

// TestSlideshowResize decodes a slideshow of real photos and checks packer's resize of each
// frame against transforms applied to ffmpeg's own rgb24 frame.
func TestSlideshowResize(t *testing.T) {
	needFFmpeg(t)
	photos, _ := filepath.Glob("/usr/share/backgrounds/*.jpg")
	if len(photos) < 2 {
		more, _ := filepath.Glob("/usr/share/backgrounds/*.png")
		photos = append(photos, more...)
	}
	if len(photos) < 2 {
		t.Skip("no photos in /usr/share/backgrounds")
	}
	root := t.TempDir()
	// Scale each photo once, then show each for 5 frames at 10 fps.
	var small []string
	for i, ph := range photos[:2] {
		q := filepath.Join(root, fmt.Sprintf("photo%d.png", i))
		ffmpeg(t, "-i", ph, "-vf", "scale=120:80,setsar=1", "-frames:v", "1", q)
		small = append(small, q)
	}
	p := filepath.Join(root, "photos", "show.mp4")
	os.MkdirAll(filepath.Dir(p), 0o755)
	ffmpeg(t, "-loop", "1", "-framerate", "10", "-t", "0.5", "-i", small[0], "-loop", "1", "-framerate", "10", "-t", "0.5", "-i", small[1],
		"-filter_complex", "[0][1]concat=n=2:v=1", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "ultrafast", p)
	src, err := Open(root, Options{ClipLen: 3, ClipStride: 2})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := decodeAll(t, src, items(t, src)[0])
	if err != nil {
		t.Fatal(err)
	}
	raw := rawFrames(t, p, 120, 80, "")
	if want := (len(raw)-3)/2 + 1; len(recs) != want {
		t.Fatalf("%d clips from %d frames, want %d", len(recs), len(raw), want)
	}
	spec := transforms.Spec{Resize: 40, CropW: 32, CropH: 32, Filter: transforms.Bicubic}
	for k, r := range recs {
		for j, f := range r.frames {
			got := applySpec(t, spec, f, r.w, r.h)
			want := applySpec(t, spec, raw[2*k+j], 120, 80)
			if !bytes.Equal(got, want) {
				t.Fatalf("clip %d frame %d: resized frame differs", k, j)
			}
		}
	}
}

// TestFramesMatchVideo packs the same content as a lossless video and as PNG frames extracted
// by ffmpeg (names frame_1..frame_12, so natural order matters) and requires equal records.
func TestFramesMatchVideo(t *testing.T) {
	needFFmpeg(t)
	vroot, froot := t.TempDir(), t.TempDir()
	p := filepath.Join(vroot, "cls", "clip.mkv")
	genVideo(t, p, "testsrc2=size=64x48:rate=10", 12, "-c:v", "ffv1")
	fdir := filepath.Join(froot, "cls", "clip.mkv")
	os.MkdirAll(fdir, 0o755)
	ffmpeg(t, "-i", p, "-start_number", "1", filepath.Join(fdir, "frame_%d.png"))

	opts := Options{ClipLen: 4, ClipStride: 3}
	vs, err := Open(vroot, opts)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := OpenFrames(froot, opts)
	if err != nil {
		t.Fatal(err)
	}
	vrecs, err := decodeAll(t, vs, items(t, vs)[0])
	if err != nil {
		t.Fatal(err)
	}
	fit := items(t, fs)
	if len(fit) != 1 || fit[0].Name != "cls/clip.mkv" {
		t.Fatalf("frames items %+v", fit)
	}
	frecs, err := decodeAll(t, fs, fit[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(vrecs) != 3 || len(frecs) != len(vrecs) {
		t.Fatalf("%d video clips, %d frame-folder clips, want 3", len(vrecs), len(frecs))
	}
	for k := range vrecs {
		for j := range vrecs[k].frames {
			if !bytes.Equal(vrecs[k].frames[j], frecs[k].frames[j]) {
				t.Fatalf("clip %d frame %d: video and frames sources differ", k, j)
			}
		}
		want := fmt.Sprintf(`{"file":"frame_%d.png","frame":%d,"frames":4,"label":0,"video":"cls/clip.mkv"}`, 3*k+1, 3*k)
		if frecs[k].meta != want {
			t.Errorf("frames meta %s, want %s", frecs[k].meta, want)
		}
	}
}

// TestFramesWindows packs JPEG frame folders (3 clips, with --short pad) with and without
// DecodePlan.Windows and requires the same transformed clips, frame by frame, with the JPEG frames
// really decoded as windows.
func TestFramesWindows(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	dir := filepath.Join(root, "cls", "vid")
	os.MkdirAll(dir, 0o755)
	ffmpeg(t, "-f", "lavfi", "-i", "testsrc2=size=160x90:rate=10", "-frames:v", "7", filepath.Join(dir, "f_%d.jpg"))
	spec := transforms.Spec{Resize: 40, CropW: 32, CropH: 32, Filter: transforms.Bicubic}
	opts := Options{ClipLen: 4, ClipStride: 3, Short: ShortPad}
	run := func(windows bool) (out [][]byte, windowed int) {
		fs, err := OpenFrames(root, opts)
		if err != nil {
			t.Fatal(err)
		}
		fs.PlanDecode(source.DecodePlan{Transform: spec.MustCompile(), Windows: windows})
		err = fs.Decode(context.Background(), items(t, fs)[0], func(c source.Clip) error {
			for i, f := range c.Frames {
				x, y, w, h := 0, 0, f.W, f.H
				if c.Windows != nil {
					win := c.Windows[i]
					x, y, w, h = win.X, win.Y, win.FullW, win.FullH
					if w != f.W || h != f.H {
						windowed++
					}
				}
				dst := make([]byte, spec.MustCompile().OutputSpec(w, h, 3).Size())
				if err := spec.MustCompile().NewWorker().ApplyWindow(f, x, y, w, h, dst); err != nil {
					return err
				}
				out = append(out, dst)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, windowed
	}
	whole, n0 := run(false)
	win, n1 := run(true)
	if n0 != 0 || n1 == 0 || len(whole) != 8 || len(win) != len(whole) {
		t.Fatalf("%d and %d frames, %d and %d windowed", len(whole), len(win), n0, n1)
	}
	for i := range whole {
		if !bytes.Equal(whole[i], win[i]) {
			t.Fatalf("frame %d: windowed decode differs", i)
		}
	}
}
