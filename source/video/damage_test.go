package video

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// writeDamaged writes the damaged-video corpus under root/bad and returns, per file name, a
// check of its skip error.
func writeDamaged(t *testing.T, root string) map[string]func(error) bool {
	t.Helper()
	dir := filepath.Join(root, "bad")
	tmp := t.TempDir()
	h264 := codecs[0].args
	mk := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	genVideo(t, filepath.Join(dir, "good.mp4"), "testsrc2=size=64x48:rate=10", 8, h264...)

	// Truncated at half: with the index at the end (ffmpeg's default), and at the start.
	full := filepath.Join(tmp, "full.mp4")
	genVideo(t, full, "testsrc2=size=64x48:rate=10", 30, h264...)
	fast := filepath.Join(tmp, "fast.mp4")
	ffmpeg(t, "-i", full, "-c", "copy", "-movflags", "+faststart", fast)
	for name, p := range map[string]string{"trunc_moov_end.mp4": full, "trunc_moov_start.mp4": fast} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		mk(name, b[:len(b)/2])
	}
	// Matroska cut short (ffprobe reads its packets with an error but exits 0).
	mkv := filepath.Join(tmp, "full.mkv")
	genVideo(t, mkv, "testsrc2=size=64x48:rate=10", 30, h264...)
	if b, err := os.ReadFile(mkv); err != nil {
		t.Fatal(err)
	} else {
		mk("trunc.mkv", b[:len(b)/2])
	}
	// Damaged in the middle of the picture data: bytes overwritten across NAL boundaries
	// (ffprobe's parser notices), and inside one slice only (only the decoder does).
	b, _ := os.ReadFile(fast)
	nal := nthSlice(t, b)
	for i := len(b) / 2; i < len(b)/2+400; i++ {
		b[i] = 0xff
	}
	mk("garbled_packets.mp4", b)
	b, _ = os.ReadFile(fast)
	clear(b[nal.off+3 : nal.off+nal.n]) // the slice header's tail: deblocking_filter_idc out of range
	mk("garbled_slice.mp4", b)
	mk("zero.mp4", nil)
	rnd := make([]byte, 4096)
	for i := range rnd {
		rnd[i] = byte(i*7919 + i*i*31)
	}
	mk("random.mp4", rnd)
	// Frame size changes mid-stream: two H.264 streams of different sizes joined in MPEG-TS,
	// then remuxed into Matroska without re-encoding.
	a, bb := filepath.Join(tmp, "a.ts"), filepath.Join(tmp, "b.ts")
	genVideo(t, a, "testsrc=size=64x48:rate=10", 5, "-c:v", "libx264", "-preset", "ultrafast", "-f", "mpegts")
	genVideo(t, bb, "testsrc=size=32x24:rate=10", 5, "-c:v", "libx264", "-preset", "ultrafast", "-output_ts_offset", "0.5", "-f", "mpegts")
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(bb)
	joined := filepath.Join(tmp, "joined.ts")
	os.WriteFile(joined, append(da, db...), 0o644)
	ffmpeg(t, "-i", joined, "-c", "copy", filepath.Join(dir, "sizechange.mkv"))
	// Audio only.
	ffmpeg(t, "-f", "lavfi", "-i", "sine=duration=0.3", "-c:a", "flac", filepath.Join(dir, "audio.mkv"))

	is := func(target error, sub string) func(error) bool {
		return func(err error) bool {
			return errors.Is(err, target) && strings.Contains(err.Error(), sub)
		}
	}
	var fe FormatError
	format := func(sub string) func(error) bool {
		return func(err error) bool { return errors.As(err, &fe) && strings.Contains(err.Error(), sub) }
	}
	return map[string]func(error) bool{
		"good.mp4":             func(err error) bool { return err == nil },
		"trunc_moov_end.mp4":   is(ErrProbe, "moov atom not found"),
		"trunc_moov_start.mp4": format("truncated: the mov,mp4,m4a,3gp,3g2,mj2 index lists 30 frames but only"),
		"trunc.mkv":            is(ErrDamaged, "damaged file: reading its packets: [matroska,webm] File ended prematurely"),
		"garbled_packets.mp4":  is(ErrDamaged, "damaged file: reading its packets: [NULL] Invalid NAL unit size"),
		"garbled_slice.mp4":    is(ErrDecode, "ffmpeg failed to decode the video at frame 15: [h264] deblocking_filter_idc 32 out of range"),
		"zero.mp4":             is(transforms.ErrEmpty, "empty file (0 bytes)"),
		"random.mp4":           is(ErrProbe, "bad/random.mp4: Invalid data found when processing input"),
		"sizechange.mkv":       is(ErrSizeChange, "frame size changed at frame 5 (t=0.5s): 32x24, the first frame is 64x48, and the frames of a clip record must have one size"),
		"audio.mkv":            format("no video stream (streams: audio flac)"),
	}
}

