package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/packer-dev/packer/storage"
)

// A coco or pairs source reads a second folder besides SRC: --images (the images a COCO
// annotation file names) or --masks (a pairs source's masks). With an s3:// SRC, such a folder
// given as an s3:// location is viewed as SRC is (streamSource: listed once, held in memory,
// each object fetched when it is read), and the view's Files serve both (their listings too:
// source.Lister); one given as a local
// folder keeps the copy of SRC (mirrorSource) and reads the folder in place, as before.

// sideLocal reports whether --images or --masks names a local folder: an s3:// SRC is then
// copied (mirrorSource), not viewed.
func (o *buildOptions) sideLocal() bool {
	for _, v := range []string{o.Images, o.Masks} {
		if v != "" && !remote(v) {
			return true
		}
	}
	return false
}

// viewSides views each s3:// --images or --masks folder (viewSide), after SRC's view files:
// files then serves its objects too, and the source opens the view's folder in its place
// (o.sides). It returns rename and cleanup extended with the new views'.
func (o *buildOptions) viewSides(ctx context.Context, files *viewFiles, rename func(error) error, cleanup func()) (func(error) error, func(), error) {
	for _, loc := range []string{o.Images, o.Masks} {
		if loc == "" || !remote(loc) {
			continue
		}
		dir, v, remove, err := viewSide(ctx, loc, o.IO.Err)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		files.v = append(asViews(files.v), v)
		if o.sides == nil {
			o.sides = map[string]string{}
		}
		o.sides[loc] = v.Path()
		prevRename, prevCleanup := rename, cleanup
		rename = func(err error) error { return withURLNames(prevRename(err), dir, strings.TrimSuffix(loc, "/")) }
		cleanup = func() { remove(); prevCleanup() }
	}
	return rename, cleanup, nil
}

// viewSide lists the s3:// folder loc into a view under a new folder of $TMPDIR, and returns
// the folder its objects are named below, the view, and its removal.
func viewSide(ctx context.Context, loc string, errw io.Writer) (string, storage.View, func(), error) {
	sl, err := splitSourceURL(loc)
	if err != nil {
		return "", nil, nil, err
	}
	b, _, err := openRemote(ctx, sl.from, "")
	if err != nil {
		return "", nil, nil, err
	}
	stage, err := newStaging("packer-s3-source-*", errw)
	if err != nil {
		return "", nil, nil, fmt.Errorf("the view of %s: %w", loc, err)
	}
	dir := filepath.Join(stage.Dir, sl.bucket)
	v, err := b.View(ctx, dir, storage.ViewOptions{InMemory: true})
	if err != nil {
		stage.Remove()
		return "", nil, nil, fmt.Errorf("%s: %w", loc, err)
	}
	return dir, v, func() { stage.Remove() }, nil
}

// sidePath is the folder a source reads for the --images or --masks value v: its view where v
// is an s3:// folder that viewSides viewed, else v.
func (o *buildOptions) sidePath(v string) string {
	if p, ok := o.sides[v]; ok {
		return p
	}
	return v
}

// views is several views served as one (storage.View): an s3:// SRC's and those of its
// --images or --masks folders. A file of a view is served by that view; an object's URL by the
// first view (SRC's, whose plan items name objects by URL).
type views []storage.View

func asViews(v storage.View) views {
	if vs, ok := v.(views); ok {
		return vs
	}
	return views{v}
}

func (vs views) Path() string { return vs[0].Path() }

func (vs views) Object(path string) (storage.ViewObject, bool) {
	for _, v := range vs {
		if o, ok := v.Object(path); ok {
			return o, true
		}
	}
	return storage.ViewObject{}, false
}

// of is the view that lists path, or the first.
func (vs views) of(path string) storage.View {
	for _, v := range vs {
		if _, ok := v.Object(path); ok {
			return v
		}
	}
	return vs[0]
}

func (vs views) Open(ctx context.Context, path, etag string, size int64) (io.ReadCloser, int64, error) {
	return vs.of(path).Open(ctx, path, etag, size)
}

func (vs views) OpenAt(ctx context.Context, path, etag string, size int64) (storage.Reader, error) {
	return vs.of(path).OpenAt(ctx, path, etag, size)
}

// Stat is the answer of the first view that lists path, else the first view's.
func (vs views) Stat(path string) (fs.FileInfo, error) {
	st, err := vs[0].Stat(path)
	for _, v := range vs[1:] {
		if err == nil {
			break
		}
		if s, e := v.Stat(path); e == nil {
			st, err = s, e
		}
	}
	return st, err
}

// ReadDir is the answer of the first view that lists path, else the first view's.
func (vs views) ReadDir(path string) ([]fs.DirEntry, error) {
	ents, err := vs[0].ReadDir(path)
	for _, v := range vs[1:] {
		if err == nil {
			break
		}
		if e2, e := v.ReadDir(path); e == nil {
			ents, err = e2, e
		}
	}
	return ents, err
}

func (vs views) Sparse() error {
	for _, v := range vs {
		if err := v.Sparse(); err != nil {
			return err
		}
	}
	return nil
}
