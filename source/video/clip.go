package video

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// Short-video policies (Options.Short).
const (
	ShortSkip = "skip" // skip the video with a reason naming its frame count
	ShortPad  = "pad"  // repeat the last frame up to the clip length
)

// ErrShort is wrapped by the skip reason of a video with fewer frames than one clip
// (Options.Short "skip").
var ErrShort = fmt.Errorf("video shorter than one clip")

// shortError is the reason a short video is skipped.
type shortError struct{ n, t int }

func (e *shortError) Error() string {
	return fmt.Sprintf("video has %s, fewer than --clip-len %d", humanize.Count(e.n, "frame"), e.t)
}

func (e *shortError) Unwrap() error { return ErrShort }

// frame is one decoded frame on its way into clips.
type frame struct {
	img   transforms.Image
	index int     // position in the decoded (after --fps) sequence, from 0
	time  float64 // presentation time in seconds, when hasTime
	has   bool    // time is known
	file  string  // frames source: the frame's file name
	token any     // buffer owner, handed back through release
	// win places img in its full image when only a window of it was decoded (frames source
	// with windows enabled); nil for a whole frame.
	win *source.Window
}

// recordMeta is the per-record metadata (Clip.Meta). Fields are declared in name order so the
// JSON keys come out sorted.
type recordMeta struct {
	File   string   `json:"file,omitempty"`   // frames source: the first frame's file name
	Frame  int      `json:"frame"`            // index of the first frame
	Frames int      `json:"frames"`           // frames in the record (T, or 1)
	Label  int64    `json:"label"`            // class index
	Padded int      `json:"padded,omitempty"` // frames repeated at the end (--short pad)
	Time   *float64 `json:"time,omitempty"`   // first frame's presentation time in seconds
	Video  string   `json:"video"`            // relative path of the video file or frame folder
}

// clipper cuts a stream of frames into records: clips of t frames starting every s frames, or
// one record per frame when t is 0. It keeps at most t frames; a frame that belongs to no clip
// (a gap when s > t, or a tail too short for another clip) is released at once or at the end.
type clipper struct {
	t, s    int
	pad     bool
	video   string
	label   int64
	emit    func(source.Clip) error
	release func(frame)

	win     []frame // frames from the next clip's start on
	next    int     // index of the next clip's first frame
	seen    int     // frames pushed
	emitted int     // records emitted
	frames  []transforms.Image
	wins    []source.Window
}

func newClipper(t, s int, pad bool, video string, label int64, emit func(source.Clip) error, release func(frame)) *clipper {
	if t > 0 && s <= 0 {
		s = t
	}
	return &clipper{t: t, s: s, pad: pad, video: video, label: label, emit: emit, release: release}
}

// push takes the next decoded frame, emitting every clip it completes. The clipper owns f
// until it releases it.
func (c *clipper) push(f frame) error {
	c.seen++
	if c.t == 0 {
		err := c.send([]frame{f}, 0)
		c.release(f)
		return err
	}
	if f.index < c.next {
		c.release(f)
		return nil
	}
	c.win = append(c.win, f)
	if len(c.win) < c.t {
		return nil
	}
	err := c.send(c.win[:c.t], 0)
	c.next += c.s
	drop := 0
	for drop < len(c.win) && c.win[drop].index < c.next {
		c.release(c.win[drop])
		drop++
	}
	n := copy(c.win, c.win[drop:])
	clear(c.win[n:])
	c.win = c.win[:n]
	return err
}

// finish handles the end of the stream: a video that yielded no clip is padded or reported
// as short; the frames of an incomplete last clip are released (trailing frames that do not
// fill a clip are not packed).
func (c *clipper) finish() error {
	defer c.releaseAll()
	if c.t == 0 || c.emitted > 0 {
		if c.seen == 0 {
			return errNoFrames
		}
		return nil
	}
	if c.seen == 0 {
		return errNoFrames
	}
	if !c.pad {
		return &shortError{n: c.seen, t: c.t}
	}
	// No clip was emitted, so every frame is still in the window (next is 0).
	return c.send(c.win, c.t-len(c.win))
}

// releaseAll hands back every frame still held.
func (c *clipper) releaseAll() {
	for _, f := range c.win {
		c.release(f)
	}
	clear(c.win)
	c.win = c.win[:0]
}

// errNoFrames is the reason for a video or frame folder that yielded no frame at all.
var errNoFrames = fmt.Errorf("no frames decoded")

// send emits one record from fs, repeating the last frame pad times.
func (c *clipper) send(fs []frame, pad int) error {
	c.frames, c.wins = c.frames[:0], c.wins[:0]
	windowed := false
	for i := 0; i < len(fs)+pad; i++ {
		f := fs[min(i, len(fs)-1)] // the last frame repeated pad times
		c.frames = append(c.frames, f.img)
		w := source.Window{FullW: f.img.W, FullH: f.img.H}
		if f.win != nil {
			w, windowed = *f.win, true
		}
		c.wins = append(c.wins, w)
	}
	var wins []source.Window
	if windowed {
		wins = c.wins
	}
	m := recordMeta{File: fs[0].file, Frame: fs[0].index, Frames: len(c.frames), Label: c.label, Padded: pad, Video: c.video}
	if fs[0].has {
		t := roundMicro(fs[0].time)
		m.Time = &t
	}
	meta, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.emitted++
	return c.emit(source.Clip{Frames: c.frames, Windows: wins, Label: c.label, Meta: meta})
}

// roundMicro rounds seconds to the microsecond, so times print compactly.
func roundMicro(t float64) float64 { return math.Round(t*1e6) / 1e6 }
