package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/storage"
)

// streamSource makes an object-store SRC readable without a copy, for the kinds that read
// their inputs' bytes through source.Options.Files (Entry.Streams: image folders and lists,
// WebDataset, TFRecord): the prefix is listed once into a view (storage.Remote.View), a local
// folder of one sparse file per object, of its name, size and time but holding no data, under
// $TMPDIR and removed by the returned cleanup. The source lists the view as it lists any
// folder, and each input is fetched when it is read: an image whole into memory, a tar or
// TFRecord file as a stream, each pinned to the ETag it was listed with. A build in parts thus
// fetches only its own share of the inputs (WebDataset and TFRecord parts stream every file,
// as their listing is in the files' bytes), and nothing of the data is written to local disk.
// Only list files (.csv, .jsonl, .json, .txt), which a source reads when it opens, are copied
// whole into the view.
//
// It returns files nil, and no error, for a kind that reads local files itself (or a source
// whose kind the view cannot tell): the caller copies the prefix instead (mirrorSource).
func streamSource(ctx context.Context, loc, from string, errw progressWriter) (string, *viewFiles, func(error) error, func(), error) {
	if from != "" {
		if e, ok := sourceEntry(from); !ok || !e.Streams {
			return "", nil, nil, nil, nil
		}
	}
	sl, err := splitSourceURL(loc)
	if err != nil {
		return "", nil, nil, nil, err
	}
	b, _, err := openRemote(ctx, sl.from, "")
	if err != nil {
		return "", nil, nil, nil, err
	}
	stage, err := newStaging("packer-s3-source-*", errw)
	if err != nil {
		return "", nil, nil, nil, fmt.Errorf("the view of %s: %w", loc, err)
	}
	cleanup := func() { stage.Remove() }
	dir := filepath.Join(stage.Dir, sl.bucket)
	v, err := b.View(ctx, dir, storage.ViewOptions{Whole: wholeInView})
	if err != nil {
		cleanup()
		return "", nil, nil, nil, fmt.Errorf("the source %s: %w", loc, err)
	}
	p := v.Path()
	if sl.list != "" {
		p = filepath.Join(dir, sl.list)
		if _, err := os.Stat(p); err != nil {
			cleanup()
			return "", nil, nil, nil, fmt.Errorf("the source %s: no object %s in %s", loc, sl.list, sl.from)
		}
	}
	if from == "" {
		kind, err := source.Detect(p, sources)
		if e, ok := sourceEntry(kind); err != nil || !ok || !e.Streams {
			cleanup()
			return "", nil, nil, nil, nil
		}
	}
	// The view's root stands for the prefix (for one object, for the object's folder).
	root := sl.from
	if v.Path() != dir {
		root = storage.JoinLocation(sl.scheme, sl.bucket, strings.TrimSuffix(path.Dir(sl.prefix), "."))
	}
	rename := func(err error) error { return withURLNames(err, dir, strings.TrimSuffix(root, "/")) }
	return p, &viewFiles{v: v}, rename, cleanup, nil
}

// wholeInView says which objects a view holds whole: the lists a source reads when it opens
// (an image list, a .txt list of shards).
func wholeInView(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == ".txt" || slices.Contains(imagedir.ListExtensions, ext)
}

// plannedView opens the object-store source a plan records (src, of kind): a plan with item
// lines of an image folder names every input by URL, with its size and ETag, and the part
// opens only those, listing nothing; any other plan's source is viewed as streamSource views
// it (a list's own file, or the listing of a WebDataset or TFRecord prefix, is needed again).
func plannedView(ctx context.Context, src, kind string, items bool, errw progressWriter) (string, *viewFiles, func(error) error, func(), error) {
	if items && kind == imagedir.KindFolder {
		b, _, err := openRemote(ctx, src, "")
		if err != nil {
			return "", nil, nil, nil, err
		}
		v, err := b.View(ctx, "", storage.ViewOptions{})
		if err != nil {
			return "", nil, nil, nil, err
		}
		return src, &viewFiles{v: v}, func(err error) error { return err }, func() {}, nil
	}
	p, files, rename, cleanup, err := streamSource(ctx, src, kind, errw)
	if err == nil && files == nil {
		err = fmt.Errorf("the plan's source %s: a %s source is not read from a bucket without a copy", src, kind)
	}
	return p, files, rename, cleanup, err
}

// viewFiles serves the bytes of a view's files (source.Files): each opened from the store.
type viewFiles struct {
	v storage.View
}

func (f *viewFiles) Open(ctx context.Context, p string, st *source.Stamp) (io.ReadCloser, int64, error) {
	etag, size := "", int64(-1)
	if st != nil {
		etag, size = st.ETag, st.Size
	}
	r, n, err := f.v.Open(ctx, p, etag, size)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", source.ErrFetch, err)
	}
	return fetchReader{r}, n, nil
}

// fetchReader marks the errors of an object's read as the store's (source.ErrFetch): a body
// that failed after its retries stops the build, never passes for a damaged input.
type fetchReader struct{ io.ReadCloser }

func (r fetchReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", source.ErrFetch, err)
	}
	return n, err
}

// planView is a source listed from a view, as a plan records it: each input named by its
// object's URL, with the size, time and ETag of the listing, so that the parts read the
// objects planned, and a part refuses an object replaced since (by its ETag).
type planView struct {
	source.Source
	v storage.View
}

func (s planView) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	return s.Source.Enumerate(ctx, func(it source.Item) error {
		if o, ok := s.v.Object(it.Path); ok {
			it.Path = o.URL
			it.Stamp = &source.Stamp{Size: o.Size, ModTime: o.ModTime, ETag: o.ETag}
		}
		return emit(it)
	})
}
