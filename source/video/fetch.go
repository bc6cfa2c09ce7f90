package video

import (
	"context"
	"io"
	"os"
	"path"
	"strings"

	"github.com/packer-dev/packer/source"
)

// tempFiles is what a source.Files may offer besides: temporary files kept with its own
// (cmd/packer's view of an s3:// SRC makes them in the view's folder under $TMPDIR, removed
// with it, or by the next command after a kill). Without it they go to $TMPDIR.
type tempFiles interface {
	CreateTemp(pattern string) (*os.File, error)
}

// fetch copies the video of it from Options.Files (an object of a store, read once from its
// start, pinned to its listed or planned ETag) into a temporary file, for ffprobe and ffmpeg,
// which seek in their input. It returns the file's path and its removal, which the caller
// runs as soon as the video is decoded: a build holds at most one fetched video per worker.
func (s *Source) fetch(ctx context.Context, it source.Item) (string, func(), error) {
	r, _, err := s.opts.Files.Open(ctx, it.Path, it.Stamp)
	if err != nil {
		return "", nil, err
	}
	defer r.Close()
	pattern := "packer-video-*" + strings.ToLower(path.Ext(it.Path))
	var f *os.File
	if t, ok := s.opts.Files.(tempFiles); ok {
		f, err = t.CreateTemp(pattern)
	} else {
		f, err = os.CreateTemp("", pattern)
	}
	if err != nil {
		return "", nil, err
	}
	remove := func() { os.Remove(f.Name()) }
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		remove()
		return "", nil, err
	}
	return f.Name(), remove, nil
}
