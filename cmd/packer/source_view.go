package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/storage"
)

// streamSource makes an object-store SRC readable without a copy, for the kinds that read
// their inputs' bytes through source.Options.Files (Entry.Streams: every kind): the prefix is
// listed once into a view (storage.Remote.View) of a folder under $TMPDIR (removed by the
// returned cleanup), held in memory: the view's Files answer the source's folder walks
// (source.Lister) with each object's name, size and time, and no file is made per object for
// the kinds that walk through them (Entry.Lists: every kind packer lists); for one object given
// as SRC, or a kind without Lists, the view's files are made, sparse (one per object, holding
// no data). Each input is fetched when
// it is read: an image, mask or frame whole into memory, a video into a temporary file beside the
// view (viewFiles.CreateTemp) removed once decoded, a tar, TFRecord, CIFAR or IDX file as a
// stream, a Parquet file by ranged reads, each pinned to the ETag it was listed with. A build in
// parts thus fetches only its own share of the images, frames and videos (WebDataset, TFRecord,
// Parquet, CIFAR and IDX parts read every file, as their listing is in the files' bytes), and
// nothing else of the data is written to local disk. Only list files (.csv, .jsonl, .json,
// .txt: a COCO annotation file too), which a source reads when it opens, are copied whole into
// the view. A COCO or pairs source's s3:// --images or --masks folder is viewed beside it
// (viewSides).
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
	v, err := b.View(ctx, dir, storage.ViewOptions{Whole: wholeInView, InMemory: true})
	if err != nil {
		cleanup()
		return "", nil, nil, nil, fmt.Errorf("the source %s: %w", loc, err)
	}
	files := &viewFiles{v: v, tmp: stage.Dir}
	p := v.Path()
	if sl.list != "" {
		p = filepath.Join(dir, sl.list)
		if _, err := v.Stat(p); err != nil {
			cleanup()
			return "", nil, nil, nil, fmt.Errorf("the source %s: no object %s in %s", loc, sl.list, sl.from)
		}
	}
	// The view's files are made on disk, sparse, where SRC is one object (detection reads its
	// first bytes, those of its sparse file; a source opens it as a file) or where the kind
	// walks the local folder itself (not Entry.Lists).
	sparse := func() error {
		if err := v.Sparse(); err != nil {
			cleanup()
			return fmt.Errorf("the view of %s: %w", loc, err)
		}
		return nil
	}
	if p == v.Path() && p != dir {
		if err := sparse(); err != nil {
			return "", nil, nil, nil, err
		}
	}
	kind := from
	if kind == "" {
		kind, err = source.DetectIn(p, sources, files)
		if e, ok := sourceEntry(kind); err != nil || !ok || !e.Streams {
			cleanup()
			return "", nil, nil, nil, nil
		}
	}
	if e, ok := sourceEntry(kind); !ok || !e.Lists {
		if err := sparse(); err != nil {
			return "", nil, nil, nil, err
		}
	}
	// The view's root stands for the prefix (for one object, for the object's folder).
	root := sl.from
	if v.Path() != dir {
		root = storage.JoinLocation(sl.scheme, sl.bucket, strings.TrimSuffix(path.Dir(sl.prefix), "."))
	}
	rename := func(err error) error { return withURLNames(err, dir, strings.TrimSuffix(root, "/")) }
	return p, files, rename, cleanup, nil
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
// it (a list's own file, or the listing of a WebDataset, TFRecord or Parquet prefix, is needed
// again).
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

// viewFiles serves the bytes of a view's files (source.Files): each opened from the store, or
// taken from what Prefetch fetched ahead.
type viewFiles struct {
	v   storage.View
	tmp string // the folder of CreateTemp's files ("": $TMPDIR)

	mu      sync.Mutex
	pending map[string]*prefetched // by path
	slots   chan struct{}          // one per fetch ahead in flight or not yet taken
}

// Bounds of the fetches ahead: at most prefetchAhead objects at once, in flight or fetched and
// not yet decoded, each of at most prefetchMax bytes (a larger one is fetched by its decode).
// They bound the memory the fetches ahead hold to 16 × 8 MiB, whatever the source.
const (
	prefetchAhead = 16
	prefetchMax   = 8 << 20
)

// prefetched is an object fetched ahead: its bytes once done is closed.
type prefetched struct {
	done chan struct{}
	data []byte
	err  error
}

// prefetch is the build's Prefetch hook (pipeline.Options.Prefetch) for a source read through
// a view, or nil.
func (o *buildOptions) prefetch(ctx context.Context) func(source.Item) {
	f, ok := o.files.(*viewFiles)
	if !ok {
		return nil
	}
	return func(it source.Item) { f.prefetch(ctx, it) }
}

