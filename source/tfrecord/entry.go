package tfrecord

import (
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// Entry is the source kind tfrecord, for the command's table.
var Entry = source.Entry{
	Kind:      Kind,
	Help:      "*.tfrecord* or *-of-* files of tf.train.Example records",
	Classes:   true,
	NoShuffle: "its records are read with their bytes, in sequence, from each TFRecord stream as the files are listed: holding every input's bytes until the last is listed would take the whole dataset's size in memory",
	Sniff: source.Sniffer{
		Top:  func(lower string, dir bool) bool { return !dir && IsFileName(lower) },
		File: IsFileName,
	},
	Open: func(p string, o source.Options) (source.Source, error) {
		return Open(p, Options{Decode: transforms.DecodeOptions{MaxPixels: o.MaxPixels, ExifOrient: o.ExifOrient},
			ImageKey: o.ImageKey, LabelKey: o.LabelKey, Classes: o.Classes, Files: o.Files})
	},
	Streams: true,
	Lists:   true,
}
