package webdataset

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

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
		// ImageNet's training archive holds one tar of images per class: extracted, that is a
		// folder of .tar files too, whose samples carry no label (every one would be skipped).
		Confirm: confirmLabelled,
		// A single tar whose members are samples: KEY.EXT with an image or .cls extension.
		Member: func(lower string) bool {
			_, ext := splitKey(path.Clean(lower))
			return ext == "cls" || isImageExt(ext)
		},
	},
	Open: func(p string, o source.Options) (source.Source, error) {
		return Open(p, Options{Decode: transforms.DecodeOptions{MaxPixels: o.MaxPixels, ExifOrient: o.ExifOrient}, Classes: o.Classes,
			ImageKey: o.ImageKey, LabelKey: o.LabelKey, Fields: o.Fields, Files: o.Files})
	},
	Streams: true,
	Lists:   true,
}

// Bounds of confirmLabelled's look into the first shard, as detection's own for archives.
const (
	confirmMembers = 32
	confirmBytes   = 64 << 20
)

// confirmLabelled refuses a folder whose first .tar (in name order) starts with a sample that
// has an image but no .cls or .json member: per-class archives of images (ImageNet's training
// tars, extracted from the outer one) rather than WebDataset shards, which detection would
// pack as zero records with every sample skipped for want of a label.
func confirmLabelled(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil // the source's own open reports it
	}
	var first string
	for _, e := range ents {
		if n := e.Name(); !strings.HasPrefix(n, ".") && strings.HasSuffix(strings.ToLower(n), ".tar") && e.Type().IsRegular() {
			first = n
			break
		}
	}
	if first == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(dir, first))
	if err != nil {
		return nil
	}
	defer f.Close()
	tr := tar.NewReader(io.LimitReader(f, confirmBytes))
	var key, image string
	for i := 0; i < confirmMembers; i++ {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if !isFile(h) {
			continue
		}
		k, ext := splitKey(path.Clean(h.Name))
		if key == "" {
			key = k
		} else if k != key {
			break // the first sample ended without a label member
		}
		switch {
		case strings.EqualFold(ext, "cls"), strings.EqualFold(ext, "json"):
			return nil
		case isImageExt(ext) && image == "":
			image = h.Name
		}
	}
	if image == "" {
		return nil // not a sample of an image: the source decides
	}
	return fmt.Errorf("its .tar files look like archives of images, not WebDataset shards: the first sample of %s (%s) has no .cls or .json label member, so every sample would be skipped; if they are per-class archives (ImageNet's training tars), extract each into a class folder of its name and build that folder; if they are shards labelled another way, give --from webdataset with --label-key",
		first, image)
}
