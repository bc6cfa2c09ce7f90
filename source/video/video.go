package video

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/transforms"
)

// ErrNoFFmpeg is returned by Open when ffmpeg or ffprobe cannot be run.
var ErrNoFFmpeg = errors.New("ffmpeg not found")

// Source is a source.Source over video files: SRC/class/*.{mp4,mkv,avi,webm,mov}
// (--from video), decoded to raw RGB in process by ffmpeg's libraries or by the ffmpeg command
// through a pipe (see doc.go, "Decoders").
type Source struct {
	root     string
	classes  []string // class names as the manifest writes them (fsentry.Name)
	dirs     []string // the class folders' names on disk, parallel to classes
	count    int64
	opts     Options
	version  string          // first line of `ffmpeg -version` (or libav's version, in process)
	decoders map[string]bool // codec names ffmpeg can decode
	bufs     sync.Pool       // *[]byte frame buffers
	plan     source.DecodePlan
	replay   bool // opened by Replay: it decodes, and lists nothing
	libav    bool // decodes in process (inproc.go), not through ffprobe and ffmpeg
}

var _ source.PlannedSource = (*Source)(nil)

// PlanDecode takes the build's transform: frames of different sizes (a stream that changes
// size) share a clip when it crops or resizes to one size. Video frames are never windows.
func (s *Source) PlanDecode(p source.DecodePlan) {
	s.plan = source.DecodePlan{Transform: p.Transform}
}

// Open opens a video dataset: every non-hidden subfolder of root is a class (labels in sorted
// name order) and its files with one of VideoExtensions, sorted by name, are its videos. It
// picks the decoder (doc.go, "Decoders"). In process it lists libavcodec's decoders; through
// the pipe it runs `ffmpeg -decoders` once, for the list of decoders and the version line of
// its banner (recorded in the manifest), and fails with ErrNoFFmpeg when ffmpeg or ffprobe is
// missing.
func Open(root string, opts Options) (*Source, error) {
	return open(root, opts, nil)
}

// Replay opens a video source without listing it, to decode the videos a plan file lists
// (source.Entry.Replay): classes are the plan's class names, and Enumerate fails. ffmpeg is
// checked as Open checks it.
func Replay(root string, classes []string, opts Options) (*Source, error) {
	if classes == nil {
		classes = []string{}
	}
	return open(root, opts, classes)
}

