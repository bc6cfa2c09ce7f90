package idx

import (
	"regexp"

	"github.com/packer-dev/packer/source"
)

// fileNames are the MNIST-family file names detection recognizes (lower case): the ones
// Open's folder search and labels lookup understand, with any prefix.
var fileNames = regexp.MustCompile(`(^|[-_.])(train|t10k|test)-(images|labels)[-.]idx[13]-ubyte(\.gz)?$`)

// Entry is the source kind idx, for the command's table.
var Entry = source.Entry{
	Kind:    Kind,
	Help:    "*-images-idx3-ubyte[.gz], or a file starting with an IDX magic",
	Classes: true,
	Sniff: source.Sniffer{
		Top:     func(lower string, dir bool) bool { return !dir && fileNames.MatchString(lower) },
		File:    fileNames.MatchString,
		Content: isMagic,
	},
	Open: func(p string, o source.Options) (source.Source, error) {
		return OpenFrom(o.Files, p, o.Split, o.Classes)
	},
	// Its files are read as streams of their objects (each part reads them whole, as its
	// listing reads every record's bytes).
	Streams: true,
	Lists:   true,
}

// isMagic reports whether b starts with a plausible IDX magic: 00 00, a known type, 1..8
// dimensions.
func isMagic(b []byte) bool {
	if len(b) < 8 || b[0] != 0 || b[1] != 0 || b[3] == 0 || b[3] > 8 {
		return false
	}
	switch b[2] {
	case TypeUbyte, TypeByte, TypeShort, TypeInt, TypeFloat, TypeDouble:
		return true
	}
	return false
}
