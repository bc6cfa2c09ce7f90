package parquet

import (
	"strings"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// Entry is the source kind parquet, for the command's table.
var Entry = source.Entry{
	Kind:      Kind,
	Help:      "*.parquet files with an image column (binary or {bytes, path}) and a label column",
	Classes:   true,
	NoShuffle: "its rows are decoded with their image bytes, page by page, as the files are listed: holding every input's bytes until the last is listed would take the whole dataset's size in memory",
	Sniff: source.Sniffer{
		Top:      func(lower string, dir bool) bool { return !dir && strings.HasSuffix(lower, ".parquet") },
		FileExts: []string{".parquet"},
	},
	Open: func(p string, o source.Options) (source.Source, error) {
		return Open(p, Options{Decode: transforms.DecodeOptions{MaxPixels: o.MaxPixels, ExifOrient: o.ExifOrient},
			ImageColumn: o.ImageKey, LabelColumn: o.LabelKey, Classes: o.Classes, Fields: o.Fields, Files: o.Files})
	},
	Streams: true,
	Lists:   true,
}