// open is Open, or Replay when classes is not nil.
func open(root string, opts Options, classes []string) (*Source, error) {
	opts, err := opts.validate(KindVideo)
	if err != nil {
		return nil, err
	}
	var s *Source
	if classes != nil {
		if err := replayRoot(opts.Files, root, classes); err != nil {
			return nil, err
		}
		s = &Source{root: root, classes: append([]string(nil), classes...), opts: opts, replay: true}
	} else {
		dirs, classes, err := openClasses(opts.Files, root)
		if err != nil {
			return nil, err
		}
		n, err := countVideos(opts.Files, root, dirs, false, VideoExtensions, "video files: "+fmt.Sprint(VideoExtensions))
		if err != nil {
			return nil, err
		}
		s = &Source{root: root, classes: classes, dirs: dirs, count: n, opts: opts}
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(opts.Timeout, time.Minute))
	defer cancel()
	inproc, required, err := opts.useLibav()
	if err != nil {
		return nil, err
	}
	if inproc {
		err := s.openLibav(ctx)
		if err == nil {
			return s, nil
		}
		if required {
			return nil, err
		}
		// DecoderAuto: the ffmpeg command, checked below, decodes instead.
		s.libav, s.decoders = false, nil
	}
	// One run gives both: the banner on stderr starts with the line `ffmpeg -version` prints.
	out, banner, err := runTool(ctx, 4<<20, opts.FFmpeg, "-nostdin", "-decoders")
	if err != nil {
		return nil, fmt.Errorf("video: %w: %s -decoders: %v (install ffmpeg, e.g. apt-get install ffmpeg)", ErrNoFFmpeg, opts.FFmpeg, err)
	}
	s.version = string(bytes.TrimSpace(firstLine(banner)))
	if !strings.HasPrefix(s.version, "ffmpeg version ") {
		return nil, fmt.Errorf("video: %s does not look like ffmpeg: its banner starts %q", opts.FFmpeg, s.version)
	}
	if _, err := exec.LookPath(opts.FFprobe); err != nil {
		return nil, fmt.Errorf("video: %w: %v (install ffmpeg, e.g. apt-get install ffmpeg)", ErrNoFFmpeg, err)
	}
	s.decoders = parseDecoders(out)
	if err := s.selfTest(ctx); err != nil {
		return nil, fmt.Errorf("video: %s (%s) cannot be used: self-test decode: %w (packer needs ffmpeg 5.1 or newer)", opts.FFmpeg, s.version, err)
	}
	return s, nil
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

// FFmpegVersion returns the first line of `ffmpeg -version`; in process, the same line when the
// ffmpeg on PATH is the libraries' build, else "ffmpeg version V (libavcodec X.Y.Z, in process)".
func (s *Source) FFmpegVersion() string { return s.version }

// Info describes the source; Spec holds only host-independent facts (the ffmpeg version
// and every option that changes the bytes, never thread counts or timeouts).
func (s *Source) Info() source.SourceInfo {
	spec := map[string]any{
		"kind":       KindVideo,
		"layout":     "class/video",
		"extensions": VideoExtensions,
		"hidden":     "ignored",
		"ffmpeg":     s.version,
		"decode":     "rawvideo rgb24, -autorotate, no rescaling (-autoscale 0), -fps_mode passthrough, stop at the first decoding error",
		"sampling":   "every frame",
		"time":       "pts",
		"max_pixels": maxPixels(s.opts.MaxPixels),
		"threads":    s.opts.Threads,
	}
	if s.opts.FPS > 0 {
		spec["fps"] = s.opts.FPS
		spec["sampling"] = "fps filter"
	}
	s.opts.clipSpec(spec)
	return source.SourceInfo{
		Kind:    KindVideo,
		Classes: append([]string(nil), s.classes...),
		Spec:    spec,
		ClipLen: s.opts.ClipLen,
		HasMeta: true,
		Count:   s.count,
	}
}

// Enumerate emits one item per video file, classes in order and files by name.
func (s *Source) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	if s.replay {
		return fmt.Errorf("video: %s: %w", s.root, errReplay)
	}
	return enumerate(ctx, s.opts.Files, s.root, s.dirs, false, VideoExtensions, emit)
}

// enumerate emits an item per entry walk finds (folders when dirs is set, else files with one
// of exts), numbered in walk order.
func enumerate(ctx context.Context, files source.Files, root string, classDirs []string, dirs bool, exts []string, emit func(source.Item) error) error {
	var seq int64
	return walk(files, root, classDirs, dirs, exts, func(label int, rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		it := source.Item{Seq: seq, Name: fsentry.Name(rel), Path: filepath.Join(root, filepath.FromSlash(rel)), Label: int64(label)}
		seq++
		return emit(it)
	})
}

// Decode probes the file, then decodes it (in process, or with ffprobe and one ffmpeg process
// whose stdout it reads), emitting each clip as soon as its last frame arrives. With
// Options.Files, the file is the object's copy in a temporary file (fetch), removed once
// decoded.
func (s *Source) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	bad := func(err error) error { return &source.InputError{Input: it.Name, Err: err} }
	if s.opts.Files != nil {
		p, remove, err := s.fetch(ctx, it)
		if err != nil {
			return bad(err)
		}
		defer remove()
		it.Path, it.Stamp = p, nil
	}
	// Never hand ffprobe a FIFO or a device: it would block or read forever.
	if err := fsentry.Check(it.Path); err != nil {
		return bad(err)
	}
	if st, err := os.Stat(it.Path); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
		}
		return bad(err)
	} else if st.Size() == 0 {
		return bad(fmt.Errorf("%w (0 bytes)", transforms.ErrEmpty))
	}
	probe := s.probe
	if s.libav {
		probe = s.probeLibav
	}
	si, err := probe(ctx, it)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return bad(err)
	}
	if s.libav {
		err = s.decodeLibav(ctx, it, si, emit)
	} else {
		err = s.decode(ctx, it, si, []string{"-i", ffInput(it.Path)}, emit)
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ee *emitError
	if errors.As(err, &ee) {
		return ee.err
	}
	return bad(err)
}

