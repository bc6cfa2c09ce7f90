// Package progress reports the progress of long operations on stderr: a redrawn bar when stderr
// is a terminal, plain periodic lines otherwise (so CI logs do not fill with carriage returns).
// Sizes and rates are written by package humanize, the one way packer prints them.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/packer-dev/packer/internal/humanize"
)

// Bar reports progress towards a total (-1 when unknown). It is safe for concurrent use.
type Bar struct {
	mu       sync.Mutex
	w        io.Writer
	what     string
	unit     string
	total    int64
	base     int64 // the amount done before this run (Resume): not counted in the rate
	start    time.Time
	last     time.Time
	interval time.Duration
	bar      *progressbar.ProgressBar
	done     bool
}

// New returns a Bar writing to w. what names the operation; unit is what is counted ("images",
// "videos", "records") or "bytes".
// A terminal gets a redrawn bar; anything else gets one line every interval.
func New(w io.Writer, what, unit string, total int64) *Bar {
	b := &Bar{w: w, what: what, unit: unit, total: total, start: time.Now(), interval: 5 * time.Second}
	b.last = b.start
	if w == nil {
		return b
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionClearOnFinish(),
		}
		if unit == "bytes" {
			opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true))
		} else {
			opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit))
		}
		b.bar = progressbar.NewOptions64(total, opts...)
	}
	return b
}

// Resume says that n was done before this run (a resumed build): the rate and ETA count only
// what is done from now on.
func (b *Bar) Resume(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.base, b.start, b.last = n, time.Now(), time.Now()
}

// Set reports the current amount done.
func (b *Bar) Set(n int64) {
	if b == nil || b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	if b.bar != nil {
		_ = b.bar.Set64(n)
		return
	}
	now := time.Now()
	if now.Sub(b.last) < b.interval {
		return
	}
	b.last = now
	el := now.Sub(b.start).Seconds()
	rate := float64(n-b.base) / el
	line := fmt.Sprintf("%s: %d", b.what, n)
	if b.unit == "bytes" {
		line = fmt.Sprintf("%s: %s", b.what, humanize.Bytes(n))
	}
	if b.total > 0 {
		line += fmt.Sprintf("/%d (%.0f%%)", b.total, 100*float64(n)/float64(b.total))
		if b.unit == "bytes" {
			line = fmt.Sprintf("%s: %s/%s (%.0f%%)", b.what, humanize.Bytes(n), humanize.Bytes(b.total), 100*float64(n)/float64(b.total))
		}
	}
	if b.unit == "bytes" {
		line += ", " + humanize.Rate(rate)
	} else {
		line += fmt.Sprintf(", %.0f %s/s", rate, b.unit)
	}
	line += fmt.Sprintf(", elapsed %s", now.Sub(b.start).Round(time.Second))
	if b.total > 0 && rate > 0 && n < b.total {
		line += fmt.Sprintf(", ETA %s", time.Duration(float64(b.total-n)/rate*float64(time.Second)).Round(time.Second))
	}
	fmt.Fprintln(b.w, line)
}

// Finish clears a terminal bar; later calls to Set do nothing.
func (b *Bar) Finish() {
	if b == nil || b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil && !b.done {
		_ = b.bar.Finish()
	}
	b.done = true
}
