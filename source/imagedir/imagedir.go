package imagedir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/source/internal/memdecode"
	"github.com/packer-dev/packer/transforms"
)

// The source kinds this package reads.
const (
	KindFolder = "folder"
	KindList   = "list"
)

// Extensions are the file extensions torchvision's ImageFolder accepts (IMG_EXTENSIONS),
// matched case-insensitively. Files with other extensions are not images to a folder source
// and are ignored, as ImageFolder ignores them.
var Extensions = []string{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}

// ErrNoClasses is returned by OpenFolder for a root without class folders.
var ErrNoClasses = errors.New("no class folders")

// ErrEmptyClass is returned by OpenFolder when a class folder holds no image file.
var ErrEmptyClass = errors.New("found no valid file for the classes")

// A FormatError reports a malformed list file (--from list).
type FormatError string

func (e FormatError) Error() string { return "imagedir: invalid list: " + string(e) }

// Options configure a Source.
type Options struct {
	// Decode is passed to transforms.DecodeFile for every image: pixel cap, EXIF orientation.
	// Leave Decode.Draft nil for fast mode: when the build's transform (PlanDecode) has Fast
	// set (--fast) and resizes, JPEGs are decoded at a reduced DCT scale, Decode.Draft
	// becoming transforms.DraftSize(transform, FastGap).
	Decode transforms.DecodeOptions
	// FastGap is how many times the resized size the reduced-scale decode must keep (see
	// transforms.DraftSize); 0 means DefaultFastGap.
	FastGap int
	// Classes names the classes of a list labelled by integers (--classes): label i is
	// Classes[i], and every label must be below len(Classes). A list labelled by names, or a
	// folder, takes its class names from the data and refuses Classes.
	Classes []string
	// Fields names further keys (JSON Lines) or columns (CSV) of a list to carry as fields
	// (--fields); see listfields.go. With fields a line may have no label (label -1).
	Fields []string
	// Files, when set, serves the bytes of the files below the source's path, which is then a
	// view of an object store's listing (source.Options.Files).
	Files source.Files
}

// DefaultFastGap is the fast-mode gap: 1, Pillow's draft(mode, size) with the target size
// (docs/fidelity.md measures 1 and 2).
const DefaultFastGap = 1

func (o Options) normalized() Options {
	if o.FastGap <= 0 {
		o.FastGap = DefaultFastGap
	}
	return o
}

// Source is a source.Source over an image folder or an image list.
type Source struct {
	kind    string
	root    string           // folder root, or the list's folder
	list    string           // list file (list kind)
	listFmt string           // "csv" or "jsonl"
	named   bool             // list labels are class names
	classes []string         // class names as the manifest writes them (fsentry.Name)
	dirs    []string         // folder: the class folders' names on disk, parallel to classes
	index   map[string]int64 // class name → label (named lists)
	count   int64
	opts    Options
	scratch sync.Pool // *transforms.DecodeScratch, one per worker at a time
	plan    source.DecodePlan
	replay  bool        // opened by ReplayFolder: it decodes, and lists nothing
	fields  []listField // the list's fields (Options.Fields), their kinds inferred at open
}

var _ source.PlannedSource = (*Source)(nil)

// PlanDecode takes the build's transform: with --fast it sets the reduced JPEG scale
// (Options.Decode.Draft, when not given), and with p.Windows Decode reads of each JPEG only the
// rectangle the transform reads (transforms.DecodeFileRegion) and emits it as a window
// (source.Clip.Windows): the same output bytes, less decoding.
func (s *Source) PlanDecode(p source.DecodePlan) {
	s.plan = p
	if s.opts.Decode.Draft == nil && p.Transform.Fast() {
		s.opts.Decode.Draft = transforms.DraftSize(p.Transform, s.opts.FastGap)
	}
}

var _ source.Source = (*Source)(nil)

// Open opens a folder or list source by kind.
func Open(p, kind string, opts Options) (*Source, error) {
	switch kind {
	case KindFolder:
		return OpenFolder(p, opts)
	case KindList:
		return OpenList(p, opts)
	}
	return nil, fmt.Errorf("imagedir: unknown kind %q", kind)
}

