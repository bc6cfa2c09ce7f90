package video

import (
	"strings"
	"testing"
)

// probeSeed is ffprobe's JSON for an mp4 with a cover picture and an audio stream (trimmed).
const probeSeed = `{"streams":[{"index":0,"codec_name":"mjpeg","codec_type":"video","width":8,"height":8,
"disposition":{"attached_pic":1}},{"index":1,"codec_name":"aac","codec_type":"audio","nb_read_packets":"12"},
{"index":2,"codec_name":"h264","codec_type":"video","width":64,"height":48,"pix_fmt":"yuv420p",
"r_frame_rate":"10/1","avg_frame_rate":"10/1","nb_frames":"30","nb_read_packets":"30","duration":"3.000000",
"disposition":{"attached_pic":0}}],"format":{"format_name":"mov,mp4,m4a,3gp,3g2,mj2","duration":"3.000000"}}`

func TestParseProbe(t *testing.T) {
	dec := map[string]bool{"h264": true, "mjpeg": true}
	si, err := parseProbe([]byte(probeSeed), dec, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if si.Index != 2 || si.Codec != "h264" || si.Width != 64 || si.Height != 48 || si.FPS != 10 || si.Frames != 30 || si.Packets != 30 || si.Duration != 3 {
		t.Errorf("stream %+v", si)
	}
	for _, tc := range []struct{ json, want string }{
		{strings.Replace(probeSeed, `"nb_read_packets":"30"`, `"nb_read_packets":"7"`, 1), "index lists 30 frames but only 7 packets"},
		{strings.Replace(probeSeed, `"nb_read_packets":"30"`, `"nb_read_packets":"0"`, 1), "has no readable packet"},
		{strings.Replace(probeSeed, `"codec_name":"h264"`, `"codec_name":"prores"`, 1), "unsupported codec prores"},
		{strings.Replace(probeSeed, `"width":64`, `"width":0`, 1), "has no frame size"},
		{strings.Replace(probeSeed, `"width":64`, `"width":64000`, 1), "exceed the 1048576-pixel limit"},
		{strings.Replace(probeSeed, `"codec_type":"video","width":64`, `"codec_type":"data","width":64`, 1), "no video stream (streams: cover picture mjpeg, audio aac, data h264)"},
		{`{"streams":[]}`, "no video stream (the file has no streams)"},
		{`{`, "unreadable ffprobe output"},
	} {
		if _, err := parseProbe([]byte(tc.json), dec, 1<<20); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
	for s, want := range map[string]float64{"30000/1001": 30000.0 / 1001, "0/0": 0, "25": 25, "x/y": 0, "-1/2": 0, "1/0": 0} {
		if got := parseRate(s); got != want {
			t.Errorf("parseRate(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzProbe feeds arbitrary JSON to parseProbe: it must not panic, and a stream it accepts
// must be usable.
func FuzzProbe(f *testing.F) {
	f.Add([]byte(probeSeed))
	f.Add([]byte(`{"streams":[{"index":0,"codec_type":"video","codec_name":"h264","width":1,"height":1,"nb_frames":"-5"}]}`))
	f.Add([]byte(`{"streams":[{"codec_type":"audio"}],"format":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		si, err := parseProbe(data, map[string]bool{"h264": true}, 1<<24)
		if err != nil {
			return
		}
		if si.Width <= 0 || si.Height <= 0 || int64(si.Width)*int64(si.Height) > 1<<24 || si.Codec != "h264" || si.Packets == 0 {
			t.Fatalf("accepted unusable stream %+v", si)
		}
	})
}

// FuzzShowinfo feeds arbitrary stderr lines to the log parser: it must not panic, and frame
// events must carry the sizes the line says.
func FuzzShowinfo(f *testing.F) {
	f.Add("[Parsed_showinfo_0 @ 0x55] [info] n:   3 pts:    300 pts_time:0.3     pos:  2199 fmt:yuv444p sar:1/1 s:64x48 i:P iskey:0 type:B ")
	f.Add("[Parsed_showinfo_1 @ 0x55] [info] config in time_base: 1/1000, frame_rate: 10/1")
	f.Add("[h264 @ 0x55] [error] Invalid NAL unit size (1136 > 588).")
	f.Add("[rawvideo @ 0x55] [error] Application provided invalid, non monotonically increasing dts to muxer in stream 0: 4 >= 3")
	f.Fuzz(func(t *testing.T, line string) {
		l := newStderrLog()
		l.line(line)
		l.done = true
		ev, ok := l.next()
		if !ok {
			return
		}
		if ev.diag == "" && (ev.frame.w < 0 || ev.frame.h < 0) {
			t.Fatalf("negative frame size from %q", line)
		}
		_ = cleanLines([]string{line}, "/abs/path", "rel")
	})
}
