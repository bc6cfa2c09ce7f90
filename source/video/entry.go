package video

import (
	"strings"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/imagedir"
)

// FramesEntry and VideoEntry are the source kinds frames and video, for the command's table.
var (
	FramesEntry = source.Entry{
		Kind:  KindFrames,
		Help:  "class/video/frame images",
		Sniff: source.Sniffer{NestedExts: imagedir.Extensions},
		Open: func(p string, o source.Options) (source.Source, error) {
			return OpenFrames(p, framesOptions(o))
		},
		Replay: func(p string, o source.Options, classes []string) (source.Source, error) {
			return ReplayFrames(p, classes, framesOptions(o))
		},
		Streams: true,
		Lists:   true,
	}
	VideoEntry = source.Entry{
		Kind: KindVideo,
		Help: "class subfolders holding " + strings.Join(VideoExtensions, ", ") + " files, or one such file",
		Sniff: source.Sniffer{
			ClassExts: VideoExtensions,
			FileExts:  VideoExtensions,
		},
		Open: func(p string, o source.Options) (source.Source, error) {
			return Open(p, videoOptions(o))
		},
		Replay: func(p string, o source.Options, classes []string) (source.Source, error) {
			return Replay(p, classes, videoOptions(o))
		},
		Streams: true,
		Lists:   true,
	}
)

func framesOptions(o source.Options) Options {
	return Options{ClipLen: o.ClipLen, ClipStride: o.ClipStride, Short: o.Short, FPS: o.FPS,
		ExifOrient: o.ExifOrient, MaxPixels: o.MaxPixels, Files: o.Files}
}

func videoOptions(o source.Options) Options {
	return Options{ClipLen: o.ClipLen, ClipStride: o.ClipStride, Short: o.Short, FPS: o.FPS,
		Timeout: o.Timeout, MaxPixels: o.MaxPixels, Files: o.Files}
}
