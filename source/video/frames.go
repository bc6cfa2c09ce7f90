package video

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/source/internal/memdecode"
	"github.com/packer-dev/packer/transforms"
)

// FramesSource is a source.Source over folders of extracted frames:
// SRC/class/video_id/frame images (--from frames).
type FramesSource struct {
	root    string
	classes []string // class names as the manifest writes them (fsentry.Name)
	dirs    []string // the class folders' names on disk, parallel to classes
	count   int64
	opts    Options
	scratch sync.Pool // *transforms.DecodeScratch
	plan    source.DecodePlan
	replay  bool // opened by ReplayFrames: it decodes, and lists nothing
}

var _ source.PlannedSource = (*FramesSource)(nil)

// PlanDecode takes the build's transform: frames of different sizes share a clip when it
// crops or resizes to one size, and with p.Windows Decode reads of each JPEG frame only the
// rectangle the transform reads (transforms.DecodeFileRegion) and emits it as a window
// (source.Clip.Windows): the same output bytes, less decoding.
func (s *FramesSource) PlanDecode(p source.DecodePlan) { s.plan = p }

// OpenFrames opens a frame-folder dataset: every non-hidden subfolder of root is a class
// (labels in sorted name order), every non-hidden subfolder of a class is one video, and the
// video's frames are its image files (imagedir.Extensions) in natural order (NaturalLess).
// Files directly inside a class folder are ignored. A class without video folders is refused.
func OpenFrames(root string, opts Options) (*FramesSource, error) {
	opts, err := opts.validate(KindFrames)
	if err != nil {
		return nil, err
	}
	dirs, classes, err := openClasses(opts.Files, root)
	if err != nil {
		return nil, err
	}
	n, err := countVideos(opts.Files, root, dirs, true, nil, "one folder of frame images per video")
	if err != nil {
		return nil, err
	}
	return &FramesSource{root: root, classes: classes, dirs: dirs, count: n, opts: opts}, nil
}

// ReplayFrames opens a frame-folder source without listing it, to decode the video folders a
// plan file lists (source.Entry.Replay): classes are the plan's class names, and Enumerate
// fails. Each video's frames are still listed by Decode, as for any build.
func ReplayFrames(root string, classes []string, opts Options) (*FramesSource, error) {
	opts, err := opts.validate(KindFrames)
	if err != nil {
		return nil, err
	}
	if err := replayRoot(opts.Files, root, classes); err != nil {
		return nil, err
	}
	return &FramesSource{root: root, classes: append([]string(nil), classes...), opts: opts, replay: true}, nil
}

