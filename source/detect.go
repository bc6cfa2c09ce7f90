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
)

// Detect returns the kind of the source at p, asking the entries' sniffers, cheapest first:
//
//   - a folder: its own entries' names (Sniffer.Top); failing that, what its first 16 class
//     subfolders (in name order) hold (ClassExts), or hold in their subfolders (NestedExts);
//   - a file: its extension (FileExts), then its name (File), then its first bytes (Content;
//     through gzip too), then the names of its tar members (Member), then its size (Size).
//
// At each step the kinds that match are collected; the first step with a match decides. When
// no kind matches, or more than one does, the error wraps ErrUnknown and says what was looked
// for or what the source looks like.
func Detect(p string, entries []Entry) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("source: %w", err)
	}
	d := detector{entries: entries}
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

func (d detector) dir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	found := map[string]bool{}
	var subdirs []string
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
		if isdir && len(kinds) == 0 {
			subdirs = append(subdirs, e.Name())
		}
	}
	if len(found) > 0 {
		return d.inOrder(found), nil
	}
	// Class subfolders: look at what the first few hold.
	sort.Strings(subdirs)
	if len(subdirs) > maxClassDirs {
		subdirs = subdirs[:maxClassDirs]
	}
	for _, sd := range subdirs {
		k, err := d.classDir(filepath.Join(dir, sd))
		if err != nil {
			return nil, err
		}
		if k != "" {
			found[k] = true
		}
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

// classDir says which kind a class folder belongs to: the kind whose ClassExts files it holds
// most of (ties to the first entry), else the first kind whose NestedExts files one of its
// subfolders holds; "" when none.
func (d detector) classDir(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("source: %w", err)
	}
	counts := make([]int, len(d.entries))
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
		for i, en := range d.entries {
			if hasExt(en.Sniff.ClassExts, ext) {
				counts[i]++
			}
		}
	}
	best := -1
	for i, n := range counts {
		if n > 0 && (best < 0 || n > counts[best]) {
			best = i
		}
	}
	if best >= 0 {
		return d.entries[best].Kind, nil
	}
	if len(subdirs) > maxClassDirs {
		subdirs = subdirs[:maxClassDirs]
	}
	for _, sd := range subdirs {
		vdir := filepath.Join(dir, sd)
		ents, err := os.ReadDir(vdir)
		if err != nil {
			return "", fmt.Errorf("source: %w", err)
		}
		for _, e := range ents {
			if isDir(vdir, e) {
				continue
			}
			ext := strings.ToLower(filepath.Ext(e.Name()))
			for _, en := range d.entries {
				if hasExt(en.Sniff.NestedExts, ext) {
					return en.Kind, nil
				}
			}
		}
	}
	return "", nil
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

// tar looks at the first archive members' names.
func (d detector) tar(r io.Reader) []string {
	tr := tar.NewReader(r)
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
