package video

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxStderrLines and maxLineLen bound the ffmpeg diagnostics kept for a skip reason.
const (
	maxStderrLines = 6
	maxLineLen     = 240
	maxReasonLen   = 600
)

// newCommand returns an exec.Cmd for a tool run in its own process group, killed as a group
// (so that children it started die with it) when ctx is done.
func newCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	setGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd) }
	// Pipes held open by a grandchild that escaped the kill are closed after this long.
	cmd.WaitDelay = 2 * time.Second
	cmd.Env = append(os.Environ(), "AV_LOG_FORCE_NOCOLOR=1")
	return cmd
}

// limitedBuffer keeps the first n bytes written to it.
type limitedBuffer struct {
	buf bytes.Buffer
	n   int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.n - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// runTool runs a short command (ffprobe, ffmpeg -version) under ctx and returns its stdout,
// bounded to maxOut bytes, and its stderr, bounded to 64 KiB.
func runTool(ctx context.Context, maxOut int, name string, args ...string) (stdout, stderr []byte, err error) {
	cmd := newCommand(ctx, name, args...)
	out := &limitedBuffer{n: maxOut}
	errb := &limitedBuffer{n: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errb
	err = cmd.Run()
	return out.buf.Bytes(), errb.buf.Bytes(), err
}

// frameInfo is one frame as ffmpeg's showinfo filter reports it.
type frameInfo struct {
	w, h    int
	pts     int64
	hasPTS  bool
	tbNum   int64 // time base of pts
	tbDen   int64
	hasTime bool
}

func (f frameInfo) seconds() (float64, bool) {
	if !f.hasPTS || !f.hasTime || f.tbDen == 0 {
		return 0, false
	}
	return float64(f.pts) * float64(f.tbNum) / float64(f.tbDen), true
}

var (
	reShowinfoFrame  = regexp.MustCompile(`^\[Parsed_showinfo_\d+ @ [^\]]*\] \[info\] n:\s*\d+ pts:\s*(\S+) .* s:(\d+)x(\d+) `)
	reShowinfoConfig = regexp.MustCompile(`^\[Parsed_showinfo_\d+ @ [^\]]*\] \[info\] config in time_base: (\d+)/(\d+),`)
	reLevel          = regexp.MustCompile(`\[(warning|error|fatal|panic)\] `)
	reAddress        = regexp.MustCompile(` @ 0x[0-9a-fA-F]+`)
)

// logItem is one event of ffmpeg's stderr, in the order ffmpeg wrote it: a frame (from the
// showinfo filter) or a diagnostic line (warning or worse); err marks an error that ends the
// video.
type logItem struct {
	frame frameInfo
	diag  string
	err   bool
}

// maxWarningRun bounds the warnings kept in a row between two other events (frames, errors);
// later ones are dropped. Counting by stream content, not by what the reader has consumed,
// keeps the reasons deterministic while bounding the queue.
const maxWarningRun = 100

// benignErrors are error-level messages that do not mean damaged pictures: the rawvideo muxer
// complains about timestamps that -fps_mode passthrough hands it unchanged, then writes the
// frame anyway.
var benignErrors = []string{"non monotonically increasing dts to muxer"}

// stderrLog parses ffmpeg's stderr as it arrives into a queue of events that the frame reader
// consumes in order.
//
// ffmpeg (single-threaded) writes a frame's showinfo line before the frame's bytes reach
// stdout (the filter runs before the encoder and muxer, and -flush_packets 1 writes each frame
// out at once), so a frame's size is always known before its bytes are read. A decoding
// error is logged while decoding, before any frame decoded from the damaged data passes
// showinfo, and ffmpeg goes on (no -xerror, whose abort leaves a timing-dependent number of
// already filtered frames unwritten), so stopping at the first error in this order is
// deterministic. The queue is unbounded so that ffmpeg never blocks on stderr while the reader
// waits for stdout (a decoder with delay logs about the next packet before writing the current
// frame); it holds no more frames than fit in the stdout pipe and at most maxWarningRun
// warnings per frame.
type stderrLog struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []logItem
	warnRun int // warnings since the last frame or error event
	done    bool
	tbNum   int64
	tbDen   int64
}

func newStderrLog() *stderrLog {
	l := &stderrLog{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// run reads r to its end.
func (l *stderrLog) run(r io.Reader) {
	br := bufio.NewReaderSize(r, 16<<10)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Very long lines (showinfo side data dumps): keep the start only.
			if long == nil {
				long = append(long, line...)
			}
			continue
		}
		if long != nil {
			line, long = long, nil
		}
		if len(line) > 0 {
			l.line(string(bytes.TrimRight(line, "\r\n")))
		}
		if err != nil {
			break
		}
	}
	l.mu.Lock()
	l.done = true
	l.cond.Broadcast()
	l.mu.Unlock()
}

func (l *stderrLog) line(s string) {
	if m := reShowinfoFrame.FindStringSubmatch(s); m != nil {
		f := frameInfo{}
		f.w, _ = strconv.Atoi(m[2])
		f.h, _ = strconv.Atoi(m[3])
		if p, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			f.pts, f.hasPTS = p, true
		}
		l.mu.Lock()
		f.tbNum, f.tbDen, f.hasTime = l.tbNum, l.tbDen, l.tbDen > 0
		l.queue = append(l.queue, logItem{frame: f})
		l.warnRun = 0
		l.cond.Broadcast()
		l.mu.Unlock()
		return
	}
	if m := reShowinfoConfig.FindStringSubmatch(s); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		d, _ := strconv.ParseInt(m[2], 10, 64)
		l.mu.Lock()
		l.tbNum, l.tbDen = n, d
		l.mu.Unlock()
		return
	}
	m := reLevel.FindStringSubmatch(s)
	if m == nil {
		return
	}
	isErr := m[1] != "warning"
	for _, b := range benignErrors {
		if strings.Contains(s, b) {
			isErr = false
		}
	}
	l.mu.Lock()
	if isErr {
		l.warnRun = 0
	} else {
		l.warnRun++
	}
	if l.warnRun <= maxWarningRun {
		l.queue = append(l.queue, logItem{diag: s, err: isErr})
		l.cond.Broadcast()
	}
	l.mu.Unlock()
}

