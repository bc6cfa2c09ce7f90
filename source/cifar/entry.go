package cifar

import (
	"path"
	"regexp"
	"strings"

	"github.com/packer-dev/packer/source"
)

// The file names of the official layouts, as detection matches them (lower case).
var (
	names10  = regexp.MustCompile(`^(data_batch_[1-5]\.bin|test_batch\.bin|batches\.meta\.txt)$`)
	names100 = regexp.MustCompile(`^(train\.bin|test\.bin|fine_label_names\.txt|coarse_label_names\.txt)$`)
)

// Entry10 and Entry100 are the source kinds cifar10 and cifar100, for the command's table.
var (
	Entry10  = entry(Kind10, names10, Folder10, Archive10, RecordSize10, "data_batch_1.bin, test_batch.bin, batches.meta.txt")
	Entry100 = entry(Kind100, names100, Folder100, Archive100, RecordSize100, "train.bin, test.bin, fine_label_names.txt")
)

func entry(kind string, names *regexp.Regexp, folder, archive string, recSize int64, files string) source.Entry {
	return source.Entry{
		Kind: kind,
		Help: files + ", " + folder + "/, " + archive + ", or a .bin file of whole records",
		Sniff: source.Sniffer{
			Top: func(lower string, dir bool) bool {
				if dir {
					return lower == folder
				}
				return names.MatchString(lower) || lower == archive
			},
			File: names.MatchString,
			Member: func(lower string) bool {
				return lower == folder || strings.HasPrefix(lower, folder+"/") || path.Base(lower) == folder ||
					names.MatchString(path.Base(lower))
			},
			// A CIFAR file under another name, told from the other layout by its record size.
			Size: func(lower string, size int64) bool {
				return strings.HasSuffix(lower, ".bin") && size > 0 && size%recSize == 0
			},
		},
		Open: func(p string, o source.Options) (source.Source, error) { return OpenFrom(o.Files, p, kind, o.Split) },
		// Its batch files or archive are read as streams of their objects (each part reads
		// them whole, as its listing reads every record).
		Streams: true,
		Lists:   true,
	}
}
