package imagedir

import (
	"fmt"
	"strings"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// FolderEntry and ListEntry are the source kinds folder and list, for the command's table.
var (
	FolderEntry = source.Entry{
		Kind:  KindFolder,
		Help:  "class subfolders holding " + strings.Join(Extensions, ", ") + " images",
		Sniff: source.Sniffer{ClassExts: Extensions},
		Open: func(p string, o source.Options) (source.Source, error) {
			if len(o.Fields) > 0 {
				return nil, fmt.Errorf("imagedir: --fields does not apply to a folder of images (a list's keys or columns, a WebDataset's members or a Parquet file's columns carry fields)")
			}
			return OpenFolder(p, options(o))
		},
		Replay: func(p string, o source.Options, classes []string) (source.Source, error) {
			return ReplayFolder(p, classes, options(o))
		},
		Streams: true,
		Lists:   true,
	}
	ListEntry = source.Entry{
		Kind:    KindList,
		Help:    "a " + strings.Join(ListExtensions, ", ") + " file",
		Classes: true,
		Sniff:   source.Sniffer{FileExts: ListExtensions},
		Open: func(p string, o source.Options) (source.Source, error) {
			return OpenList(p, options(o))
		},
		// A list is read whole by OpenList (one file, no image is looked at); the plan's
		// items are what a part builds.
		Replay: func(p string, o source.Options, _ []string) (source.Source, error) {
			return OpenList(p, options(o))
		},
		Streams: true,
		Lists:   true,
	}
)

func options(o source.Options) Options {
	return Options{Decode: transforms.DecodeOptions{MaxPixels: o.MaxPixels, ExifOrient: o.ExifOrient}, Classes: o.Classes, Fields: o.Fields, Files: o.Files}
}
