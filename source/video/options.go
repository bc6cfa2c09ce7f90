package video

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/source/internal/fsentry"
)

// The source kinds this package reads.
const (
	KindFrames = "frames"
	KindVideo  = "video"
)

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 5 * time.Minute

// VideoExtensions are the file extensions --from video packs, matched case-insensitively.
var VideoExtensions = []string{".mp4", ".mkv", ".avi", ".webm", ".mov"}

// ErrNoClasses is returned by Open and OpenFrames for a root without class folders.
var ErrNoClasses = errors.New("no class folders")

// ErrEmptyClass is returned by Open and OpenFrames when a class folder holds no video.
var ErrEmptyClass = errors.New("found no video for the classes")

// Options configure a frames or video source. The zero value packs one record per frame.
type Options struct {
	// ClipLen is the number of frames per record (T); 0 packs one record per frame.
	ClipLen int
	// ClipStride is the distance in frames between the starts of consecutive clips; 0 means
	// ClipLen (back-to-back clips). A stride larger than ClipLen leaves frames out.
	ClipStride int
	// Short is the policy for a video with fewer than ClipLen frames: ShortSkip (default)
	// or ShortPad.
	Short string
	// FPS, for video files, resamples the timeline to this rate with ffmpeg's fps filter;
	// 0 keeps every decoded frame. Frame folders have no timeline: OpenFrames refuses it.
	FPS float64
	// ExifOrient applies EXIF orientation to frame images (frames source), as
	// transforms.DecodeOptions.ExifOrient.
	ExifOrient bool
	// MaxPixels rejects frames (and videos whose stream) are larger than this many pixels;
	// 0 means transforms.DefaultMaxPixels, negative disables the cap.
	MaxPixels int64
	// Timeout bounds ffprobe on one video and every wait for ffmpeg's next frame (video
	// source); time the pipeline spends on frames already handed over does not count.
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// Threads is ffmpeg's -threads (decoder) and -filter_threads per process; 0 means 1.
	// The build runs one ffmpeg per worker, so workers already decode that many videos at
	// once. Single-threaded decoders also log errors in frame order, which keeps the outcome
	// of a damaged stream (how many frames come out before the first decoding error, and the
	// messages) independent of timing. More threads help only builds with fewer videos than
	// workers; the value is recorded in the manifest's source spec.
	Threads int
	// FFmpeg and FFprobe name the executables; "" means "ffmpeg" and "ffprobe" on PATH.
	// Naming either makes DecoderAuto use them (the pipe decoder).
	FFmpeg, FFprobe string
	// Decoder picks how videos are decoded: DecoderAuto ("" too), DecoderFFmpeg or
	// DecoderLibav; the environment variable DecoderEnv overrides it. See doc.go.
	Decoder string
	// Files, when set, serves the bytes of the files below the source's root, which is then
	// a view of an object store's listing (source.Options.Files): each frame image is
	// fetched into memory when it is decoded, each video into a temporary file.
	Files source.Files

	toolsNamed bool // FFmpeg or FFprobe was set (validate)
}