// isHidden reports names packer ignores: dot files and dot folders (".DS_Store",
// "._photo.jpg", ".ipynb_checkpoints").
func isHidden(name string) bool { return strings.HasPrefix(name, ".") }

// isImageName reports whether name has one of Extensions, case-insensitively.
func isImageName(name string) bool {
	lower := strings.ToLower(name)
	for _, e := range Extensions {
		if strings.HasSuffix(lower, e) {
			return true
		}
	}
	return false
}

// OpenFolder opens an ImageFolder-style dataset: every non-hidden subfolder of root is a
// class, labelled by its index in the sorted class names; its images are found recursively.
// It walks the tree once to count the images and to refuse, as torchvision does, a root
// with no class folder or a class folder with no image.
func OpenFolder(root string, opts Options) (*Source, error) {
	dirs, err := listClasses(opts.Files, root)
	if err != nil {
		return nil, err
	}
	classes := make([]string, len(dirs))
	for i, d := range dirs {
		classes[i] = fsentry.Name(d)
	}
	if err := fsentry.CheckClasses(classes); err != nil {
		return nil, fmt.Errorf("imagedir: %s: %w", root, err)
	}
	s := &Source{kind: KindFolder, root: root, classes: classes, dirs: dirs, opts: opts.normalized()}
	var empty []string
	seen := folderSet{}
	links, err := newLinkSet(opts.Files, root, dirs)
	if err != nil {
		return nil, err
	}
	for _, c := range dirs {
		n := 0
		err := walkClassDirs(context.Background(), opts.Files, root, c, func(rel string, st os.FileInfo) error {
			if prev, ok := seen.add(rel, st); !ok {
				return fmt.Errorf("imagedir: %s: %s is the same folder as %s (a symbolic link): its images would be packed twice; remove the link",
					root, fsentry.Name(rel), fsentry.Name(prev))
			}
			return nil
		}, func(rel string, link bool) error {
			n++
			if link {
				return links.add(c, rel)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			empty = append(empty, fsentry.Name(c))
		}
		s.count += int64(n)
	}
	if len(empty) > 0 {
		return nil, fmt.Errorf("imagedir: %s: %w %s (supported extensions: %s); remove the empty class folders or add images",
			root, ErrEmptyClass, strings.Join(empty, ", "), strings.Join(Extensions, ", "))
	}
	return s, nil
}

// ReplayFolder opens a folder source without listing it, to decode the images a plan file lists
// (source.Entry.Replay): classes are the plan's class names, and Enumerate fails.
func ReplayFolder(root string, classes []string, opts Options) (*Source, error) {
	if err := fsentry.CheckClasses(classes); err != nil {
		return nil, fmt.Errorf("imagedir: %s: %w", root, err)
	}
	// With Files, root is an object store's location: the plan's inputs are read at their URLs.
	if opts.Files == nil {
		if st, err := os.Stat(root); err != nil {
			return nil, fmt.Errorf("imagedir: %w", err)
		} else if !st.IsDir() {
			return nil, fmt.Errorf("imagedir: %s is not a folder", root)
		}
	}
	return &Source{kind: KindFolder, root: root, classes: append([]string(nil), classes...), opts: opts.normalized(), replay: true}, nil
}

// ErrReplay is returned by the Enumerate of a source opened only to decode a plan's inputs.
var ErrReplay = errors.New("a source opened from a plan lists nothing: its inputs come from the plan")

// listClasses returns the sorted names of root's non-hidden subfolders (symbolic links to
// folders count, as os.scandir's is_dir() follows them), listed through files where it is a
// source.Lister (a view in memory), as walkClassDirs lists.
func listClasses(files source.Files, root string) ([]string, error) {
	ents, err := source.ReadDir(files, root)
	if err != nil {
		return nil, fmt.Errorf("imagedir: %w", err)
	}
	var classes []string
	for _, e := range ents {
		if isHidden(e.Name()) {
			continue
		}
		if isDir(filepath.Join(root, e.Name()), e) {
			classes = append(classes, e.Name())
		}
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("imagedir: %s: %w (want one subfolder per class)", root, ErrNoClasses)
	}
	sort.Strings(classes)
	return classes, nil
}

// isDir reports whether a directory entry is a folder, following symbolic links.
func isDir(full string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	st, err := os.Stat(full)
	return err == nil && st.IsDir()
}

// walkClass calls fn with the slash-separated path, relative to root, of every image of class
// c, in torchvision's order: the class's folders (found recursively, following symbolic
// links) sorted by path, as sorted(os.walk(...)) orders them, and the files in each sorted by
// name. A folder that is its own ancestor through a link is not entered twice.
func walkClass(ctx context.Context, files source.Files, root, c string, fn func(rel string) error) error {
	return walkClassDirs(ctx, files, root, c, nil, func(rel string, _ bool) error { return fn(rel) })
}

// folderSet remembers folders by identity (os.SameFile), keyed by a cheap hint.
type folderSet map[[2]int64][]folderSeen

type folderSeen struct {
	rel string
	st  os.FileInfo
}

// add records folder rel; when the same folder was recorded already, under another path, it
// returns that path and false.
func (fs folderSet) add(rel string, st os.FileInfo) (string, bool) {
	k := [2]int64{st.ModTime().UnixNano(), st.Size()}
	for _, f := range fs[k] {
		if os.SameFile(f.st, st) {
			return f.rel, false
		}
	}
	fs[k] = append(fs[k], folderSeen{rel, st})
	return "", true
}

// walkClassDirs is walkClass that also calls onDir (when not nil) with every folder it will
// list, before any file: its slash-separated path relative to root and its FileInfo; fn is
// also told whether the file is a symbolic link. The folders are listed through files where it
// is a source.Lister (a view in memory, which holds no link), else on the file system.
func walkClassDirs(ctx context.Context, files source.Files, root, c string, onDir func(rel string, st os.FileInfo) error, fn func(rel string, link bool) error) error {
	// Collect the folders first: os.walk's tuples are sorted by path string, which is not
	// depth-first order ("a-b" sorts between "a" and "a/b").
	type dir struct {
		rel   string
		chain []os.FileInfo // the folder and its ancestors, for loop detection
	}
	var dirs []string
	st, err := source.Stat(files, filepath.Join(root, c))
	if err != nil {
		return fmt.Errorf("imagedir: %w", err)
	}
	stack := []dir{{rel: c, chain: []os.FileInfo{st}}}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if onDir != nil {
			if err := onDir(d.rel, d.chain[len(d.chain)-1]); err != nil {
				return err
			}
		}
		dirs = append(dirs, d.rel)
		ents, err := source.ReadDir(files, filepath.Join(root, filepath.FromSlash(d.rel)))
		if err != nil {
			return fmt.Errorf("imagedir: %w", err)
		}
		for _, e := range ents {
			if isHidden(e.Name()) {
				continue
			}
			full := filepath.Join(root, filepath.FromSlash(d.rel), e.Name())
			if !isDir(full, e) {
				continue
			}
			st, err := source.Stat(files, full)
			if err != nil {
				continue
			}
			loop := false
			for _, a := range d.chain {
				if os.SameFile(a, st) {
					loop = true
					break
				}
			}
			if loop {
				continue
			}
			chain := append(append([]os.FileInfo(nil), d.chain...), st)
			stack = append(stack, dir{rel: path.Join(d.rel, e.Name()), chain: chain})
		}
	}
	sort.Strings(dirs)
	for _, rel := range dirs {
		ents, err := source.ReadDir(files, filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return fmt.Errorf("imagedir: %w", err)
		}
		// os.ReadDir (and a source.Lister's) sorts by name.
		for _, e := range ents {
			name := e.Name()
			if isHidden(name) || !isImageName(name) {
				continue
			}
			// Every entry that is not a folder is an input, as os.walk lists it among a
			// folder's files: a dangling symlink, a FIFO or a device too. Decode names
			// why such an entry cannot be packed, without opening it.
			if isDir(filepath.Join(root, filepath.FromSlash(rel), name), e) {
				continue
			}
			if err := fn(rel+"/"+name, e.Type()&fs.ModeSymlink != 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// Info describes the source. Spec holds only relative, host-independent facts.
func (s *Source) Info() source.SourceInfo {
	spec := map[string]any{"kind": s.kind}
	switch s.kind {
	case KindFolder:
		spec["extensions"] = Extensions
		spec["hidden"] = "ignored"
		spec["symlinks"] = "followed"
	case KindList:
		spec["list"] = filepath.Base(s.list)
		spec["list_format"] = s.listFmt
		if s.named {
			spec["labels"] = "names"
		} else {
			spec["labels"] = "integers"
		}
	}
	d := s.opts.Decode
	spec["exif_orient"] = d.ExifOrient
	spec["fast_decode"] = d.Draft != nil
	if d.Draft != nil && s.plan.Transform.Fast() {
		spec["fast_gap"] = s.opts.FastGap
	}
	mp := d.MaxPixels
	if mp == 0 {
		mp = transforms.DefaultMaxPixels
	}
	spec["max_pixels"] = mp
	return source.SourceInfo{
		Kind:    s.kind,
		Classes: append([]string(nil), s.classes...),
		Spec:    spec,
		Count:   s.count,
		HasMeta: true, // {"path": ...}: see recordMeta
		Fields:  listSchema(s.fields),
	}
}

// Enumerate emits every image in source order: classes in order, then each class's files
// (folder), or the list's lines in order (list). Item.Name is the path relative to the root
// (folder) or as written in the list; Item.Path is the file to read.
func (s *Source) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	if s.replay {
		return fmt.Errorf("imagedir: %s: %w", s.root, ErrReplay)
	}
	var seq int64
	if s.kind == KindList {
		return s.readList(ctx, func(e listEntry) error {
			it := source.Item{Seq: seq, Name: fsentry.Name(e.path), Path: s.resolve(e.path), Label: e.label}
			if len(s.fields) > 0 {
				it.Note = s.fieldNote(e.fields)
			}
			seq++
			return emit(it)
		})
	}
	for label, c := range s.dirs {
		err := walkClass(ctx, s.opts.Files, s.root, c, func(rel string) error {
			it := source.Item{Seq: seq, Name: fsentry.Name(rel), Path: filepath.Join(s.root, filepath.FromSlash(rel)), Label: int64(label)}
			seq++
			return emit(it)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// resolve returns the file a list entry names: relative paths are relative to the list's folder.
func (s *Source) resolve(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.root, filepath.FromSlash(p))
}

// Decode decodes one image to RGB with the source's decode options. A bad image is returned
// as an error naming it by Item.Name (never by an absolute path), wrapping a transforms
// sentinel error (ErrCorrupt, ErrTruncated, ErrTooLarge, ...), which the pipeline skips or
// fails on as --on-error says.
func (s *Source) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	sc, _ := s.scratch.Get().(*transforms.DecodeScratch)
	if sc == nil {
		sc = new(transforms.DecodeScratch)
	}
	// The image aliases the scratch; emit transforms it before returning, so the scratch
	// can go back to the pool afterwards.
	defer s.scratch.Put(sc)
	var region func(w, h int) image.Rectangle
	if s.plan.Windows {
		region = s.plan.Transform.Region
	}
	d, err := s.decodeRegion(ctx, it, region, sc)
	if err != nil {
		return &source.InputError{Input: it.Name, Err: transforms.DecodeReason(err)}
	}
	c := source.Clip{Frames: []transforms.Image{d.Image}, Label: it.Label, Meta: recordMeta(it.Name)}
	if vals, ok := it.Note.(fieldNote); ok {
		if vals.err != nil {
			return &source.InputError{Input: it.Name, Err: vals.err}
		}
		c.Fields = vals.values
	}
	if d.At != (image.Point{}) || d.Full != image.Pt(d.W, d.H) {
		c.Windows = []source.Window{{X: d.At.X, Y: d.At.Y, FullW: d.Full.X, FullH: d.Full.Y}}
	}
	return emit(c)
}

// decodeRegion decodes the item's image: from its file, or from the bytes Options.Files
// serves (an object of a store, fetched into memory, the size its listing or plan gave).
func (s *Source) decodeRegion(ctx context.Context, it source.Item, region func(w, h int) image.Rectangle, sc *transforms.DecodeScratch) (transforms.Decoded, error) {
	if s.opts.Files == nil {
		if err := fsentry.Check(it.Path); err != nil {
			return transforms.Decoded{}, err
		}
	}
	return memdecode.DecodeFile(ctx, s.opts.Files, it.Path, it.Stamp, s.opts.Decode, region, sc)
}

// recordMeta is an image record's per-record metadata, {"path": name}: its source path as
// Item.Name gives it, relative to the folder (cat/001.jpg) or as written in the list, escaped
// as the manifest escapes names (fsentry.Name), so that a record leads back to its file
// (inspect --records, preview captions, shard.Reader.RecordMeta, packer_reader's ds.meta(i)).
// It depends only on the name, so every build of the same source writes the same bytes.
func recordMeta(name string) []byte {
	b, err := json.Marshal(struct {
		Path string `json:"path"`
	}{name})
	if err != nil {
		panic(err) // a string always marshals
	}
	return b
}

// linkSet finds images that are symbolic links to an image packed under another label: an
// image of another class of the tree (cat/x.jpg -> ../dog/y.jpg), or a file another class links
// to too. torchvision would list that image under two labels. A link to an image of its own
// class is packed (oversampling, as torchvision lists it). Only links are resolved, so the
// cost is paid per link, not per image.
type linkSet struct {
	root, realRoot string
	classes        map[string]bool // class folders that are real folders of root
	targets        map[string][2]string
}

func newLinkSet(files source.Files, root string, dirs []string) (*linkSet, error) {
	real := root // a view in memory (source.Lister) holds no link
	if _, ok := files.(source.Lister); !ok {
		var err error
		if real, err = filepath.EvalSymlinks(root); err != nil {
			return nil, fmt.Errorf("imagedir: %w", err)
		}
	}
	ls := &linkSet{root: root, realRoot: real, classes: map[string]bool{}, targets: map[string][2]string{}}
	for _, c := range dirs {
		if st, err := source.Lstat(files, filepath.Join(root, c)); err == nil && st.IsDir() {
			ls.classes[c] = true
		}
	}
	return ls, nil
}

// add checks the link rel (slash-separated, relative to root) of class c. A link that does
// not resolve to a regular file is left to Decode, which skips it with its reason.
func (ls *linkSet) add(c, rel string) error {
	target, err := filepath.EvalSymlinks(filepath.Join(ls.root, filepath.FromSlash(rel)))
	if err != nil {
		return nil
	}
	if st, err := os.Stat(target); err != nil || !st.Mode().IsRegular() {
		return nil // a device or FIFO is skipped, never packed
	}
	twice := func(other string) error {
		return fmt.Errorf("imagedir: %s: %s is a symbolic link to %s, an image packed under another class: it would be packed under two labels; remove the link",
			ls.root, fsentry.Name(rel), fsentry.Name(other))
	}
	if prev, ok := ls.targets[target]; ok && prev[1] != c {
		return twice(prev[0])
	} else if !ok {
		ls.targets[target] = [2]string{rel, c}
	}
	// Is the target itself an image of another class, as the walk lists it?
	in, err := filepath.Rel(ls.realRoot, target)
	if err != nil || in == ".." || strings.HasPrefix(in, ".."+string(filepath.Separator)) || filepath.IsAbs(in) {
		return nil
	}
	parts := strings.Split(filepath.ToSlash(in), "/")
	if len(parts) < 2 || parts[0] == c || !ls.classes[parts[0]] || !isImageName(parts[len(parts)-1]) {
		return nil
	}
	for _, p := range parts {
		if isHidden(p) {
			return nil
		}
	}
	return twice(filepath.ToSlash(in))
}
