package video

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A FormatError is a video that ffprobe reads but packer cannot use (no video stream, no
// decoder, a truncated index, absurd dimensions).
type FormatError string

func (e FormatError) Error() string { return string(e) }

// ErrProbe is wrapped by the reason of a file ffprobe cannot open.
var ErrProbe = errors.New("ffprobe cannot read the file")

// ErrDamaged is wrapped by the reason of a file whose packets ffprobe reads with errors
// (truncated or corrupt), found before decoding.
var ErrDamaged = errors.New("damaged file")

// ErrDecode is wrapped by the reason of a video ffmpeg fails to decode.
var ErrDecode = errors.New("ffmpeg failed to decode the video")

// ErrTimeout is wrapped by the reason of a video whose ffprobe or ffmpeg made no progress
// within Options.Timeout.
var ErrTimeout = errors.New("decoder timed out")

// probeJSON is the part of `ffprobe -of json -show_format -show_streams -count_packets` that
// packer reads.
type probeJSON struct {
	Streams []struct {
		Index         int    `json:"index"`
		CodecName     string `json:"codec_name"`
		CodecType     string `json:"codec_type"`
		Width         int    `json:"width"`
		Height        int    `json:"height"`
		PixFmt        string `json:"pix_fmt"`
		RFrameRate    string `json:"r_frame_rate"`
		AvgFrameRate  string `json:"avg_frame_rate"`
		NbFrames      string `json:"nb_frames"`
		NbReadPackets string `json:"nb_read_packets"`
		Duration      string `json:"duration"`
		Disposition   struct {
			AttachedPic int `json:"attached_pic"`
		} `json:"disposition"`
	} `json:"streams"`
	Format struct {
		FormatName string `json:"format_name"`
		Duration   string `json:"duration"`
	} `json:"format"`
}

// streamInfo is what packer knows about a video's stream before decoding it.
type streamInfo struct {
	Index    int     // stream index, for -map 0:Index
	Codec    string  // codec name
	Width    int     // coded size (before ffmpeg's autorotation)
	Height   int     //
	FPS      float64 // average frame rate, 0 when unknown
	Frames   int64   // frames the container indexes, -1 when it does not say
	Packets  int64   // video packets ffprobe could read (-count_packets)
	Duration float64 // seconds, 0 when unknown
	Format   string  // container
}

// parseProbe reads ffprobe's JSON and picks the first video stream that is not an attached
// picture (cover art). decoders, when not nil, is the set of codec names ffmpeg can decode.
// maxPix bounds width × height (<= 0: no bound).
func parseProbe(data []byte, decoders map[string]bool, maxPix int64) (streamInfo, error) {
	var p probeJSON
	if err := json.Unmarshal(data, &p); err != nil {
		return streamInfo{}, fmt.Errorf("%w: unreadable ffprobe output: %v", ErrProbe, err)
	}
	var others []string
	for _, s := range p.Streams {
		if s.CodecType != "video" || s.Disposition.AttachedPic != 0 {
			name := s.CodecName
			if name == "" {
				name = "unknown"
			}
			kind := s.CodecType
			if s.CodecType == "video" {
				kind = "cover picture"
			} else if kind == "" {
				kind = "unknown"
			}
			others = append(others, kind+" "+name)
			continue
		}
		si := streamInfo{Index: s.Index, Codec: s.CodecName, Width: s.Width, Height: s.Height, Format: p.Format.FormatName}
		if si.Codec == "" || si.Codec == "none" {
			return si, FormatError(fmt.Sprintf("unsupported codec: ffprobe does not know the codec of video stream %d", s.Index))
		}
		if decoders != nil && !decoders[si.Codec] {
			return si, FormatError(fmt.Sprintf("unsupported codec %s: this ffmpeg has no decoder for it", si.Codec))
		}
		if si.Width <= 0 || si.Height <= 0 {
			return si, FormatError(fmt.Sprintf("video stream %d (%s) has no frame size (%dx%d)", s.Index, si.Codec, si.Width, si.Height))
		}
		if maxPix > 0 && int64(si.Width)*int64(si.Height) > maxPix {
			return si, FormatError(fmt.Sprintf("frames of %dx%d exceed the %d-pixel limit", si.Width, si.Height, maxPix))
		}
		si.FPS = parseRate(s.AvgFrameRate)
		if si.FPS == 0 {
			si.FPS = parseRate(s.RFrameRate)
		}
		si.Frames = -1
		if n, err := strconv.ParseInt(s.NbFrames, 10, 64); err == nil && n > 0 {
			si.Frames = n
		}
		si.Packets = -1
		if n, err := strconv.ParseInt(s.NbReadPackets, 10, 64); err == nil && n >= 0 {
			si.Packets = n
		}
		if d, err := strconv.ParseFloat(s.Duration, 64); err == nil && d > 0 {
			si.Duration = d
		} else if d, err := strconv.ParseFloat(p.Format.Duration, 64); err == nil && d > 0 {
			si.Duration = d
		}
		switch {
		case si.Packets == 0:
			return si, FormatError(fmt.Sprintf("video stream %d (%s) has no readable packet (truncated or empty)", s.Index, si.Codec))
		case si.Packets > 0 && si.Frames > si.Packets:
			return si, FormatError(fmt.Sprintf("truncated: the %s index lists %d frames but only %d packets can be read",
				p.Format.FormatName, si.Frames, si.Packets))
		}
		return si, nil
	}
	if len(others) == 0 {
		return streamInfo{}, FormatError("no video stream (the file has no streams)")
	}
	return streamInfo{}, FormatError("no video stream (streams: " + strings.Join(others, ", ") + ")")
}

// parseRate parses ffprobe's "num/den" rates; 0 for "0/0" or garbage.
func parseRate(s string) float64 {
	a, b, ok := strings.Cut(s, "/")
	n, err1 := strconv.ParseFloat(a, 64)
	if !ok {
		if err1 != nil || n <= 0 || n != n {
			return 0
		}
		return n
	}
	d, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil || d <= 0 || n <= 0 || n != n || d != d {
		return 0
	}
	return n / d
}

// parseDecoders reads `ffmpeg -hide_banner -decoders` and returns the codec names of its video
// decoders: a decoder's own name, or the "(codec X)" its description names.
func parseDecoders(out []byte) map[string]bool {
	m := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	started := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !started {
			started = strings.HasPrefix(line, "------")
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f[0]) != 6 || f[0][0] != 'V' {
			continue
		}
		m[f[1]] = true
		if i := strings.Index(line, "(codec "); i >= 0 {
			rest := line[i+len("(codec "):]
			if j := strings.IndexByte(rest, ')'); j > 0 {
				m[rest[:j]] = true
			}
		}
	}
	return m
}