// prefetch starts fetching the object of an input the build will decode (an image: an input
// with a path and no bytes of its own), where a slot is free: the images of a part are thus
// fetched prefetchAhead at a time, ahead of the workers that decode them, so that the
// store's latency is not paid once per image by each worker in turn.
func (f *viewFiles) prefetch(ctx context.Context, it source.Item) {
	if it.Path == "" || it.Raw != nil || it.Note != nil {
		return
	}
	etag, size := "", int64(-1)
	if it.Stamp != nil {
		etag, size = it.Stamp.ETag, it.Stamp.Size
	} else if o, ok := f.v.Object(it.Path); ok {
		size = o.Size
	}
	if size < 0 || size > prefetchMax {
		return
	}
	f.mu.Lock()
	if f.slots == nil {
		f.slots, f.pending = make(chan struct{}, prefetchAhead), map[string]*prefetched{}
	}
	if _, dup := f.pending[it.Path]; dup {
		f.mu.Unlock()
		return
	}
	select {
	case f.slots <- struct{}{}:
	default:
		f.mu.Unlock()
		return // as many ahead as allowed: the decode fetches this one itself
	}
	p := &prefetched{done: make(chan struct{})}
	f.pending[it.Path] = p
	f.mu.Unlock()
	go func() {
		defer close(p.done)
		r, _, err := f.v.Open(ctx, it.Path, etag, size)
		if err != nil {
			p.err = err
			return
		}
		defer r.Close()
		b := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
		_, p.err = b.ReadFrom(r)
		p.data = b.Bytes()
	}()
}

// take is the object fetched ahead for path, if Prefetch started one; its slot is freed.
func (f *viewFiles) take(ctx context.Context, path string) (*prefetched, bool) {
	f.mu.Lock()
	p, ok := f.pending[path]
	delete(f.pending, path)
	f.mu.Unlock()
	if !ok {
		return nil, false
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		go func() { <-p.done; <-f.slots }()
		return &prefetched{err: ctx.Err()}, true
	}
	<-f.slots
	return p, true
}

func (f *viewFiles) Open(ctx context.Context, p string, st *source.Stamp) (io.ReadCloser, int64, error) {
	if got, ok := f.take(ctx, p); ok {
		if got.err != nil {
			return nil, 0, fetchError(got.err)
		}
		return io.NopCloser(bytes.NewReader(got.data)), int64(len(got.data)), nil
	}
	etag, size := "", int64(-1)
	if st != nil {
		etag, size = st.ETag, st.Size
	}
	r, n, err := f.v.Open(ctx, p, etag, size)
	if err != nil {
		return nil, 0, fetchError(err)
	}
	return fetchReader{r}, n, nil
}

// Stamp is what the listing says of the object a view's file stands for, or of a view's
// folder (size 0 and its time, as StatStamp gives a local folder's) (source.Stamper).
func (f *viewFiles) Stamp(p string) (source.Stamp, bool) {
	o, ok := f.v.Object(p)
	if !ok {
		if st, err := f.v.Stat(p); err == nil && st.IsDir() {
			return source.Stamp{ModTime: st.ModTime().UnixNano()}, true
		}
		return source.Stamp{}, false
	}
	return source.Stamp{Size: o.Size, ModTime: o.ModTime, ETag: o.ETag}, true
}

// Stat answers for the view's files and folders from its listing (source.Lister), whether
// or not they were made on disk (storage.ViewOptions.InMemory).
func (f *viewFiles) Stat(p string) (fs.FileInfo, error) { return f.v.Stat(p) }

// ReadDir lists a folder of the view from its listing (source.Lister).
func (f *viewFiles) ReadDir(p string) ([]fs.DirEntry, error) { return f.v.ReadDir(p) }

func (f *viewFiles) OpenAt(ctx context.Context, p string, st *source.Stamp) (source.ReadAtCloser, int64, error) {
	etag, size := "", int64(-1)
	if st != nil {
		etag, size = st.ETag, st.Size
	}
	r, err := f.v.OpenAt(ctx, p, etag, size)
	if err != nil {
		return nil, 0, fetchError(err)
	}
	return fetchReaderAt{r}, r.Size(), nil
}

// CreateTemp makes a temporary file beside the view, in its folder under $TMPDIR (removed with
// the view, or as a stale staging folder after a kill), for a source that needs an input as a
// local file while it decodes it (a video: ffmpeg seeks in its input).
func (f *viewFiles) CreateTemp(pattern string) (*os.File, error) {
	return os.CreateTemp(f.tmp, pattern)
}

// fetchReaderAt is fetchReader for ranged reads. Each read is one ranged GET of exactly the
// bytes asked for where the store's reader can (exactReader), never a chunk of the object
// around them with the chunks after it read ahead: a Parquet part reads only the footers and
// row groups it needs (the Parquet reader asks for whole pages, or its read buffer's worth).
type fetchReaderAt struct{ storage.Reader }

// exactReader is a storage.Reader that reads exact ranges (the s3 backend's).
type exactReader interface {
	ReadRangeAt(p []byte, off int64) (int, error)
}

func (r fetchReaderAt) ReadAt(p []byte, off int64) (int, error) {
	read := r.Reader.ReadAt
	if e, ok := r.Reader.(exactReader); ok {
		read = e.ReadRangeAt
	}
	n, err := read(p, off)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", source.ErrFetch, err)
	}
	return n, err
}

// fetchError marks err as the store's failure (source.ErrFetch), which stops the build; an
// object deleted since it was listed or planned is a missing input, skipped as a file gone
// from a folder is.
func fetchError(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fmt.Errorf("%w: %w", source.ErrFetch, err)
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
