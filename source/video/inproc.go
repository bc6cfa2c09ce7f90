package video

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// The decoders Options.Decoder and DecoderEnv name.
const (
	// DecoderAuto decodes in process when it can (see doc.go), else through the ffmpeg command.
	DecoderAuto = "auto"
	// DecoderFFmpeg runs ffprobe and one ffmpeg process per video, reading frames from a pipe.
	DecoderFFmpeg = "ffmpeg"
	// DecoderLibav decodes in process with libavformat, libavcodec and libavfilter, and fails
	// Open when they cannot be loaded.
	DecoderLibav = "libav"
)

// DecoderEnv, when set, overrides Options.Decoder: PACKER_VIDEO_DECODER=ffmpeg|libav|auto.
const DecoderEnv = "PACKER_VIDEO_DECODER"

// errInterrupted ends an in-process decode that was stopped from outside.
var errInterrupted = errors.New("video: decoding interrupted")

// errNoLibav wraps the reason the in-process decoder cannot be used.
var errNoLibav = errors.New("video: libav (libavformat59, libavcodec59, libavfilter8, libavutil57) cannot be loaded")

// decoderChoice returns the decoder opts ask for, DecoderEnv first.
func (o Options) decoderChoice() (string, error) {
	d := o.Decoder
	if v := os.Getenv(DecoderEnv); v != "" {
		d = v
	}
	switch d {
	case "", DecoderAuto:
		return DecoderAuto, nil
	case DecoderFFmpeg, DecoderLibav:
		return d, nil
	}
	return "", fmt.Errorf("video: unknown decoder %q (%s or Options.Decoder: want ffmpeg, libav or auto)", d, DecoderEnv)
}

// useLibav decides whether a source decodes in process, and whether it must (DecoderLibav:
// then a failure to set it up fails Open; with DecoderAuto the pipe decoder takes over).
// Options naming ffmpeg or ffprobe ask for those programs: the pipe decoder. DecoderAuto uses
// the libraries when they load and Threads is 1 (libav's log is followed per calling thread,
// and decoder threads would log elsewhere).
func (o Options) useLibav() (use, required bool, err error) {
	d, err := o.decoderChoice()
	if err != nil {
		return false, false, err
	}
	if d == DecoderFFmpeg || o.toolsNamed {
		return false, false, nil
	}
	if d == DecoderLibav {
		if o.Threads != 1 {
			return false, true, fmt.Errorf("video: the libav decoder runs one thread per video; Threads %d needs the ffmpeg decoder", o.Threads)
		}
		if err := avLoad(); err != nil {
			return false, true, fmt.Errorf("%w (install them, e.g. apt-get install ffmpeg, or use %s=ffmpeg)", err, DecoderEnv)
		}
		return true, true, nil
	}
	return o.Threads == 1 && avLoad() == nil, false, nil
}

// openLibav sets up an in-process source: the decoders libavcodec has, the version line, and
// the self-test.
func (s *Source) openLibav(ctx context.Context) error {
	info, codec := avVersions()
	s.version = "ffmpeg version " + info + " (libavcodec " + codec + ", in process)"
	// The version line `ffmpeg -version` prints, when that ffmpeg is the same build: the
	// manifest then reads the same whichever decoder ran.
	if banner, _, err := runTool(ctx, 1<<16, s.opts.FFmpeg, "-nostdin", "-version"); err == nil {
		line := string(firstLine(banner))
		if strings.HasPrefix(line, "ffmpeg version "+info+" ") {
			s.version = strings.TrimSpace(line)
		}
	}
	s.decoders = avDecoderNames()
	s.libav = true
	if err := s.selfTestLibav(ctx); err != nil {
		return fmt.Errorf("video: libav %s (libavcodec %s) cannot be used: self-test decode: %w", info, codec, err)
	}
	return nil
}

// selfTestVideo is a 16x12 H.264 video of two frames (ffmpeg -f lavfi -i
// testsrc=size=16x12:rate=5 -frames:v 2 -c:v libx264 selftest.mp4): Open decodes it through
// the whole in-process path.
//
//go:embed selftest.mp4
var selfTestVideo []byte