// probe runs ffprobe on the item and checks its stream.
func (s *Source) probe(ctx context.Context, it source.Item) (streamInfo, error) {
	pctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	out, errOut, err := runTool(pctx, 16<<20, s.opts.FFprobe, "-hide_banner", "-v", "error",
		"-of", "json", "-show_format", "-show_streams", "-count_packets", ffInput(it.Path))
	if err != nil {
		if ctx.Err() != nil {
			return streamInfo{}, ctx.Err()
		}
		diag := cleanLines(splitLines(errOut), it.Path, it.Name)
		return streamInfo{}, toolError(pctx, ErrProbe, "ffprobe", err, diag, s.opts.Timeout)
	}
	si, err := parseProbe(out, s.decoders, maxPixels(s.opts.MaxPixels))
	if err != nil {
		return si, err
	}
	// ffprobe -v error prints nothing for a sound file; reading every packet of a damaged
	// one often does (a Matroska file cut short: "File ended prematurely"; H.264 data the
	// parser cannot split) with exit status 0.
	if lines := splitLines(errOut); len(lines) > 0 {
		return si, fmt.Errorf("%w: reading its packets: %s", ErrDamaged, cleanLines(lines, it.Path, it.Name))
	}
	return si, nil
}

func splitLines(b []byte) []string {
	var lines []string
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, string(l))
		}
	}
	if len(lines) > maxStderrLines {
		lines = lines[len(lines)-maxStderrLines:]
	}
	return lines
}

// ffInput names a file for ffmpeg and ffprobe, through the file protocol so that no part of
// the name is read as a protocol or an option.
func ffInput(path string) string { return "file:" + path }

// ffmpegArgs is the decode command line for one input (input holds "-i" and its options) and
// its video stream.
func (s *Source) ffmpegArgs(input []string, stream int) []string {
	vf := "showinfo=checksum=0"
	if s.opts.FPS > 0 {
		vf = "fps=" + strconv.FormatFloat(s.opts.FPS, 'g', -1, 64) + "," + vf
	}
	th := strconv.Itoa(s.opts.Threads)
	args := []string{
		"-nostdin", "-hide_banner", "-nostats", "-loglevel", "repeat+level+info",
		"-filter_threads", th, "-threads", th,
	}
	args = append(args, input...)
	return append(args,
		"-map", "0:"+strconv.Itoa(stream), "-an", "-sn", "-dn",
		"-vf", vf, "-fps_mode", "passthrough", "-autoscale", "0",
		"-flush_packets", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1",
	)
}