// replayRoot checks what a source opened from a plan can check without listing: the root is a
// folder and the plan's class names are valid. The root is looked at through files where it
// is a source.Lister (a view in memory), as every folder of the source.
func replayRoot(files source.Files, root string, classes []string) error {
	if err := fsentry.CheckClasses(classes); err != nil {
		return fmt.Errorf("video: %s: %w", root, err)
	}
	if st, err := source.Stat(files, root); err != nil {
		return fmt.Errorf("video: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("video: %s is not a folder", root)
	}
	return nil
}

// Info describes the source; Spec holds only host-independent facts.
func (s *FramesSource) Info() source.SourceInfo {
	spec := map[string]any{
		"kind":        KindFrames,
		"layout":      "class/video/frame",
		"extensions":  imagedir.Extensions,
		"order":       "natural",
		"hidden":      "ignored",
		"exif_orient": s.opts.ExifOrient,
		"max_pixels":  maxPixels(s.opts.MaxPixels),
	}
	s.opts.clipSpec(spec)
	return source.SourceInfo{
		Kind:    KindFrames,
		Classes: append([]string(nil), s.classes...),
		Spec:    spec,
		ClipLen: s.opts.ClipLen,
		HasMeta: true,
		Count:   s.count,
	}
}

func maxPixels(v int64) int64 {
	if v == 0 {
		return transforms.DefaultMaxPixels
	}
	return v
}

// Enumerate emits one item per video folder, classes in order and folders by name.
func (s *FramesSource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	if s.replay {
		return fmt.Errorf("video: %s: %w", s.root, errReplay)
	}
	return enumerate(ctx, s.opts.Files, s.root, s.dirs, true, nil, emit)
}

// Decode lists the folder's frames, decodes them one at a time (as transforms.DecodeFile,
// Pillow-exact RGB) and emits each clip as soon as its last frame is decoded, holding at most
// ClipLen frames. Every frame must have the first frame's size.
func (s *FramesSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	bad := func(err error) error { return &source.InputError{Input: it.Name, Err: err} }
	l := source.ListerOf(s.opts.Files) // the view's listing in memory, or nil: the file system
	if err := fsentry.CheckDirIn(l, it.Path); err != nil {
		return bad(err)
	}
	names, err := listEntries(s.opts.Files, it.Path, false, imagedir.Extensions)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
		}
		return bad(err)
	}
	if len(names) == 0 {
		return bad(fmt.Errorf("%w: the folder holds no frame images (%s)", errNoFrames, strings.Join(imagedir.Extensions, ", ")))
	}
	sort.Slice(names, func(i, j int) bool { return NaturalLess(names[i], names[j]) })
	// Check every frame before decoding any, so a video with a frame that cannot be read (a
	// dangling symlink, a FIFO) is skipped whole rather than after some of its records.
	for i, name := range names {
		if err := fsentry.CheckIn(l, filepath.Join(it.Path, name)); err != nil {
			return bad(fmt.Errorf("frame %d (%s): %w", i, fsentry.Name(name), err))
		}
	}

	dopts := transforms.DecodeOptions{MaxPixels: s.opts.MaxPixels, ExifOrient: s.opts.ExifOrient}
	var held []*transforms.DecodeScratch // scratches lent to frames, for the deferred return
	defer func() {
		for _, sc := range held {
			if sc != nil {
				s.scratch.Put(sc)
			}
		}
	}()
	release := func(f frame) {
		i := f.token.(int)
		s.scratch.Put(held[i])
		held[i] = nil
	}
	c := newClipper(s.opts.ClipLen, s.opts.ClipStride, s.opts.Short == ShortPad, it.Name, it.Label, emit, release)
	var region func(w, h int) image.Rectangle
	if s.plan.Windows {
		region = s.plan.Transform.Region
	}
	var w0, h0, ow0, oh0 int
	_, _, fixed := s.plan.Transform.FixedSize()
	sameSize := s.opts.ClipLen > 0 && !fixed
	for i, name := range names {
		if err := ctx.Err(); err != nil {
			c.releaseAll()
			return err
		}
		sc, _ := s.scratch.Get().(*transforms.DecodeScratch)
		if sc == nil {
			sc = new(transforms.DecodeScratch)
		}
		fp := filepath.Join(it.Path, name)
		name := fsentry.Name(name)
		if err := fsentry.CheckIn(l, fp); err != nil {
			s.scratch.Put(sc)
			c.releaseAll()
			return bad(fmt.Errorf("frame %d (%s): %w", i, name, err))
		}
		d, err := memdecode.DecodeFile(ctx, s.opts.Files, fp, nil, dopts, region, sc)
		if err != nil {
			s.scratch.Put(sc)
			c.releaseAll()
			return bad(fmt.Errorf("frame %d (%s): %w", i, name, transforms.DecodeReason(err)))
		}
		// A frame's size matters only where frames share a record: clips (--clip-len N)
		// whose transform does not give every frame one size. Then every frame must come out
		// at the first frame's size; elsewhere each frame is transformed on its own.
		if sameSize {
			ow, oh, err := s.plan.Transform.FrameSize(d.Full.X, d.Full.Y)
			if err != nil {
				s.scratch.Put(sc)
				c.releaseAll()
				return bad(fmt.Errorf("frame %d (%s): %w", i, name, err))
			}
			if i == 0 {
				w0, h0, ow0, oh0 = d.Full.X, d.Full.Y, ow, oh
			} else if ow != ow0 || oh != oh0 {
				s.scratch.Put(sc)
				c.releaseAll()
				return bad(fmt.Errorf("%w: frame %d (%s) is %dx%d, frame 0 (%s) is %dx%d, and the frames of a clip record must have one size: add --crop or --size, or pack one record per frame (--clip-len 0)",
					ErrSizeChange, i, name, d.Full.X, d.Full.Y, fsentry.Name(names[0]), w0, h0))
			}
		}
		var win *source.Window
		if d.At != (image.Point{}) || d.Full != image.Pt(d.W, d.H) {
			win = &source.Window{X: d.At.X, Y: d.At.Y, FullW: d.Full.X, FullH: d.Full.Y}
		}
		// Frames are held in decode order; the slot index is the token.
		slot := -1
		for k, h := range held {
			if h == nil {
				slot = k
				break
			}
		}
		if slot < 0 {
			slot = len(held)
			held = append(held, nil)
		}
		held[slot] = sc
		if err := c.push(frame{img: d.Image, index: i, file: name, token: slot, win: win}); err != nil {
			c.releaseAll()
			return err
		}
	}
	if err := c.finish(); err != nil {
		if errors.Is(err, ErrShort) || errors.Is(err, errNoFrames) {
			return bad(err)
		}
		return err
	}
	return nil
}

// ErrSizeChange is wrapped by the reason of a video whose frames change size.
var ErrSizeChange = errors.New("frame size changed")
