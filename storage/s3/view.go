package s3

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/storage"
)

// View lists the objects below the prefix once and makes dir a view of them
// (storage.Remote.View): each object a sparse file of its size and time holding no data, the
// ones opts.Whole names fetched whole. The times are the listing's, cut to whole seconds, as
// the Last-Modified a GET answers gives them: a file of the view has the stamp (size and
// modification time) of the same object's copy by Download, so that parts read from a view
// and from a copy record the same content digest. With opts.InMemory only the Whole objects
// are written: the others stand in the view's Stat and ReadDir, with the same sizes and times
// (and folder times), until Sparse makes them. dir "" makes a view of no listing, which opens
// objects by URL only.
func (b *Backend) View(ctx context.Context, dir string, opts storage.ViewOptions) (storage.View, error) {
	v := &view{b: b, files: map[string]storage.ViewObject{}}
	if dir == "" {
		return v, nil
	}
	mod := map[string]time.Time{}
	objs, single, err := b.listForDownload(ctx, mod)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s: no objects there (an empty prefix, or a missing bucket or key): %w", b.url, os.ErrNotExist)
	}
	v.dir, v.path, v.whole = filepath.Clean(dir), dir, map[string]bool{}
	if single != "" {
		v.path = filepath.Join(dir, filepath.FromSlash(single))
	}
	for name, o := range objs {
		p := filepath.Join(dir, filepath.FromSlash(name))
		t := mod[name].Truncate(time.Second)
		if opts.Whole != nil && opts.Whole(name) {
			if err := b.fetch(ctx, o, p); err != nil {
				return nil, err
			}
			v.whole[p] = true
		}
		v.files[p] = storage.ViewObject{URL: b.objURL(o.Key).String(), Size: o.Size, ModTime: t.UnixNano(), ETag: o.ETag}
	}
	v.folders = folderTree(v.dir, v.files)
	if !opts.InMemory {
		if err := v.Sparse(); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// viewFolder is a folder of a view: its time (folderTree) and the names in it, sorted.
type viewFolder struct {
	mod   time.Time
	names []string
}

// folderTree gives each folder of the view below dir (dir too) a time that stands for the
// listing below it: the second of the latest time of the objects below it, and within that
// second a fraction taken from a digest of their names, sizes, times and ETags. A folder
// standing for a prefix (a frames video's folder, whose time is its input's stamp) then has
// the same time in every view of the same listing, and another time where an object below it
// was added, removed or replaced (a file system changes a folder's time on a removal too; the
// latest time alone would not change when a frame other than the newest is removed). It
// returns the folders by path, each with the names in it.
func folderTree(dir string, files map[string]storage.ViewObject) map[string]*viewFolder {
	type folder struct {
		latest int64
		sum    uint64 // the XOR of the objects' digests: the same in any order
		names  map[string]bool
	}
	folders := map[string]*folder{}
	for p, o := range files {
		child := p
		for d := filepath.Dir(p); len(d) >= len(dir); d = filepath.Dir(d) {
			f := folders[d]
			if f == nil {
				f = &folder{names: map[string]bool{}}
				folders[d] = f
			}
			f.names[filepath.Base(child)] = true
			child = d
			f.latest = max(f.latest, o.ModTime)
			h := fnv.New64a()
			fmt.Fprintf(h, "%s\x00%d\x00%d\x00%s", p[len(d):], o.Size, o.ModTime, o.ETag)
			f.sum ^= h.Sum64()
			if d == dir {
				break
			}
		}
	}
	out := make(map[string]*viewFolder, len(folders))
	for d, f := range folders {
		sec := time.Unix(0, f.latest).Truncate(time.Second)
		vf := &viewFolder{mod: sec.Add(time.Duration(f.sum % uint64(time.Second)))}
		for n := range f.names {
			vf.names = append(vf.names, n)
		}
		slices.Sort(vf.names)
		out[d] = vf
	}
	return out
}

// folderTimes sets the times folderTree gives the folders of the view's files made on disk.
func folderTimes(dir string, files map[string]storage.ViewObject) error {
	for d, f := range folderTree(dir, files) {
		if err := os.Chtimes(d, f.mod, f.mod); err != nil {
			return err
		}
	}
	return nil
}

// Sparse makes the view's files that are not made yet (storage.View.Sparse): a sparse file for
// each object (but the Whole ones, fetched already), then each folder's time.
func (v *view) Sparse() error {
	v.sparse.Do(func() {
		for p, o := range v.files {
			if v.whole[p] {
				continue
			}
			if err := sparseFile(p, o.Size, time.Unix(0, o.ModTime)); err != nil {
				v.sparseErr = err
				return
			}
		}
		v.sparseErr = folderTimes(v.dir, v.files)
	})
	return v.sparseErr
}

// sparseFile creates the file p of size bytes holding no data (a hole), with time t.
func sparseFile(p string, size int64, t time.Time) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(p, t, t)
	}
	return err
}