func TestDamagedVideos(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	checks := writeDamaged(t, root)
	src, err := Open(root, Options{ClipLen: 4, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, it := range items(t, src) {
		check := checks[filepath.Base(it.Name)]
		if check == nil {
			t.Fatalf("unexpected item %s", it.Name)
		}
		seen++
		recs, err := decodeAll(t, src, it)
		if err != nil {
			var ie *source.InputError
			if !errors.As(err, &ie) || ie.Input != it.Name {
				t.Errorf("%s: error %v is not an InputError naming the video", it.Name, err)
			}
			if strings.Contains(err.Error(), root) || strings.Contains(err.Error(), " @ 0x") {
				t.Errorf("%s: reason is host-dependent: %v", it.Name, err)
			}
		}
		if !check(err) {
			t.Errorf("%s: unexpected result: %v", it.Name, err)
		}
		switch filepath.Base(it.Name) {
		case "good.mp4":
			if len(recs) != 2 {
				t.Errorf("good.mp4: %d clips, want 2", len(recs))
			}
		case "garbled_slice.mp4": // clips of frames 0-11, decoded before the damage at frame 15
			if len(recs) != 3 {
				t.Errorf("garbled_slice.mp4: %d clips before the damage, want 3", len(recs))
			}
		case "sizechange.mkv":
			if len(recs) != 1 { // frames 0-3; the clip that would span the change is never emitted
				t.Errorf("sizechange.mkv: %d clips before the size change, want 1", len(recs))
			}
		default:
			if len(recs) != 0 {
				t.Errorf("%s: %d clips emitted before the failure", it.Name, len(recs))
			}
		}
	}
	if seen != len(checks) {
		t.Errorf("%d items, want %d", seen, len(checks))
	}

	// An ffmpeg without the stream's decoder.
	delete(src.decoders, "h264")
	for _, it := range items(t, src) {
		if filepath.Base(it.Name) == "good.mp4" {
			_, err := decodeAll(t, src, it)
			var fe FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), "unsupported codec h264: this ffmpeg has no decoder for it") {
				t.Errorf("no decoder: %v", err)
			}
		}
	}
}