func (s *Source) selfTestLibav(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "packer-video-selftest")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "selftest.mp4")
	if err := os.WriteFile(p, selfTestVideo, 0o600); err != nil {
		return err
	}
	o := s.opts
	o.ClipLen, o.ClipStride, o.FPS = 0, 0, 0
	t := &Source{opts: o, decoders: s.decoders, libav: true}
	var sizes []string
	it := source.Item{Name: "self-test", Path: p}
	si, err := t.probeLibav(ctx, it)
	if err != nil {
		return err
	}
	err = t.decodeLibav(ctx, it, si, func(c source.Clip) error {
		f := c.Frames[0]
		sizes = append(sizes, fmt.Sprintf("%dx%dx%d/%d", f.W, f.H, f.C, len(f.Pix)))
		return nil
	})
	if err != nil {
		return err
	}
	if got := strings.Join(sizes, " "); got != "16x12x3/576 16x12x3/576" {
		return fmt.Errorf("decoded frames %q, want two 16x12 RGB frames", got)
	}
	return nil
}

// runC runs fn (a call into libav) in its own goroutine, setting c when ctx ends or the
// timeout passes first. A call libav cannot interrupt (a decoder stuck inside libavcodec) is
// abandoned: runC returns timedOut, and done runs when fn finally returns.
func runC(ctx context.Context, timeout time.Duration, c *avCancel, fn func(), done func()) (timedOut bool) {
	fin := make(chan struct{})
	go func() {
		fn()
		close(fin)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-fin:
		done()
		return false
	case <-ctx.Done():
	case <-t.C:
		timedOut = true
	}
	c.set()
	// An interruptible call returns soon after the flag is set; wait a moment for it.
	select {
	case <-fin:
		done()
	case <-time.After(2 * time.Second):
		go func() {
			<-fin
			done()
		}()
	}
	return timedOut
}

// probeLibav checks the file as probe does, with libavformat in process: the same JSON facts,
// the same checks, and the error-level lines libav logs while reading every packet.
func (s *Source) probeLibav(ctx context.Context, it source.Item) (streamInfo, error) {
	c := newAVCancel()
	var (
		json  []byte
		lines []string
		code  int
	)
	if runC(ctx, s.opts.Timeout, c, func() { json, lines, code = avProbe(it.Path, c) }, c.free) {
		return streamInfo{}, fmt.Errorf("%w: libavformat made no progress for %v (--decode-timeout); interrupted", ErrTimeout, s.opts.Timeout)
	}
	if err := ctx.Err(); err != nil {
		return streamInfo{}, err
	}
	// ffprobe runs with -v error: only errors are reasons.
	var errs []string
	for _, l := range lines {
		if m := reLevel.FindStringSubmatch(l); m != nil && m[1] != "warning" {
			errs = append(errs, l)
		}
	}
	if len(errs) > maxStderrLines {
		errs = errs[len(errs)-maxStderrLines:]
	}
	if code < 0 {
		diag := cleanLines(errs, it.Path, it.Name)
		if diag == "" {
			diag = "libavformat error " + strconv.Itoa(code)
		}
		return streamInfo{}, fmt.Errorf("%w: %s", ErrProbe, diag)
	}
	si, err := parseProbe(json, s.decoders, maxPixels(s.opts.MaxPixels))
	if err != nil {
		return si, err
	}
	if len(errs) > 0 {
		return si, fmt.Errorf("%w: reading its packets: %s", ErrDamaged, cleanLines(errs, it.Path, it.Name))
	}
	return si, nil
}

// decodeLibav decodes one video in process and feeds its frames to a clipper, as decode does
// with ffmpeg's output: a reader goroutine decodes up to readAhead frames ahead; the first
// error-level message libav logs ends the video before any frame filtered after it.
func (s *Source) decodeLibav(ctx context.Context, it source.Item, si streamInfo, emit func(source.Clip) error) error {
	c := newAVCancel()
	timedOut := make(chan struct{})
	var once sync.Once
	wd := newWatchdog(s.opts.Timeout, func() {
		c.set()
		once.Do(func() { close(timedOut) })
	})
	stopCtx := context.AfterFunc(ctx, c.set)
	defer stopCtx()
	r := &avReader{s: s, ctx: ctx, it: it, si: si, c: c, wd: wd,
		frames: make(chan readFrame, readAhead), stop: make(chan struct{})}
	go r.run()
	defer func() {
		close(r.stop)
		c.set()
		// The reader frees the decoder (and c) when libav returns; it is not waited for,
		// since a decoder stuck inside libavcodec may never return.
	}()
	cl := s.clipper(it, emit)
	defer cl.releaseAll()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case d, ok := <-r.frames:
			if !ok {
				return cl.finish()
			}
			if d.err != nil {
				return d.err
			}
			if err := cl.push(d.f); err != nil {
				return err
			}
		case <-timedOut:
			if err := ctx.Err(); err != nil {
				return err
			}
			return r.timeoutErr()
		}
	}
}

