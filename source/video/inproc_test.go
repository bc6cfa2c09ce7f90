package video

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// needLibav skips the test when the in-process decoder cannot be loaded (a build without cgo,
// or a machine without the libraries).
func needLibav(t testing.TB) {
	t.Helper()
	needFFmpeg(t)
	if err := avLoad(); err != nil {
		t.Skipf("in-process decoder unavailable: %v", err)
	}
}

// writeIdentityCorpus writes videos that exercise what the two decoders must agree on: every
// codec and container of the fidelity test, pixel formats that need different conversions,
// odd sizes, a sample aspect ratio, rotation from the display matrix, B-frames with a start
// time that is not 0, MPEG-TS timestamps, variable frame rates, a size change and the damaged
// corpus.
func writeIdentityCorpus(t *testing.T, root string) (n int) {
	t.Helper()
	dir := filepath.Join(root, "c")
	for _, c := range codecs {
		genVideo(t, filepath.Join(dir, c.name), "testsrc2=size=64x48:rate=10", 13, c.args...)
		n++
	}
	x264 := func(extra ...string) []string {
		return append([]string{"-c:v", "libx264", "-preset", "ultrafast"}, extra...)
	}
	gen := func(name, src string, frames int, args ...string) {
		genVideo(t, filepath.Join(dir, name), src, frames, args...)
		n++
	}
	gen("yuv444.mp4", "testsrc2=size=64x48:rate=10", 9, x264("-pix_fmt", "yuv444p")...)
	gen("yuv422_10.mkv", "testsrc2=size=64x48:rate=10", 9, x264("-pix_fmt", "yuv422p10le")...)
	gen("gray.mkv", "testsrc2=size=64x48:rate=10", 9, "-c:v", "ffv1", "-pix_fmt", "gray")
	gen("rgb.mkv", "testsrc2=size=64x48:rate=10", 9, "-c:v", "ffv1", "-pix_fmt", "bgr0")
	gen("odd.mp4", "testsrc2=size=33x17:rate=10", 9, x264("-pix_fmt", "yuv444p")...)
	gen("odd420.mkv", "testsrc2=size=35x21:rate=10", 9, "-c:v", "ffv1", "-pix_fmt", "yuv420p")
	gen("sar.mp4", "testsrc2=size=64x48:rate=10,setsar=4/3", 9, x264()...)
	gen("bframes.mp4", "testsrc2=size=64x48:rate=25", 40, x264("-bf", "3", "-g", "12", "-output_ts_offset", "1.3")...)
	// MPEG-TS content (the demuxer is chosen by content, not by the name).
	gen("bframes_ts.mp4", "testsrc2=size=64x48:rate=25", 40, x264("-bf", "3", "-g", "12", "-f", "mpegts")...)
	gen("ntsc.mov", "testsrc2=size=64x48:rate=30000/1001", 20, "-c:v", "mpeg4")
	gen("vfr.mkv", "testsrc2=size=64x48:rate=10,setpts='N*N/10/TB'", 12, x264()...)
	gen("packed_b.avi", "testsrc2=size=64x48:rate=10", 15, "-c:v", "mpeg4", "-bf", "2", "-q:v", "4")
	gen("hevc.mkv", "testsrc2=size=64x48:rate=10", 10, "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error")
	gen("mpeg2_interlaced.mkv", "testsrc2=size=64x48:rate=25", 10, "-c:v", "mpeg2video", "-flags", "+ilme+ildct", "-bf", "2")
	gen("prores.mov", "testsrc2=size=64x48:rate=10", 5, "-c:v", "prores_ks", "-profile:v", "3")
	gen("theora.mkv", "testsrc2=size=64x48:rate=10", 8, "-c:v", "libtheora")
	gen("mjpeg422.avi", "testsrc2=size=64x48:rate=10", 6, "-c:v", "mjpeg", "-pix_fmt", "yuvj422p")
	// Rotation: the display matrix of an mp4 (the mov muxer writes the rotate tag).
	tmp := t.TempDir()
	plain := filepath.Join(tmp, "plain.mp4")
	genVideo(t, plain, "testsrc2=size=64x48:rate=10", 6, x264()...)
	for _, r := range []string{"90", "180", "270"} {
		ffmpeg(t, "-i", plain, "-c", "copy", "-metadata:s:v:0", "rotate="+r, filepath.Join(dir, "rot"+r+".mp4"))
		n++
	}
	// Damage in a stream with B-frames and a start offset (frames come out of order).
	full := filepath.Join(tmp, "bf.mp4")
	genVideo(t, full, "testsrc2=size=64x48:rate=25", 40, x264("-bf", "3", "-g", "12", "-output_ts_offset", "0.7")...)
	fast := filepath.Join(tmp, "bf_fast.mp4")
	ffmpeg(t, "-i", full, "-c", "copy", "-movflags", "+faststart", fast)
	b, err := os.ReadFile(fast)
	if err != nil {
		t.Fatal(err)
	}
	nal := nthSlice(t, b)
	clear(b[nal.off+3 : nal.off+nal.n])
	if err := os.WriteFile(filepath.Join(dir, "garbled_bframes.mp4"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	n++
	n += len(writeDamaged(t, root))
	return n
}

// TestLibavMatchesFFmpeg decodes every video of the identity corpus through both decoders,
// with several option sets, and requires the same records (pixels, sizes, metadata: times
// included) and the same errors.
func TestLibavMatchesFFmpeg(t *testing.T) {
	needLibav(t)
	t.Setenv(DecoderEnv, "")
	root := t.TempDir()
	n := writeIdentityCorpus(t, root)
	videos, frames := 0, 0
	for _, tc := range []struct {
		name string
		opts Options
		spec transforms.Spec
	}{
		{"frames", Options{}, transforms.Spec{}},
		{"clips", Options{ClipLen: 4, ClipStride: 3}, transforms.Spec{}},
		{"clips-crop", Options{ClipLen: 4}, transforms.Spec{CropW: 16, CropH: 16}},
		{"fps7", Options{FPS: 7}, transforms.Spec{}},
		{"fps24", Options{FPS: 24, ClipLen: 2}, transforms.Spec{CropW: 16, CropH: 16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := func(dec string) *Source {
				o := tc.opts
				o.Decoder, o.Timeout = dec, 30*time.Second
				src, err := Open(root, o)
				if err != nil {
					t.Fatal(err)
				}
				src.PlanDecode(source.DecodePlan{Transform: tc.spec.MustCompile()})
				if src.libav != (dec == DecoderLibav) {
					t.Fatalf("Decoder %s: libav = %v", dec, src.libav)
				}
				return src
			}
			pipe, inproc := open(DecoderFFmpeg), open(DecoderLibav)
			if pipe.FFmpegVersion() != inproc.FFmpegVersion() {
				t.Errorf("versions differ: %q (ffmpeg) and %q (libav)", pipe.FFmpegVersion(), inproc.FFmpegVersion())
			}
			its := items(t, pipe)
			if len(its) != n {
				t.Fatalf("%d items, want %d", len(its), n)
			}
			for _, it := range its {
				want, werr := decodeAll(t, pipe, it)
				got, gerr := decodeAll(t, inproc, it)
				if e1, e2 := errText(werr), errText(gerr); e1 != e2 {
					t.Errorf("%s: errors differ:\n  ffmpeg: %s\n  libav:  %s", it.Name, e1, e2)
				} else if werr != nil && tc.name == "frames" {
					t.Logf("%s: both: %s", it.Name, e1)
				}
				if len(got) != len(want) {
					t.Errorf("%s: %d records (libav), %d (ffmpeg)", it.Name, len(got), len(want))
					continue
				}
				videos++
				for i := range want {
					w, g := want[i], got[i]
					if w.meta != g.meta || w.w != g.w || w.h != g.h || len(w.frames) != len(g.frames) {
						t.Errorf("%s record %d: %dx%d %s (libav), %dx%d %s (ffmpeg)", it.Name, i, g.w, g.h, g.meta, w.w, w.h, w.meta)
						continue
					}
					for k := range w.frames {
						frames++
						if !bytes.Equal(w.frames[k], g.frames[k]) {
							t.Errorf("%s record %d frame %d: pixels differ", it.Name, i, k)
						}
					}
				}
			}
		})
	}
	t.Logf("%d videos, %d option sets: %d decodes and %d frames compared", n, 5, videos, frames)
}

// errText is an error's text with the part only the pipe decoder has: ffprobe's exit status.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.Replace(err.Error(), "ffprobe exit status 1: ", "", 1)
}

// TestLibavRandomFiles: files of random bytes and truncated videos give errors through the
// in-process decoder, never a crash.
func TestLibavRandomFiles(t *testing.T) {
	needLibav(t)
	t.Setenv(DecoderEnv, "")
	root := t.TempDir()
	dir := filepath.Join(root, "c")
	full := filepath.Join(t.TempDir(), "full.mkv")
	genVideo(t, full, "testsrc2=size=64x48:rate=10", 20, "-c:v", "libx264", "-preset", "ultrafast")
	good, _ := os.ReadFile(full)
	os.MkdirAll(dir, 0o755)
	seed := uint32(1)
	rnd := func() byte {
		seed = seed*1664525 + 1013904223
		return byte(seed >> 24)
	}
	for i := 0; i < 40; i++ {
		var b []byte
		switch i % 3 {
		case 0: // random bytes
			b = make([]byte, 64+int(rnd())*40)
			for k := range b {
				b[k] = rnd()
			}
		case 1: // a video with random bytes overwritten
			b = bytes.Clone(good)
			for k := 0; k < 20; k++ {
				b[(int(rnd())<<8|int(rnd()))%len(b)] = rnd()
			}
		default: // truncated
			b = good[:(int(rnd())<<8|int(rnd()))%len(good)+1]
		}
		os.WriteFile(filepath.Join(dir, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))+".mkv"), b, 0o644)
	}
	src, err := Open(root, Options{Decoder: DecoderLibav, ClipLen: 2, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items(t, src) {
		if _, err := decodeAll(t, src, it); err != nil {
			if _, ok := err.(*source.InputError); !ok {
				t.Errorf("%s: %v is not an InputError", it.Name, err)
			}
		}
	}
}

// TestLibavStuckDecoder: a decoder that stops returning (simulated: the call for the next frame
// blocks) fails the video with ErrTimeout at --decode-timeout, without waiting for it.
func TestLibavStuckDecoder(t *testing.T) {
	needLibav(t)
	t.Setenv(DecoderEnv, "")
	root := t.TempDir()
	genVideo(t, filepath.Join(root, "c", "v.mp4"), "testsrc2=size=64x48:rate=10", 8, codecs[0].args...)
	src, err := Open(root, Options{Decoder: DecoderLibav, ClipLen: 2, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	calls := 0
	hook := func() {
		if calls++; calls == 3 {
			<-release
		}
	}
	testHookNext.Store(&hook)
	defer func() {
		testHookNext.Store(nil)
		close(release)
	}()
	start := time.Now()
	recs, err := decodeAll(t, src, items(t, src)[0])
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("stuck decoder took %v to give up", el)
	}
	want := "decoder timed out: libav made no progress for 1s (--decode-timeout); interrupted"
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), want) || len(recs) != 1 {
		t.Fatalf("%d clips, err = %v, want 1 clip and %q", len(recs), err, want)
	}
}