func (o Options) validate(kind string) (Options, error) {
	if o.ClipLen < 0 || o.ClipStride < 0 {
		return o, fmt.Errorf("video: --clip-len and --clip-stride must not be negative")
	}
	if o.ClipStride > 0 && o.ClipLen == 0 {
		return o, fmt.Errorf("video: --clip-stride needs --clip-len")
	}
	if o.ClipLen > 0 && o.ClipStride == 0 {
		o.ClipStride = o.ClipLen
	}
	switch o.Short {
	case "":
		o.Short = ShortSkip
	case ShortSkip, ShortPad:
	default:
		return o, fmt.Errorf("video: unknown short-video policy %q (want skip or pad)", o.Short)
	}
	if o.FPS < 0 || o.FPS != o.FPS || o.FPS > 1e6 {
		return o, fmt.Errorf("video: --fps must be a positive rate, got %v", o.FPS)
	}
	if kind == KindFrames && o.FPS != 0 {
		return o, fmt.Errorf("video: --fps applies to --from video; a frame folder has no timeline to resample")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Threads <= 0 {
		o.Threads = 1
	}
	o.toolsNamed = o.toolsNamed || o.FFmpeg != "" || o.FFprobe != ""
	if o.FFmpeg == "" {
		o.FFmpeg = "ffmpeg"
	}
	if o.FFprobe == "" {
		o.FFprobe = "ffprobe"
	}
	return o, nil
}

// clipSpec is the part of a source's manifest spec describing clips.
func (o Options) clipSpec(spec map[string]any) {
	spec["clip_len"] = o.ClipLen
	spec["clip_stride"] = o.ClipStride
	spec["short"] = o.Short
	spec["tail"] = "dropped" // frames after the last complete clip
}

// isHidden reports names packer ignores: dot files and dot folders.
func isHidden(name string) bool { return strings.HasPrefix(name, ".") }

func hasExt(name string, exts []string) bool {
	lower := strings.ToLower(name)
	for _, e := range exts {
		if strings.HasSuffix(lower, e) {
			return true
		}
	}
	return false
}

// entryIs reports whether a directory entry is a folder (dir) or a regular file (!dir),
// following symbolic links.
func entryIs(full string, e fs.DirEntry, dir bool) bool {
	t := e.Type()
	if t&fs.ModeSymlink != 0 {
		st, err := os.Stat(full)
		if err != nil {
			return false
		}
		if dir {
			return st.IsDir()
		}
		return st.Mode().IsRegular()
	}
	if dir {
		return t.IsDir()
	}
	return t.IsRegular()
}

// listClasses returns the sorted names of root's non-hidden subfolders. Here and in
// listEntries, walk, countVideos and openClasses, folders are listed through files where it is
// a source.Lister (an object store's view held in memory), else on the file system.
func listClasses(files source.Files, root string) ([]string, error) {
	ents, err := source.ReadDir(files, root)
	if err != nil {
		return nil, fmt.Errorf("video: %w", err)
	}
	var classes []string
	for _, e := range ents {
		if !isHidden(e.Name()) && entryIs(filepath.Join(root, e.Name()), e, true) {
			classes = append(classes, e.Name())
		}
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("video: %s: %w (want one subfolder per class)", root, ErrNoClasses)
	}
	sort.Strings(classes)
	return classes, nil
}

// listEntries returns the sorted names of dir's non-hidden entries that are inputs. For
// files (!dirs): every entry with one of exts that is not a folder (following symbolic
// links), whatever it is: a dangling symlink, a loop, a FIFO or a device is an input that
// Decode skips with its reason (fsentry.Check), never opening it. For folders (dirs): every
// folder, and every symbolic link that does not resolve (dangling or a loop), since it may
// have been meant as one; other files are not videos of a frames dataset and are ignored.
func listEntries(files source.Files, dir string, dirs bool, exts []string) ([]string, error) {
	ents, err := source.ReadDir(files, dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		if isHidden(name) || (!dirs && !hasExt(name, exts)) {
			continue
		}
		full := filepath.Join(dir, name)
		isDir := entryIs(full, e, true)
		switch {
		case dirs && isDir, !dirs && !isDir:
			out = append(out, name)
		case dirs && e.Type()&fs.ModeSymlink != 0:
			if _, err := os.Stat(full); err != nil {
				out = append(out, name)
			}
		}
	}
	return out, nil // os.ReadDir sorts by name
}

// walk calls fn for every video (a folder when dirs, a file otherwise) of every class, in
// order, with its class label and slash-separated path relative to root.
func walk(files source.Files, root string, classes []string, dirs bool, exts []string, fn func(label int, rel string) error) error {
	for label, c := range classes {
		names, err := listEntries(files, filepath.Join(root, c), dirs, exts)
		if err != nil {
			return fmt.Errorf("video: %w", err)
		}
		for _, n := range names {
			if err := fn(label, c+"/"+n); err != nil {
				return err
			}
		}
	}
	return nil
}

// countVideos counts each class's videos and refuses empty classes.
func countVideos(files source.Files, root string, classes []string, dirs bool, exts []string, what string) (int64, error) {
	counts := make([]int, len(classes))
	var total int64
	// A folder reached twice (a class folder linking to another class, a frames video
	// folder linking to another video folder) would pack the same videos twice.
	seen := folderSet{}
	for _, c := range classes {
		if err := seen.add(files, root, c); err != nil {
			return 0, err
		}
	}
	err := walk(files, root, classes, dirs, exts, func(label int, rel string) error {
		counts[label]++
		total++
		if dirs {
			return seen.add(files, root, rel)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var empty []string
	for i, n := range counts {
		if n == 0 {
			empty = append(empty, fsentry.Name(classes[i]))
		}
	}
	if len(empty) > 0 {
		return 0, fmt.Errorf("video: %s: %w %s (want %s); remove the empty class folders",
			root, ErrEmptyClass, strings.Join(empty, ", "), what)
	}
	return total, nil
}

// openClasses lists root's class folders: their names on disk, and the class names the
// manifest writes (fsentry.Name), refusing two classes with the same name.
func openClasses(files source.Files, root string) (dirs, classes []string, err error) {
	dirs, err = listClasses(files, root)
	if err != nil {
		return nil, nil, err
	}
	classes = make([]string, len(dirs))
	for i, d := range dirs {
		classes[i] = fsentry.Name(d)
	}
	if err := fsentry.CheckClasses(classes); err != nil {
		return nil, nil, fmt.Errorf("video: %s: %w", root, err)
	}
	return dirs, classes, nil
}

// folderSet remembers folders by identity (os.SameFile), keyed by a cheap hint.
type folderSet map[[2]int64][]folderSeen

type folderSeen struct {
	rel string
	st  os.FileInfo
}

// add records folder rel (slash-separated, relative to root) and refuses one recorded already
// under another path. A path that does not resolve (a dangling link) is left to Decode.
func (fs folderSet) add(files source.Files, root, rel string) error {
	st, err := source.Stat(files, filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil || !st.IsDir() {
		return nil
	}
	k := [2]int64{st.ModTime().UnixNano(), st.Size()}
	for _, f := range fs[k] {
		if os.SameFile(f.st, st) {
			return fmt.Errorf("video: %s: %s is the same folder as %s (a symbolic link): its videos would be packed twice; remove the link",
				root, fsentry.Name(rel), fsentry.Name(f.rel))
		}
	}
	fs[k] = append(fs[k], folderSeen{rel, st})
	return nil
}

// errReplay is returned by the Enumerate of a source opened only to decode a plan's inputs.
var errReplay = imagedir.ErrReplay
