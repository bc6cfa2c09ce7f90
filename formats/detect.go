// Package formats holds one subpackage per external dataset format and, here, the detection of
// a source's kind for `packer build` when --from is not given.
package formats

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/packer-dev/packer/formats/imagedir"
	"github.com/packer-dev/packer/formats/video"
)

// Source kinds, as --from names them.
const (
	KindFolder   = "folder"   // class subfolders of images
	KindList     = "list"     // a CSV or JSONL file of path,label
	KindCIFAR10  = "cifar10"  // CIFAR-10 binary
	KindCIFAR100 = "cifar100" // CIFAR-100 binary
	KindIDX      = "idx"      // MNIST-family IDX files
	KindFrames   = "frames"   // class/video_id/frame images
	KindVideo    = "video"    // class/video files
)

// Kinds lists every source kind.
var Kinds = []string{KindFolder, KindList, KindCIFAR10, KindCIFAR100, KindIDX, KindFrames, KindVideo}

// ErrUnknown is wrapped by Detect's error when no kind matches or several do.
var ErrUnknown = errors.New("cannot tell the source kind")

// Limits that keep detection cheap on huge datasets.
const (
	maxClassDirs  = 16 // class folders looked into, in name order
	maxTarHeaders = 32 // archive members looked at
	maxSniffBytes = 512
)

// lookedForHints lists, in Detect's error, what was looked for.
var lookedForHints = "CIFAR-10 (data_batch_1.bin, test_batch.bin, batches.meta.txt, cifar-10-batches-bin/, cifar-10-binary.tar.gz), " +
	"CIFAR-100 (train.bin, test.bin, fine_label_names.txt, cifar-100-binary/, cifar-100-binary.tar.gz), " +
	"IDX (*-images-idx3-ubyte[.gz], or a file starting with an IDX magic), " +
	"folder (class subfolders holding " + strings.Join(imagedir.Extensions, ", ") + " images), frames (class/video/frame images), " +
	"video (class subfolders holding " + strings.Join(video.VideoExtensions, ", ") + " files), " +
	"list (a " + strings.Join(imagedir.ListExtensions, ", ") + " file)"

// The extensions detection looks for are the sources' own lists, so that a kind Detect
// returns is one whose source accepts the files it saw.
var (
	imageExts = extSet(imagedir.Extensions)
	videoExts = extSet(video.VideoExtensions)
	listExts  = extSet(imagedir.ListExtensions)

	cifar10Names  = regexp.MustCompile(`^(data_batch_[1-5]\.bin|test_batch\.bin|batches\.meta\.txt)$`)
	cifar100Names = regexp.MustCompile(`^(train\.bin|test\.bin|fine_label_names\.txt|coarse_label_names\.txt)$`)
	idxNames      = regexp.MustCompile(`(^|[-_.])(train|t10k|test)-(images|labels)[-.]idx[13]-ubyte(\.gz)?$`)
)

// Detect returns the source kind of path: one of Kinds. The checks are cheap and by name
// first: a CIFAR or IDX file, folder or archive by its well-known names (and, for single files,
// by content: an IDX or gzip magic, a CIFAR record size); a .csv/.tsv/.jsonl file is a list;
// a single video file is video; a folder whose subfolders (the first 16, in name order) hold
// images is folder, hold folders of images is frames, hold videos is video. When nothing or
// more than one kind matches, the error wraps ErrUnknown and lists what was looked for.
func Detect(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("formats: %w", err)
	}
	var kinds []string
	if fi.IsDir() {
		kinds, err = detectDir(p)
	} else if fi.Mode().IsRegular() {
		kinds, err = detectFile(p, fi.Size())
	} else {
		return "", fmt.Errorf("formats: %s is neither a folder nor a regular file", p)
	}
	if err != nil {
		return "", err
	}
	switch len(kinds) {
	case 1:
		return kinds[0], nil
	case 0:
		return "", fmt.Errorf("formats: %s: %w; looked for %s; name the kind with --from", p, ErrUnknown, lookedForHints)
	}
	return "", fmt.Errorf("formats: %s: %w: it looks like %s; name the kind with --from", p, ErrUnknown, strings.Join(kinds, " and "))
}

func extSet(exts []string) map[string]bool {
	m := make(map[string]bool, len(exts))
	for _, e := range exts {
		m[strings.ToLower(e)] = true
	}
	return m
}

// isDir reports whether a directory entry is a folder, following symbolic links (the sources
// follow them).
func isDir(dir string, e os.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&os.ModeSymlink == 0 {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, e.Name()))
	return err == nil && st.IsDir()
}

// kindSet collects kinds without duplicates, in a fixed order.
type kindSet map[string]bool

func (k kindSet) list() []string {
	var out []string
	for _, kind := range Kinds {
		if k[kind] {
			out = append(out, kind)
		}
	}
	return out
}

func detectDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("formats: %w", err)
	}
	found := kindSet{}
	var subdirs []string
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		lower := strings.ToLower(name)
		if isDir(dir, e) {
			switch lower {
			case "cifar-10-batches-bin":
				found[KindCIFAR10] = true
			case "cifar-100-binary":
				found[KindCIFAR100] = true
			default:
				subdirs = append(subdirs, name)
			}
			continue
		}
		switch {
		case cifar10Names.MatchString(lower), lower == "cifar-10-binary.tar.gz":
			found[KindCIFAR10] = true
		case cifar100Names.MatchString(lower), lower == "cifar-100-binary.tar.gz":
			found[KindCIFAR100] = true
		case idxNames.MatchString(lower):
			found[KindIDX] = true
		}
	}
	if len(found) > 0 {
		return found.list(), nil
	}
	// Class subfolders: look at what the first few hold.
	sort.Strings(subdirs)
	if len(subdirs) > maxClassDirs {
		subdirs = subdirs[:maxClassDirs]
	}
	for _, sd := range subdirs {
		k, err := classDirKind(filepath.Join(dir, sd))
		if err != nil {
			return nil, err
		}
		if k != "" {
			found[k] = true
		}
	}
	return found.list(), nil
}

// classDirKind says what a class folder holds: images (folder), videos (video), or folders of
// images (frames); "" when none of these.
func classDirKind(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("formats: %w", err)
	}
	images, videos := 0, 0
	var subdirs []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if isDir(dir, e) {
			subdirs = append(subdirs, e.Name())
			continue
		}
		ext := strings.ToLower(filepath.Ext(e.Name()))
		switch {
		case imageExts[ext]:
			images++
		case videoExts[ext]:
			videos++
		}
	}
	switch {
	case images > 0 && images >= videos:
		return KindFolder, nil
	case videos > 0:
		return KindVideo, nil
	}
	if len(subdirs) > maxClassDirs {
		subdirs = subdirs[:maxClassDirs]
	}
	for _, sd := range subdirs {
		vdir := filepath.Join(dir, sd)
		ents, err := os.ReadDir(vdir)
		if err != nil {
			return "", fmt.Errorf("formats: %w", err)
		}
		for _, e := range ents {
			if !isDir(vdir, e) && imageExts[strings.ToLower(filepath.Ext(e.Name()))] {
				return KindFrames, nil
			}
		}
	}
	return "", nil
}

func detectFile(p string, size int64) ([]string, error) {
	name := strings.ToLower(filepath.Base(p))
	ext := filepath.Ext(name)
	switch {
	case listExts[ext]:
		return []string{KindList}, nil
	case videoExts[ext]:
		return []string{KindVideo}, nil
	case cifar10Names.MatchString(name):
		return []string{KindCIFAR10}, nil
	case cifar100Names.MatchString(name):
		return []string{KindCIFAR100}, nil
	case idxNames.MatchString(name):
		return []string{KindIDX}, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("formats: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(maxSniffBytes)
	switch {
	case isIDX(head):
		return []string{KindIDX}, nil
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		return sniffGzip(br)
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return sniffTar(br)
	}
	if ext == ".bin" {
		// A CIFAR-format file under another name: tell the layouts apart by record size.
		m10, m100 := size > 0 && size%3073 == 0, size > 0 && size%3074 == 0
		switch {
		case m10 && !m100:
			return []string{KindCIFAR10}, nil
		case m100 && !m10:
			return []string{KindCIFAR100}, nil
		}
	}
	return nil, nil
}

// isIDX reports whether b starts with a plausible IDX magic: 00 00, a known type, 1..8 dims.
func isIDX(b []byte) bool {
	if len(b) < 8 || b[0] != 0 || b[1] != 0 || b[3] == 0 || b[3] > 8 {
		return false
	}
	switch b[2] {
	case 0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E:
		return true
	}
	return false
}

func sniffGzip(r io.Reader) ([]string, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, nil
	}
	defer gz.Close()
	br := bufio.NewReaderSize(gz, 4096)
	head, _ := br.Peek(maxSniffBytes)
	switch {
	case isIDX(head):
		return []string{KindIDX}, nil
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return sniffTar(br)
	}
	return nil, nil
}

// sniffTar looks at the first archive members' names for the CIFAR folders and files.
func sniffTar(r io.Reader) ([]string, error) {
	tr := tar.NewReader(r)
	found := kindSet{}
	for i := 0; i < maxTarHeaders; i++ {
		h, err := tr.Next()
		if err != nil {
			break
		}
		name := strings.ToLower(strings.TrimSuffix(h.Name, "/"))
		base := path.Base(name)
		switch {
		case base == "cifar-10-batches-bin" || strings.HasPrefix(name, "cifar-10-batches-bin/"):
			found[KindCIFAR10] = true
		case base == "cifar-100-binary" || strings.HasPrefix(name, "cifar-100-binary/"):
			found[KindCIFAR100] = true
		case cifar10Names.MatchString(base):
			found[KindCIFAR10] = true
		case cifar100Names.MatchString(base):
			found[KindCIFAR100] = true
		}
		if len(found) > 0 {
			break
		}
	}
	return found.list(), nil
}