// fakeTool writes a shell script standing in for ffmpeg or ffprobe: it passes -decoders and
// Open's self-test (a lavfi input) to the real tool; otherwise it starts a child that sleeps
// and waits for it, as a hung decoder would (the child holds the pipes, so only a
// process-group kill ends the wait).
func fakeTool(t *testing.T, real string) string {
	t.Helper()
	path, err := exec.LookPath(real)
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncase \"$*\" in\n*-decoders*|*lavfi*) exec " + path + " \"$@\";;\nesac\nsleep 60 &\nwait\n"
	p := filepath.Join(t.TempDir(), "fake-"+real)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHangingDecoder(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	genVideo(t, filepath.Join(root, "c", "v.mp4"), "testsrc2=size=64x48:rate=10", 4, codecs[0].args...)
	for _, tc := range []struct{ tool, want string }{
		{"ffmpeg", "decoder timed out: ffmpeg made no progress for 2s (--decode-timeout); killed"},
		{"ffprobe", "decoder timed out: ffprobe made no progress for 2s (--decode-timeout); killed"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			opts := Options{ClipLen: 4, Timeout: 2 * time.Second}
			if tc.tool == "ffmpeg" {
				opts.FFmpeg = fakeTool(t, "ffmpeg")
			} else {
				opts.FFprobe = fakeTool(t, "ffprobe")
			}
			src, err := Open(root, opts)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = decodeAll(t, src, items(t, src)[0])
			if el := time.Since(start); el > 8*time.Second {
				t.Errorf("hung decoder took %v to give up", el)
			}
			if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	root := t.TempDir()
	if _, err := Open(root, Options{}); !errors.Is(err, ErrNoClasses) {
		t.Errorf("no classes: %v", err)
	}
	os.MkdirAll(filepath.Join(root, "a"), 0o755)
	os.MkdirAll(filepath.Join(root, "b", "v1"), 0o755)
	os.WriteFile(filepath.Join(root, "a", "x.mp4"), nil, 0o644)
	if _, err := OpenFrames(root, Options{}); !errors.Is(err, ErrEmptyClass) || !strings.Contains(err.Error(), " a ") {
		t.Errorf("frames, empty class a: %v", err)
	}
	if _, err := Open(root, Options{}); !errors.Is(err, ErrEmptyClass) || !strings.Contains(err.Error(), " b ") {
		t.Errorf("video, empty class b: %v", err)
	}
	if _, err := OpenFrames(root, Options{FPS: 5}); err == nil || !strings.Contains(err.Error(), "no timeline") {
		t.Errorf("frames with --fps: %v", err)
	}
	if _, err := OpenFrames(root, Options{ClipStride: 2}); err == nil {
		t.Error("stride without clip length accepted")
	}
	if _, err := OpenFrames(root, Options{Short: "wrap"}); err == nil {
		t.Error("unknown short policy accepted")
	}
	os.WriteFile(filepath.Join(root, "b", "clip.mp4"), nil, 0o644)
	if _, err := Open(root, Options{FFmpeg: filepath.Join(root, "no-such-ffmpeg")}); !errors.Is(err, ErrNoFFmpeg) {
		t.Errorf("missing ffmpeg: %v", err)
	}
}

func TestFramesErrors(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	mkFrames := func(dir string, sizes ...string) {
		os.MkdirAll(filepath.Join(root, dir), 0o755)
		for i, sz := range sizes {
			ffmpeg(t, "-f", "lavfi", "-i", "testsrc=size="+sz, "-frames:v", "1", filepath.Join(root, dir, "f"+string(rune('1'+i))+".png"))
		}
	}
	mkFrames("c/resized", "32x24", "32x24", "40x30", "32x24")
	mkFrames("c/short", "32x24", "32x24")
	os.MkdirAll(filepath.Join(root, "c", "empty"), 0o755)
	os.WriteFile(filepath.Join(root, "c", "empty", "notes.txt"), []byte("x"), 0o644)
	src, err := OpenFrames(root, Options{ClipLen: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"c/empty":   "no frames decoded: the folder holds no frame images",
		"c/resized": "frame size changed: frame 2 (f3.png) is 40x30, frame 0 (f1.png) is 32x24, and the frames of a clip record must have one size",
		"c/short":   "video has 2 frames, fewer than --clip-len 3",
	}
	for _, it := range items(t, src) {
		recs, err := decodeAll(t, src, it)
		var ie *source.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), want[it.Name]) || len(recs) != 0 {
			t.Errorf("%s: %d records, err %v, want %q", it.Name, len(recs), err, want[it.Name])
		}
	}
	// Padding repeats the last frame.
	src, _ = OpenFrames(root, Options{ClipLen: 3, Short: ShortPad})
	for _, it := range items(t, src) {
		if it.Name != "c/short" {
			continue
		}
		recs, err := decodeAll(t, src, it)
		if err != nil || len(recs) != 1 || !bytes.Equal(recs[0].frames[2], recs[0].frames[1]) ||
			recs[0].meta != `{"file":"f1.png","frame":0,"frames":3,"label":0,"padded":1,"video":"c/short"}` {
			t.Errorf("padded: %v %d %+v", err, len(recs), recs)
		}
	}
}

// TestSelfTestRejectsUnusableFFmpeg: an "ffmpeg" whose decode output packer cannot follow
// fails Open, instead of failing (or hanging on) every video.
func TestSelfTestRejectsUnusableFFmpeg(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "c"), 0o755)
	os.WriteFile(filepath.Join(root, "c", "v.mp4"), []byte("x"), 0o644)
	path, _ := exec.LookPath("ffmpeg")
	// Rejects -fps_mode, as ffmpeg before 5.1 does.
	script := "#!/bin/sh\ncase \"$*\" in\n*-decoders*) exec " + path + " \"$@\";;\nesac\n" +
		"echo \"Unrecognized option 'fps_mode'.\" >&2\nexit 1\n"
	p := filepath.Join(t.TempDir(), "old-ffmpeg")
	os.WriteFile(p, []byte(script), 0o755)
	_, err := Open(root, Options{FFmpeg: p, Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "self-test decode") || !strings.Contains(err.Error(), "ffmpeg 5.1 or newer") {
		t.Fatalf("err = %v", err)
	}
}

// nalRef is one NAL unit of an mp4's media data.
type nalRef struct{ off, n int }

// nthSlice finds the middle non-IDR slice NAL unit of a one-track H.264 mp4 whose samples
// are stored in one mdat box as length-prefixed NAL units.
func nthSlice(t *testing.T, b []byte) nalRef {
	t.Helper()
	be := func(p int) int { return int(b[p])<<24 | int(b[p+1])<<16 | int(b[p+2])<<8 | int(b[p+3]) }
	for i := 0; i+8 <= len(b); {
		size, typ := be(i), string(b[i+4:i+8])
		if size < 8 {
			break
		}
		if typ == "mdat" {
			var slices []nalRef
			for p := i + 8; p+4 <= i+size && p+4 <= len(b); {
				n := be(p)
				if b[p+4]&0x1f == 1 && n > 40 {
					slices = append(slices, nalRef{p + 4, n})
				}
				p += 4 + n
			}
			if len(slices) == 0 {
				break
			}
			return slices[len(slices)/2]
		}
		i += size
	}
	t.Fatal("no slice NAL unit found in the mp4")
	return nalRef{}
}