// testHookNext, when set by a test, runs before each call for the next frame (where a stuck
// decoder would block).
var testHookNext atomic.Pointer[func()]

// avReader runs one in-process decoder and hands its frames to decodeLibav.
type avReader struct {
	ctx     context.Context
	s       *Source
	it      source.Item
	si      streamInfo
	c       *avCancel
	wd      *watchdog
	frames  chan readFrame
	stop    chan struct{}
	diag    diagTail
	errSeen bool
}

func (r *avReader) timeoutErr() error {
	return fmt.Errorf("%w: libav made no progress for %v (--decode-timeout); interrupted", ErrTimeout, r.s.opts.Timeout)
}

func (r *avReader) reason() string { return cleanLines(r.diag.lines, r.it.Path, r.it.Name) }

// addLines takes in lines libav logged, in order, up to the first error (as the pipe's reader
// stops at the first error event).
func (r *avReader) addLines(lines []string) {
	for _, l := range lines {
		if r.errSeen {
			return
		}
		m := reLevel.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		r.diag.add(l)
		r.errSeen = m[1] != "warning" && !isBenign(l)
	}
}

func isBenign(l string) bool {
	for _, b := range benignErrors {
		if strings.Contains(l, b) {
			return true
		}
	}
	return false
}

func (r *avReader) run() {
	defer close(r.frames)
	if err := r.read(); err != nil {
		select {
		case r.frames <- readFrame{err: err}:
		case <-r.stop:
		}
	}
}

func (r *avReader) read() error {
	s, wd := r.s, r.wd
	defer r.c.free()
	fps := ""
	if s.opts.FPS > 0 {
		fps = strconv.FormatFloat(s.opts.FPS, 'g', -1, 64)
	}
	wd.arm()
	d, err := avOpen(ffInput(r.it.Path), r.si.Index, fps, s.opts.Threads, r.c)
	wd.disarm()
	if wd.fired.Load() {
		if d != nil {
			d.close()
		}
		return r.timeoutErr()
	}
	if err != nil {
		return fmt.Errorf("%w: %s", ErrDecode, cleanLines([]string{err.Error()}, r.it.Path, r.it.Name))
	}
	defer d.close()
	fc := s.newFrameCheck()
	for i := 0; ; {
		select {
		case <-r.stop:
			return nil
		default:
		}
		wd.arm()
		if h := testHookNext.Load(); h != nil {
			(*h)()
		}
		st, fi := d.next()
		wd.disarm()
		// An error logged after this frame was filtered leaves the frame good: it ends
		// the video at the next call.
		r.addLines(d.logLines())
		switch st {
		case avFrame:
		case avEnd:
			return nil
		case avInterrupted:
			if wd.fired.Load() {
				return r.timeoutErr()
			}
			// decodeLibav gave up, or the build was cancelled: never an end of stream.
			if err := r.ctx.Err(); err != nil {
				return err
			}
			return errInterrupted
		case avLoggedError:
			return fmt.Errorf("%w at frame %d: %s", ErrDecode, i, r.reason())
		default:
			if reason := r.reason(); reason != "" {
				return fmt.Errorf("%w at frame %d: %s", ErrDecode, i, reason)
			}
			return fmt.Errorf("%w at frame %d: libav failed", ErrDecode, i)
		}
		info := frameInfo{w: fi.w, h: fi.h, pts: fi.pts, hasPTS: fi.hasPTS, tbNum: fi.tbNum, tbDen: fi.tbDen, hasTime: fi.tbDen > 0}
		if err := fc.check(i, info); err != nil {
			return err
		}
		p := s.getBuf(fi.w * fi.h * 3)
		d.copyTo(*p)
		f := frame{img: transforms.Image{W: fi.w, H: fi.h, C: 3, Pix: *p}, index: i, token: p}
		if t, ok := info.seconds(); ok {
			f.time, f.has = t, true
		} else if fps := s.rate(r.si); fps > 0 {
			f.time, f.has = float64(i)/fps, true
		}
		select {
		case r.frames <- readFrame{f: f}:
		case <-r.stop:
			s.bufs.Put(p)
			return nil
		}
		i++
	}
}