// below reports whether path (cleaned) is the view's folder or lies below it.
func (v *view) below(path string) bool {
	return v.dir != "" && (path == v.dir || strings.HasPrefix(path, v.dir+string(filepath.Separator)))
}

// Stat is os.Stat, answered from the listing below the view's folder (storage.View.Stat).
func (v *view) Stat(path string) (fs.FileInfo, error) {
	c := filepath.Clean(path)
	if !v.below(c) {
		return os.Stat(path)
	}
	if o, ok := v.files[c]; ok {
		return viewInfo{name: filepath.Base(c), size: o.Size, mod: time.Unix(0, o.ModTime)}, nil
	}
	if f, ok := v.folders[c]; ok {
		return viewInfo{name: filepath.Base(c), mod: f.mod, dir: true}, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: path, Err: syscall.ENOENT}
}

// ReadDir is os.ReadDir, answered from the listing below the view's folder
// (storage.View.ReadDir): the entries sorted by name.
func (v *view) ReadDir(path string) ([]fs.DirEntry, error) {
	c := filepath.Clean(path)
	if !v.below(c) {
		return os.ReadDir(path)
	}
	f, ok := v.folders[c]
	if !ok {
		var err error = syscall.ENOENT
		if _, file := v.files[c]; file {
			err = syscall.ENOTDIR
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	ents := make([]fs.DirEntry, 0, len(f.names))
	for _, n := range f.names {
		st, err := v.Stat(filepath.Join(c, n))
		if err != nil {
			return nil, err
		}
		ents = append(ents, fs.FileInfoToDirEntry(st))
	}
	return ents, nil
}

// viewInfo is the fs.FileInfo of a file or folder of a view's listing.
type viewInfo struct {
	name string
	size int64
	mod  time.Time
	dir  bool
}

func (i viewInfo) Name() string       { return i.name }
func (i viewInfo) Size() int64        { return i.size }
func (i viewInfo) ModTime() time.Time { return i.mod }
func (i viewInfo) IsDir() bool        { return i.dir }
func (i viewInfo) Sys() any           { return nil }

func (i viewInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// view is the Backend's storage.View.
type view struct {
	b       *Backend
	path    string
	dir     string                        // the view's folder, cleaned ("": a view of no listing)
	files   map[string]storage.ViewObject // by the path of the view's file; written only by View
	folders map[string]*viewFolder        // by path: dir and the folders below it
	whole   map[string]bool               // the files View fetched whole

	sparse    sync.Once
	sparseErr error
}

func (v *view) Path() string { return v.path }

func (v *view) Object(path string) (storage.ViewObject, bool) {
	o, ok := v.files[path]
	return o, ok
}

func (v *view) Open(ctx context.Context, path, etag string, size int64) (io.ReadCloser, int64, error) {
	u, etag, size, err := v.resolve(ctx, path, etag, size)
	if err != nil {
		return nil, 0, err
	}
	return &objectReader{ctx: ctx, b: v.b, u: u, etag: etag, size: size}, size, nil
}

func (v *view) OpenAt(ctx context.Context, path, etag string, size int64) (storage.Reader, error) {
	u, etag, size, err := v.resolve(ctx, path, etag, size)
	if err != nil {
		return nil, err
	}
	return &reader{b: v.b, ctx: ctx, key: u.Prefix, size: size, etag: etag}, nil
}

// resolve is the object that path stands for (a file of the view, or a URL of the view's
// bucket), with the ETag its reads are pinned to and its size: the listing's, those given, or
// where none was given the store's (a HEAD request).
func (v *view) resolve(ctx context.Context, path, etag string, size int64) (URL, string, int64, error) {
	o, ok := v.files[path]
	if !ok {
		u, err := ParseURL(path)
		if err != nil || u.Bucket != v.b.url.Bucket || u.Prefix == "" {
			return URL{}, "", 0, fmt.Errorf("%s: not a file of the view of %s", path, v.b.url)
		}
		o = storage.ViewObject{URL: u.String(), Size: size, ETag: etag}
	} else if etag != "" && etag != o.ETag {
		return URL{}, "", 0, &Error{Op: "GetObject", URL: mustURL(o.URL), Msg: fmt.Sprintf("the object changed since it was planned: its ETag is %s, the plan recorded %s", o.ETag, etag), kind: ErrChanged}
	}
	u := mustURL(o.URL)
	if o.Size < 0 || o.ETag == "" {
		// Ask the store for what the listing did not say; the reads are then pinned to it.
		out, err := v.b.head(ctx, u.Prefix)
		if err != nil {
			return URL{}, "", 0, err
		}
		if o.ETag == "" {
			o.ETag = aws.ToString(out.ETag)
		}
		o.Size = aws.ToInt64(out.ContentLength)
	}
	return u, o.ETag, o.Size, nil
}

// mustURL parses a URL the view made.
func mustURL(s string) URL {
	u, _ := ParseURL(s)
	return u
}

// objectReader reads one object from its start, in one GET pinned to its ETag (If-Match); a
// body cut short is asked again from where it stopped, bounded as Download's fetches are.
type objectReader struct {
	ctx      context.Context
	b        *Backend
	u        URL
	etag     string
	size     int64
	off      int64
	body     io.ReadCloser
	attempts int // GETs sent
}

func (r *objectReader) Read(p []byte) (int, error) {
	for {
		if r.off >= r.size {
			return 0, io.EOF
		}
		if r.body == nil {
			if err := r.get(); err != nil {
				return 0, err
			}
		}
		n, err := r.body.Read(p)
		r.off += int64(n)
		if err == io.EOF && r.off < r.size {
			err = fmt.Errorf("%w: %d of the object's %d bytes", errShortBody, r.off, r.size)
		}
		if err == nil || err == io.EOF && r.off >= r.size {
			if r.off >= r.size {
				err = io.EOF
			}
			return n, err
		}
		r.body.Close()
		r.body = nil
		if !transientBody(err) || r.ctx.Err() != nil {
			return n, r.b.wrap("GetObject", r.u, err)
		}
		if r.attempts >= maxAttempts {
			return n, r.b.wrap("GetObject", r.u, &retry.MaxAttemptsError{Attempt: r.attempts, Err: err})
		}
		if n > 0 {
			return n, nil // the next Read asks again
		}
		d, _ := retryBackoff{}.BackoffDelay(r.attempts, err)
		t := time.NewTimer(d)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return 0, r.b.wrap("GetObject", r.u, r.ctx.Err())
		case <-t.C:
		}
	}
}

// get sends the GET of the bytes from r.off on.
func (r *objectReader) get() error {
	r.attempts++
	in := &awss3.GetObjectInput{Bucket: aws.String(r.u.Bucket), Key: aws.String(r.u.Prefix), IfMatch: aws.String(r.etag)}
	if r.off > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", r.off))
	}
	out, err := r.b.client.GetObject(r.ctx, in)
	if err != nil {
		return r.b.wrap("GetObject", r.u, err) // a 412: ErrChanged
	}
	r.body = out.Body
	return nil
}

func (r *objectReader) Close() error {
	if r.body != nil {
		return r.body.Close()
	}
	return nil
}
