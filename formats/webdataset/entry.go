package webdataset

import (
	"path"
	"strings"

	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// Entry is the source kind webdataset, for the command's table.
var Entry = source.Entry{
	Kind:      Kind,
	Help:      "a folder of .tar shards, or one (or a .txt list of them), whose members are KEY.jpg/png/... with KEY.cls",
	Classes:   true,
	NoShuffle: "its samples are members of tar streams, read with their bytes as the archives are listed: holding every input's bytes until the last is listed would take the whole dataset's size in memory",
	Sniff: source.Sniffer{
		// A folder holding uncompressed tar shards; compressed ones are named with --from, as a
		// .tar.gz beside other data is more often something else (the CIFAR downloads).
		Top: func(lower string, dir bool) bool { return !dir && strings.HasSuffix(lower, ".tar") },
		// A single tar whose members are samples: KEY.EXT with an image or .cls extension.
		Member: func(lower string) bool {
			_, ext := splitKey(path.Clean(lower))
			return ext == "cls" || isImageExt(ext)
		},
	},
	Open: func(p string, o source.Options) (pipeline.Source, error) {
		return Open(p, Options{Decode: transforms.DecodeOptions{MaxPixels: o.MaxPixels, ExifOrient: o.ExifOrient}, Classes: o.Classes,
			ImageKey: o.ImageKey, LabelKey: o.LabelKey})
	},
}