// TestLibavCancel: cancelling the build's context mid-video ends Decode with the context's
// error, never as a complete (shorter) video.
func TestLibavCancel(t *testing.T) {
	needLibav(t)
	t.Setenv(DecoderEnv, "")
	root := t.TempDir()
	genVideo(t, filepath.Join(root, "c", "v.mp4"), "testsrc2=size=64x48:rate=10", 20, codecs[0].args...)
	src, err := Open(root, Options{Decoder: DecoderLibav, ClipLen: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	clips := 0
	err = src.Decode(ctx, items(t, src)[0], func(source.Clip) error {
		if clips++; clips == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after %d clips: err = %v, want context.Canceled", clips, err)
	}
}

// FuzzLibavDecode feeds arbitrary bytes, as a video file, through the in-process probe and
// decoder: an error or frames, never a crash.
func FuzzLibavDecode(f *testing.F) {
	needLibav(f)
	root := f.TempDir()
	seed := filepath.Join(root, "c", "seed.mkv")
	genVideo(f, seed, "testsrc2=size=32x24:rate=10", 4, "-c:v", "libx264", "-preset", "ultrafast")
	b, err := os.ReadFile(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(selfTestVideo)
	f.Add(b[:len(b)/2])
	// A small pixel cap keeps each run short: a garbled header can announce huge frames.
	src, err := Open(root, Options{Decoder: DecoderLibav, ClipLen: 2, Timeout: 5 * time.Second, MaxPixels: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "f.mkv")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		recs, err := decodeAll(t, src, source.Item{Name: "c/f.mkv", Path: p})
		if errors.Is(err, ErrTimeout) {
			t.Fatalf("a %d-byte file hangs the decoder: %v", len(data), err)
		}
		if err != nil {
			if _, ok := err.(*source.InputError); !ok {
				t.Fatalf("%v is not an InputError", err)
			}
		}
		for _, r := range recs {
			for _, fr := range r.frames {
				if len(fr) != r.w*r.h*3 {
					t.Fatalf("frame of %d bytes for %dx%d", len(fr), r.w, r.h)
				}
			}
		}
	})
}

// TestDecoderChoice: which decoder Open picks for each setting.
func TestDecoderChoice(t *testing.T) {
	needLibav(t)
	root := t.TempDir()
	genVideo(t, filepath.Join(root, "c", "v.mp4"), "testsrc2=size=32x24:rate=10", 2, codecs[0].args...)
	for _, tc := range []struct {
		env   string
		opts  Options
		libav bool
		err   string
	}{
		{"", Options{}, true, ""},
		{"", Options{Decoder: DecoderFFmpeg}, false, ""},
		{"ffmpeg", Options{}, false, ""},
		{"ffmpeg", Options{Decoder: DecoderLibav}, false, ""},
		{"libav", Options{Decoder: DecoderFFmpeg}, true, ""},
		{"auto", Options{Threads: 2}, false, ""},
		{"", Options{Decoder: DecoderLibav, Threads: 2}, false, "Threads 2 needs the ffmpeg decoder"},
		{"", Options{Decoder: DecoderLibav, FFmpeg: "ffmpeg"}, false, ""},
		{"", Options{FFprobe: "ffprobe"}, false, ""},
		{"gstreamer", Options{}, false, `unknown decoder "gstreamer"`},
	} {
		t.Setenv(DecoderEnv, tc.env)
		src, err := Open(root, tc.opts)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("env %q %+v: err = %v, want %q", tc.env, tc.opts, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("env %q %+v: %v", tc.env, tc.opts, err)
			continue
		}
		if src.libav != tc.libav {
			t.Errorf("env %q %+v: libav = %v, want %v", tc.env, tc.opts, src.libav, tc.libav)
		}
		if _, err := decodeAll(t, src, items(t, src)[0]); err != nil {
			t.Errorf("env %q %+v: decode: %v", tc.env, tc.opts, err)
		}
	}
}