// next returns the next event, waiting for it; ok is false when ffmpeg's stderr ended and
// every event was returned.
func (l *stderrLog) next() (it logItem, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.queue) == 0 && !l.done {
		l.cond.Wait()
	}
	if len(l.queue) == 0 {
		return logItem{}, false
	}
	it = l.queue[0]
	l.queue[0] = logItem{}
	l.queue = l.queue[1:]
	if len(l.queue) == 0 {
		l.queue = l.queue[:0:0]
	}
	return it, true
}

// wait waits until stderr has ended.
func (l *stderrLog) wait() {
	l.mu.Lock()
	for !l.done {
		l.cond.Wait()
	}
	l.mu.Unlock()
}

// diagTail keeps the last diagnostic lines the reader consumed, for a skip reason. Only the
// reader touches it, in stderr order, so the reason does not depend on timing.
type diagTail struct{ lines []string }

func (d *diagTail) add(s string) {
	if len(d.lines) == maxStderrLines {
		copy(d.lines, d.lines[1:])
		d.lines = d.lines[:maxStderrLines-1]
	}
	d.lines = append(d.lines, s)
}

// cleanLines joins diagnostic lines into one deterministic, host-independent string.
func cleanLines(lines []string, file, name string) string {
	var out []string
	for _, s := range lines {
		s = reAddress.ReplaceAllString(s, "")
		s = strings.ReplaceAll(s, "[warning] ", "")
		s = strings.ReplaceAll(s, "[error] ", "")
		s = strings.ReplaceAll(s, "[fatal] ", "")
		s = strings.ReplaceAll(s, "[panic] ", "")
		if file != "" {
			s = strings.ReplaceAll(s, ffInput(file), name)
			s = strings.ReplaceAll(s, file, name)
		}
		s = strings.TrimSpace(s)
		if len(s) > maxLineLen {
			s = s[:maxLineLen] + "…"
		}
		if s != "" && (len(out) == 0 || out[len(out)-1] != s) {
			out = append(out, s)
		}
	}
	r := strings.Join(out, "; ")
	if len(r) > maxReasonLen {
		r = "…" + r[len(r)-maxReasonLen:]
	}
	return r
}

// watchdog kills a process that makes no progress: arm before each wait on it, disarm after.
type watchdog struct {
	t     *time.Timer
	d     time.Duration
	fired atomic.Bool
}

func newWatchdog(d time.Duration, kill func()) *watchdog {
	w := &watchdog{d: d}
	w.t = time.AfterFunc(d, func() {
		w.fired.Store(true)
		kill()
	})
	w.t.Stop()
	return w
}

func (w *watchdog) arm()    { w.t.Reset(w.d) }
func (w *watchdog) disarm() { w.t.Stop() }

// toolError describes a failed tool run for a skip reason.
func toolError(ctx context.Context, sentinel error, tool string, runErr error, diag string, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s made no progress for %v (--decode-timeout); killed", ErrTimeout, tool, timeout)
	}
	var ee *exec.ExitError
	status := ""
	if errors.As(runErr, &ee) {
		status = ee.String()
	} else if runErr != nil {
		status = runErr.Error()
	}
	if diag == "" {
		return fmt.Errorf("%w: %s %s", sentinel, tool, status)
	}
	return fmt.Errorf("%w: %s %s: %s", sentinel, tool, status, diag)
}
