package source

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// ErrUnknown is wrapped by Detect's error when no kind matches or several do.
var ErrUnknown = errors.New("cannot tell the source kind")

// Limits that keep detection cheap on huge datasets.
const (
	maxClassDirs  = 16 // class folders looked into, in name order
	maxTarHeaders = 32 // archive members looked at
	maxSniffBytes = 512
	// maxTarScan bounds the archive bytes read (decompressed) to reach those members: a tar
	// reader skips a member by reading it, so a first member of 100 GB (a few hundred KB of
	// gzip) would make detection read 100 GB.
	maxTarScan = 64 << 20
)

// Detect returns the kind of the source at p, asking the entries' sniffers, cheapest first:
//
//   - a folder: its own entries' names (Sniffer.Top, then that kind's Confirm, which may
//     refuse it); failing that, what its first 16 class
//     subfolders (in name order) hold (ClassExts), or hold in their subfolders (NestedExts);
//   - a file: its extension (FileExts), then its name (File), then its first bytes (Content;
//     through gzip too), then the names of its tar members (Member), then its size (Size).
//
// At each step the kinds that match are collected; the first step with a match decides. When
// no kind matches, or more than one does, the error wraps ErrUnknown and says what was looked
// for or what the source looks like. A folder whose layout fits two readings, or whose reading
// would leave files out (see detector.dir: split folders, a wrapper folder, loose images, a
// single class folder, images mixed with videos), is refused the same way, saying what was seen
// and which folder or --from to give.
func Detect(p string, entries []Entry) (string, error) { return DetectIn(p, entries, nil) }

// DetectIn is Detect of a source read through files (Options.Files: a view of an object
// store's listing), whose folders it lists through files where it is a Lister.
func DetectIn(p string, entries []Entry, files Files) (string, error) {
	fi, err := Stat(files, p)
	if err != nil {
		return "", fmt.Errorf("source: %w", err)
	}
	d := detector{entries: entries, files: files}
	var kinds []string
	if fi.IsDir() {
		kinds, err = d.dir(p)
	} else if fi.Mode().IsRegular() {
		kinds, err = d.file(p, fi.Size())
	} else {
		return "", fmt.Errorf("source: %s is neither a folder nor a regular file", p)
	}
	if err != nil {
		return "", err
	}
	switch len(kinds) {
	case 1:
		return kinds[0], nil
	case 0:
		var hints []string
		for _, e := range entries {
			hints = append(hints, e.Kind+" ("+e.Help+")")
		}
		return "", fmt.Errorf("source: %s: %w; looked for %s; name the kind with --from", p, ErrUnknown, strings.Join(hints, ", "))
	}
	return "", fmt.Errorf("source: %s: %w: it looks like %s; name the kind with --from", p, ErrUnknown, strings.Join(kinds, " and "))
}

type detector struct {
	entries []Entry
	files   Files // lists the folders where it is a Lister
}

// matched collects the kinds whose sniffer field match reports true, in table order.
func (d detector) matched(match func(s Sniffer) bool) []string {
	var kinds []string
	for _, e := range d.entries {
		if match(e.Sniff) {
			kinds = append(kinds, e.Kind)
		}
	}
	return kinds
}