// selfTest decodes a tiny synthetic video through the whole decode path, so that an ffmpeg
// packer cannot drive (too old for -fps_mode, or logging showinfo differently) fails Open
// with one clear error rather than every video.
func (s *Source) selfTest(ctx context.Context) error {
	o := s.opts
	o.ClipLen, o.ClipStride, o.FPS = 0, 0, 0
	t := &Source{opts: o, decoders: s.decoders}
	var sizes []string
	input := []string{"-f", "lavfi", "-i", "testsrc=size=16x12:rate=5:duration=0.4"}
	err := t.decode(ctx, source.Item{Name: "self-test"}, streamInfo{Width: 16, Height: 12, FPS: 5}, input,
		func(c source.Clip) error {
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

// emitError marks an error returned by the pipeline's emit, passed through unchanged.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }
func (e *emitError) Unwrap() error { return e.err }

func (s *Source) getBuf(n int) *[]byte {
	if p, ok := s.bufs.Get().(*[]byte); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n)
	return &b
}

// readAhead is how many decoded frames a video's reader goroutine may hold ahead of the
// clipper, so that ffmpeg decodes the next frames while the worker transforms a clip.
const readAhead = 2

// readFrame is one frame from the reader goroutine, or the error that ended its stream.
type readFrame struct {
	f   frame
	err error
}

// decode runs ffmpeg on one video and feeds its frames to a clipper. A reader goroutine
// follows ffmpeg's stderr events in order (see stderrLog): each frame event says the size of
// the next frame on stdout; the first error event ends the video before any later frame is
// used. It hands frames over through a channel of readAhead, so at most ClipLen + readAhead +
// 1 frames are held.
func (s *Source) decode(ctx context.Context, it source.Item, si streamInfo, input []string, emit func(source.Clip) error) error {
	// Every kill goes through dctx: os/exec then kills the process group (Cmd.Cancel) only
	// while the process has not been reaped, so a reused process ID is never signalled.
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	cmd := newCommand(dctx, s.opts.FFmpeg, s.ffmpegArgs(input, si.Index)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	growPipe(stdout, min(max(si.Width*si.Height*3, 64<<10), 1<<20))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: start %s: %v", ErrDecode, s.opts.FFmpeg, err)
	}
	log := newStderrLog()
	go log.run(stderr)
	r := &reader{s: s, ctx: ctx, cmd: cmd, stdout: stdout, log: log, it: it, si: si,
		wd:     newWatchdog(s.opts.Timeout, dcancel),
		frames: make(chan readFrame, readAhead), stop: make(chan struct{})}
	go r.run()
	defer func() {
		// Stop the reader (it may be blocked handing over a frame, or waiting on ffmpeg),
		// hand back what it queued, then reap ffmpeg unless the reader did.
		close(r.stop)
		dcancel()
		// A pipe held open by a child that escaped the kill would keep the reader waiting:
		// close both after Cmd.WaitDelay.
		t := time.AfterFunc(cmd.WaitDelay, func() {
			stdout.Close()
			stderr.Close()
		})
		defer t.Stop()
		for d := range r.frames {
			if d.err == nil {
				s.bufs.Put(d.f.token.(*[]byte))
			}
		}
		if !r.finished {
			cmd.Wait() // closes the pipes, at the latest WaitDelay after the kill
			log.wait()
		}
	}()

	c := s.clipper(it, emit)
	defer c.releaseAll()
	for d := range r.frames {
		if d.err != nil {
			return d.err
		}
		if err := c.push(d.f); err != nil {
			return err
		}
	}
	// The reader ended without an error: ffmpeg exited with status 0 after its last frame.
	return c.finish()
}

// reader reads one ffmpeg's frames and hands them to decode.
type reader struct {
	s      *Source
	ctx    context.Context
	cmd    *exec.Cmd
	stdout io.Reader
	log    *stderrLog
	it     source.Item
	si     streamInfo
	wd     *watchdog
	frames chan readFrame
	stop   chan struct{}

	diag     diagTail
	finished bool // cmd.Wait was called (by the reader, before it closed frames)
}

// run reads frames until ffmpeg's output ends, a check fails or decode stops it; it sends
// each frame, then at most one error, and closes frames.
func (r *reader) run() {
	defer close(r.frames)
	defer r.wd.disarm()
	if err := r.read(); err != nil {
		select {
		case r.frames <- readFrame{err: err}:
		case <-r.stop:
		}
	}
}

func (r *reader) timedOut() error {
	return fmt.Errorf("%w: ffmpeg made no progress for %v (--decode-timeout); killed", ErrTimeout, r.s.opts.Timeout)
}

func (r *reader) reason() string { return cleanLines(r.diag.lines, r.it.Path, r.it.Name) }

// exitErr waits for ffmpeg to end (under the watchdog), takes in its remaining messages, and
// describes a failure.
func (r *reader) exitErr() error {
	r.wd.arm()
	r.log.wait()
	werr := r.cmd.Wait()
	r.wd.disarm()
	r.finished = true
	if r.wd.fired.Load() {
		return r.timedOut()
	}
	for {
		ev, ok := r.log.next()
		if !ok {
			break
		}
		if ev.diag != "" {
			r.diag.add(ev.diag)
		}
	}
	if werr == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) {
		return fmt.Errorf("%w: ffmpeg: %v", ErrDecode, werr)
	}
	return toolError(r.ctx, ErrDecode, "ffmpeg", werr, r.reason(), r.s.opts.Timeout)
}

func (r *reader) read() error {
	s, wd := r.s, r.wd
	fc := s.newFrameCheck()
	for i := 0; ; {
		wd.arm()
		ev, ok := r.log.next()
		if !ok {
			// No more frames: stdout must be at its end too.
			var one [1]byte
			n, rerr := io.ReadFull(r.stdout, one[:])
			wd.disarm()
			if wd.fired.Load() {
				return r.timedOut()
			}
			if n > 0 {
				return fmt.Errorf("%w: ffmpeg wrote more frame data than it reported frames", ErrDecode)
			}
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				return fmt.Errorf("%w: read ffmpeg output: %v", ErrDecode, rerr)
			}
			// ffmpeg's exit status decides before the short-video policy: a failure that
			// ended the stream early is the better reason.
			return r.exitErr()
		}
		if ev.diag != "" {
			wd.disarm()
			r.diag.add(ev.diag)
			if ev.err {
				return fmt.Errorf("%w at frame %d: %s", ErrDecode, i, r.reason())
			}
			continue
		}
		fi := ev.frame
		if err := fc.check(i, fi); err != nil {
			wd.disarm()
			return err
		}
		p := s.getBuf(fi.w * fi.h * 3)
		_, rerr := io.ReadFull(r.stdout, *p)
		wd.disarm()
		if rerr != nil {
			s.bufs.Put(p)
			if wd.fired.Load() {
				return r.timedOut()
			}
			select {
			case <-r.stop: // decode gave up and killed ffmpeg: nothing to report
				return nil
			default:
			}
			// ffmpeg stopped: its status and messages are the reason.
			if err := r.exitErr(); err != nil {
				return err
			}
			return fmt.Errorf("%w: frame %d: ffmpeg output ended early: %v", ErrDecode, i, rerr)
		}
		f := frame{img: transforms.Image{W: fi.w, H: fi.h, C: 3, Pix: *p}, index: i, token: p}
		if t, ok := fi.seconds(); ok {
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

// frameCheck checks each decoded frame's size before its pixels are read: a sane size, the
// pixel cap and, where frames share a record, one output size for the whole video.
type frameCheck struct {
	s                *Source
	sameSize         bool
	w0, h0, ow0, oh0 int
}

func (s *Source) newFrameCheck() *frameCheck {
	_, _, fixed := s.plan.Transform.FixedSize()
	return &frameCheck{s: s, sameSize: s.opts.ClipLen > 0 && !fixed}
}

// check checks frame i, reported as fi.
func (c *frameCheck) check(i int, fi frameInfo) error {
	s := c.s
	if fi.w <= 0 || fi.h <= 0 || int64(fi.w)*int64(fi.h) > 1<<31 {
		return fmt.Errorf("%w: ffmpeg reported frame %d as %dx%d", ErrDecode, i, fi.w, fi.h)
	}
	if maxPix := maxPixels(s.opts.MaxPixels); maxPix > 0 && int64(fi.w)*int64(fi.h) > maxPix {
		return FormatError(fmt.Sprintf("frames of %dx%d exceed the %d-pixel limit", fi.w, fi.h, maxPix))
	}
	// A size change matters only where frames share a record: clips whose transform
	// does not give every frame one size (see FramesSource.Decode).
	if !c.sameSize {
		return nil
	}
	ow, oh, err := s.plan.Transform.FrameSize(fi.w, fi.h)
	if err != nil {
		return fmt.Errorf("frame %d: %w", i, err)
	}
	if i == 0 {
		c.w0, c.h0, c.ow0, c.oh0 = fi.w, fi.h, ow, oh
	} else if ow != c.ow0 || oh != c.oh0 {
		at := ""
		if t, ok := fi.seconds(); ok {
			at = fmt.Sprintf(" (t=%gs)", roundMicro(t))
		}
		return fmt.Errorf("%w at frame %d%s: %dx%d, the first frame is %dx%d, and the frames of a clip record must have one size: add --crop or --size, or pack one record per frame (--clip-len 0)",
			ErrSizeChange, i, at, fi.w, fi.h, c.w0, c.h0)
	}
	return nil
}

// rate is the frame rate of the decoded sequence, for times when ffmpeg gives no pts.
func (s *Source) rate(si streamInfo) float64 {
	if s.opts.FPS > 0 {
		return s.opts.FPS
	}
	return si.FPS
}

// clipper returns the clipper of one video for either decoder: its frames' buffers go back to
// the source's pool, and an error of emit is passed through unchanged (emitError).
func (s *Source) clipper(it source.Item, emit func(source.Clip) error) *clipper {
	release := func(f frame) { s.bufs.Put(f.token.(*[]byte)) }
	return newClipper(s.opts.ClipLen, s.opts.ClipStride, s.opts.Short == ShortPad, it.Name, it.Label,
		func(cl source.Clip) error {
			if err := emit(cl); err != nil {
				return &emitError{err}
			}
			return nil
		}, release)
}
