package video

import (
	"strings"

	"github.com/packer-dev/packer/formats/imagedir"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/source"
)

// FramesEntry and VideoEntry are the source kinds frames and video, for the command's table.
var (
	FramesEntry = source.Entry{
		Kind:  KindFrames,
		Help:  "class/video/frame images",
		Sniff: source.Sniffer{NestedExts: imagedir.Extensions},
		Open: func(p string, o source.Options) (pipeline.Source, error) {
			return OpenFrames(p, Options{ClipLen: o.ClipLen, ClipStride: o.ClipStride, Short: o.Short, FPS: o.FPS,
				ExifOrient: o.ExifOrient, MaxPixels: o.MaxPixels})
		},
	}
	VideoEntry = source.Entry{
		Kind: KindVideo,
		Help: "class subfolders holding " + strings.Join(VideoExtensions, ", ") + " files, or one such file",
		Sniff: source.Sniffer{
			ClassExts: VideoExtensions,
			FileExts:  VideoExtensions,
		},
		Open: func(p string, o source.Options) (pipeline.Source, error) {
			return Open(p, Options{ClipLen: o.ClipLen, ClipStride: o.ClipStride, Short: o.Short, FPS: o.FPS,
				Timeout: o.Timeout, MaxPixels: o.MaxPixels})
		},
	}
)