func hasExt(exts []string, ext string) bool {
	for _, e := range exts {
		if strings.EqualFold(e, ext) {
			return true
		}
	}
	return false
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

func hidden(name string) bool { return strings.HasPrefix(name, ".") }

// splitNames are folder names that name a dataset split, not a class.
var splitNames = map[string]bool{
	"train": true, "training": true, "val": true, "valid": true, "validation": true,
	"test": true, "testing": true, "dev": true, "eval": true, "trainval": true,
}

// splitName reports whether a folder name names a dataset split: one of splitNames, also
// with a year or number after it (COCO's train2017, val_2012) or a "set" suffix (train_set,
// test-set, validset).
func splitName(name string) bool {
	n := strings.ToLower(name)
	trim := func() { n = strings.TrimRight(n, "0123456789_- .") }
	trim()
	if s, ok := strings.CutSuffix(n, "set"); ok {
		n = s
		trim()
	}
	return splitNames[n]
}

// unclear is Detect's error for a layout that several readings fit, or that one reading would
// pack only in part: it says what was seen and which --from (or which folder) to give.
func unclear(dir, format string, args ...any) error {
	return fmt.Errorf("source: %s: %w: %s", dir, ErrUnknown, fmt.Sprintf(format, args...))
}

// sample lists up to three names, "a/, b/ and 2 more", each followed by suffix.
func sample(names []string, suffix string) string {
	var parts []string
	for i, n := range names {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("%d more", len(names)-3))
			break
		}
		parts = append(parts, n+suffix)
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// dir detects a folder's kind. Besides the entries' own tests it refuses the layouts that two
// readings fit or that the reading found would pack only in part, saying what it saw:
//   - split folders (train/, val/, test/, ...) where classes are expected: the parent of the
//     splits was given, and the splits would become classes (or, one level deeper, the classes
//     videos of frames);
//   - files a class-folder kind takes (images, videos) directly in the folder beside subfolders:
//     the folder reading would leave them out; with no subfolders, a single class folder;
//   - a class folder holding both images and videos: each reading drops the other's files;
//   - class folders whose subfolders hold the images (the frames reading) when there is only one
//     of them, or when two hold subfolders of one name without a digit ("cat", where videos are
//     "v1" or "001"): a folder wrapping the class folders, or splits of the same classes, fit
//     the layout as well as classes of videos' frames.
func (d detector) dir(dir string) ([]string, error) {
	ents, err := ReadDir(d.files, dir)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	found := map[string]bool{}
	var subdirs, loose []string
	for _, e := range ents {
		if hidden(e.Name()) {
			continue
		}
		lower := strings.ToLower(e.Name())
		isdir := isDir(dir, e)
		kinds := d.matched(func(s Sniffer) bool { return s.Top != nil && s.Top(lower, isdir) })
		for _, k := range kinds {
			found[k] = true
		}
		if len(kinds) > 0 {
			continue
		}
		if isdir {
			subdirs = append(subdirs, e.Name())
		} else if ext := filepath.Ext(lower); len(d.matched(func(s Sniffer) bool { return hasExt(s.ClassExts, ext) })) > 0 {
			loose = append(loose, e.Name())
		}
	}
	if len(found) > 0 {
		for _, e := range d.entries {
			if found[e.Kind] && e.Sniff.Confirm != nil {
				if err := e.Sniff.Confirm(dir); err != nil {
					return nil, unclear(dir, "%v", err)
				}
			}
		}
		return d.inOrder(found), nil
	}
	sort.Strings(subdirs)
	sort.Strings(loose)
	var splits []string
	for _, sd := range subdirs {
		if splitName(sd) {
			splits = append(splits, sd)
		}
	}
	if len(splits) >= 2 || len(splits) > 0 && len(splits) == len(subdirs) {
		return nil, unclear(dir, "its folders %s are named like dataset splits, not classes; build each split on its own: point at one, e.g. %s; or give --from folder if they really are the classes",
			sample(splits, "/"), filepath.Join(dir, splits[0]))
	}
	switch {
	case len(loose) > 0 && len(subdirs) > 0:
		return nil, unclear(dir, "it holds %s (%s) directly besides %s (%s): a folder dataset takes only the files in class subfolders, and would leave those out; move them into a class folder, or give --from to build it without them",
			plural(len(loose), "image or video file", "image or video files"), sample(loose, ""), plural(len(subdirs), "subfolder", "subfolders"), sample(subdirs, "/"))
	case len(loose) > 0:
		return nil, unclear(dir, "it holds %s (%s) and no subfolders: it looks like a single class folder; point at the folder that holds the class folders (its parent, %s), or label the images in a list (--from list)",
			plural(len(loose), "image or video file", "image or video files"), sample(loose, ""), filepath.Dir(filepath.Clean(dir)))
	}
	// Class subfolders: look at what the first few hold.
	if len(subdirs) > maxClassDirs {
		subdirs = subdirs[:maxClassDirs]
	}
	var nested []string          // class folders read as folders of videos' frames
	owner := map[string]string{} // a nested class folder's subfolder name -> the class folder
	for _, sd := range subdirs {
		c, err := d.classDir(filepath.Join(dir, sd))
		if err != nil {
			return nil, err
		}
		if len(c.mixed) > 1 {
			return nil, unclear(dir, "its class folder %s/ holds files of different kinds (%s): each kind reads only its own files and would leave the others out; keep one kind per dataset, or give --from",
				sd, strings.Join(c.mixed, ", "))
		}
		if c.kind == "" {
			continue
		}
		found[c.kind] = true
		if !c.nested {
			continue
		}
		nested = append(nested, sd)
		for _, sub := range c.subdirs {
			if strings.ContainsAny(sub, "0123456789") {
				continue // "v1", "001": videos are often numbered in each class
			}
			if other, ok := owner[sub]; ok {
				return nil, unclear(dir, "its folders %s/ and %s/ both hold a folder %s/ of images: that reads as two splits or groups of the same classes more than as classes of videos' frames; point at one of them (--from folder), or give --from %s if the folders are videos' frames",
					other, sd, sub, c.kind)
			}
			owner[sub] = sd
		}
	}
	if len(nested) == 1 && len(subdirs) == 1 {
		k := nested[0]
		return nil, unclear(dir, "it holds one folder, %s/, whose subfolders hold the images: if those subfolders are the classes, point at %s (--from folder); if they are the videos' frames of a single class, give --from frames",
			k, filepath.Join(dir, k))
	}
	return d.inOrder(found), nil
}

func (d detector) inOrder(found map[string]bool) []string {
	var out []string
	for _, e := range d.entries {
		if found[e.Kind] {
			out = append(out, e.Kind)
			delete(found, e.Kind)
		}
	}
	return out
}

// classReading is what a class folder holds, as classDir reads it.
type classReading struct {
	kind    string   // "" when no kind matches
	nested  bool     // kind was found by its NestedExts (SRC/class/item/file)
	subdirs []string // the class folder's subfolders (sorted, the first maxClassDirs) when nested
	mixed   []string // "file (kind)" for files that only one kind takes, when there are several kinds
}

// classDir says which kind a class folder belongs to: the kind whose ClassExts files it holds
// most of (ties to the first entry), else the first kind whose NestedExts files one of its
// subfolders holds; "" when none. Files that only one kind takes, of two kinds or more (images
// and videos), are reported in mixed.
func (d detector) classDir(dir string) (classReading, error) {
	ents, err := ReadDir(d.files, dir)
	if err != nil {
		return classReading{}, fmt.Errorf("source: %w", err)
	}
	counts := make([]int, len(d.entries))
	only := map[string]string{} // kind -> a file only it takes
	var subdirs []string
	for _, e := range ents {
		if hidden(e.Name()) {
			continue
		}
		if isDir(dir, e) {
			subdirs = append(subdirs, e.Name())
			continue
		}
		ext := strings.ToLower(filepath.Ext(e.Name()))
		var kinds []string
		for i, en := range d.entries {
			if hasExt(en.Sniff.ClassExts, ext) {
				counts[i]++
				kinds = append(kinds, en.Kind)
			}
		}
		if len(kinds) == 1 && only[kinds[0]] == "" {
			only[kinds[0]] = e.Name()
		}
	}
	var c classReading
	if len(only) > 1 {
		for _, en := range d.entries {
			if f, ok := only[en.Kind]; ok {
				c.mixed = append(c.mixed, f+": "+en.Kind)
			}
		}
		return c, nil
	}
	best := -1
	for i, n := range counts {
		if n > 0 && (best < 0 || n > counts[best]) {
			best = i
		}
	}
	if best >= 0 {
		c.kind = d.entries[best].Kind
		return c, nil
	}
	sort.Strings(subdirs)
	if len(subdirs) > maxClassDirs {
		subdirs = subdirs[:maxClassDirs]
	}
	for _, sd := range subdirs {
		vdir := filepath.Join(dir, sd)
		ents, err := ReadDir(d.files, vdir)
		if err != nil {
			return classReading{}, fmt.Errorf("source: %w", err)
		}
		for _, e := range ents {
			if isDir(vdir, e) {
				continue
			}
			ext := strings.ToLower(filepath.Ext(e.Name()))
			for _, en := range d.entries {
				if c.kind == "" && hasExt(en.Sniff.NestedExts, ext) {
					c.kind, c.nested = en.Kind, true
				}
			}
		}
	}
	if c.nested {
		c.subdirs = subdirs
	}
	return c, nil
}

func (d detector) file(p string, size int64) ([]string, error) {
	name := strings.ToLower(filepath.Base(p))
	ext := filepath.Ext(name)
	if kinds := d.matched(func(s Sniffer) bool { return hasExt(s.FileExts, ext) }); len(kinds) > 0 {
		return kinds, nil
	}
	if kinds := d.matched(func(s Sniffer) bool { return s.File != nil && s.File(name) }); len(kinds) > 0 {
		return kinds, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if kinds := d.content(br, true); len(kinds) > 0 {
		return kinds, nil
	}
	return d.matched(func(s Sniffer) bool { return s.Size != nil && s.Size(name, size) }), nil
}

// content matches the first bytes of r, looking through one layer of gzip when gz is set and
// into a tar archive's member names.
func (d detector) content(br *bufio.Reader, gz bool) []string {
	head, _ := br.Peek(maxSniffBytes)
	if kinds := d.matched(func(s Sniffer) bool { return s.Content != nil && s.Content(head) }); len(kinds) > 0 {
		return kinds
	}
	switch {
	case gz && len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil
		}
		defer zr.Close()
		return d.content(bufio.NewReaderSize(zr, 4096), false)
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return d.tar(br)
	}
	return nil
}

// tar looks at the first archive members' names, within the archive's first maxTarScan bytes.
func (d detector) tar(r io.Reader) []string {
	tr := tar.NewReader(io.LimitReader(r, maxTarScan))
	for i := 0; i < maxTarHeaders; i++ {
		h, err := tr.Next()
		if err != nil {
			break
		}
		name := strings.ToLower(strings.TrimSuffix(h.Name, "/"))
		if kinds := d.matched(func(s Sniffer) bool { return s.Member != nil && s.Member(name) }); len(kinds) > 0 {
			return kinds
		}
	}
	return nil
}
