package s3

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/storage"
)

// MirrorStateName is the file in a mirror folder that records which object each local file
// is a copy of (key, size and ETag), so that a later Download into the same folder fetches
// only what changed. It is a hidden file: the sources skip hidden names.
const MirrorStateName = ".packer-mirror.json"

type mirrorObject struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
	ETag string `json:"etag"`
}

type mirrorState struct {
	Source  string                  `json:"source"`
	Objects map[string]mirrorObject `json:"objects"`
}

// Download copies the source at the backend's location into the local folder dir, for a
// build to read: every object below the prefix (its folder tree), or, when the location
// names one object and nothing lies below it, that object as dir/<its base name>. Each
// object is fetched whole with the ETag it was listed with as a condition (If-Match), so that
// an object replaced during the copy is an error rather than a mix of versions, and its size
// is checked. Files are written under temporary names and renamed into place.
//
// dir is created if missing. If it holds a MirrorStateName file from an earlier Download of
// the same location, objects whose size and ETag are unchanged (and whose copy is intact in
// size) are not fetched again, and copies of objects that are gone are removed; a dir that is
// not empty and holds no such record is refused, so nothing of the user's is overwritten or
// deleted. opts.Parallel defaults to 16 objects at once; with opts.NoRecord no MirrorStateName
// file is written. Object names that are not valid local relative paths (".." elements, a name that
// is both a file and a folder) are refused, naming the object.
func (b *Backend) Download(ctx context.Context, dir string, opts storage.DownloadOptions) (storage.Mirror, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 16
	}
	objs, single, err := b.listForDownload(ctx, nil)
	if err != nil {
		return storage.Mirror{}, err
	}
	if len(objs) == 0 {
		return storage.Mirror{}, fmt.Errorf("%s: no objects there (an empty prefix, or a missing bucket or key): %w", b.url, fs.ErrNotExist)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return storage.Mirror{}, err
	}
	state, err := readMirrorState(dir, b.url.String())
	if err != nil {
		return storage.Mirror{}, err
	}
	removeAbandonedFetches(dir, true)
	m := storage.Mirror{Path: dir, Objects: len(objs)}
	if single != "" {
		m.Path = filepath.Join(dir, filepath.FromSlash(single))
	}
	// Remove copies of objects that are gone or changed, before fetching.
	var want []string
	var total int64
	for name := range state.Objects {
		if _, ok := objs[name]; !ok {
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(name))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return m, err
			}
			delete(state.Objects, name)
		}
	}
	for name, o := range objs {
		if old, ok := state.Objects[name]; ok && old == o {
			if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name))); err == nil && st.Mode().IsRegular() && st.Size() == o.Size {
				m.Reused++
				continue
			}
		}
		delete(state.Objects, name)
		want = append(want, name)
		total += o.Size
	}
	sort.Strings(want)
	// Record the state before fetching too: a copy interrupted now leaves a record the next
	// Download trusts only for the objects it lists.
	if !opts.NoRecord {
		if err := writeMirrorState(dir, state); err != nil {
			return m, err
		}
	}
	var (
		mu    sync.Mutex
		done  int64
		first error
		wg    sync.WaitGroup
		dirs  = map[string]bool{} // folders that received a file: synced before the record
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan string)
	for range min(opts.Parallel, max(1, len(want))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range jobs {
				o := objs[name]
				err := b.fetch(ctx, o, filepath.Join(dir, filepath.FromSlash(name)))
				mu.Lock()
				if err != nil {
					if first == nil {
						first = err
						cancel()
					}
				} else {
					dirs[filepath.Dir(filepath.Join(dir, filepath.FromSlash(name)))] = true
					state.Objects[name] = o
					done += o.Size
					m.Fetched++
					if opts.Progress != nil {
						opts.Progress(done, total)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, name := range want {
		select {
		case jobs <- name:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	m.Bytes = done
	// The renames of the fetched files are made durable before the record lists them.
	for d := range dirs {
		if err := fileutil.SyncDir(d); err != nil && first == nil {
			first = err
		}
	}
	if !opts.NoRecord {
		if err := writeMirrorState(dir, state); err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	return m, first
}

// listForDownload lists the objects to copy with their sizes and ETags, by name below the
// prefix; where nothing lies below it and the prefix is itself an object, that object alone,
// under its base name (returned as single). Where mod is not nil, it receives each object's
// time by name.
func (b *Backend) listForDownload(ctx context.Context, mod map[string]time.Time) (map[string]mirrorObject, string, error) {
	objs := map[string]mirrorObject{}
	prefix := b.url.keyPrefix()
	p := awss3.NewListObjectsV2Paginator(b.client, &awss3.ListObjectsV2Input{
		Bucket: aws.String(b.url.Bucket),
		Prefix: aws.String(prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, "", b.wrap("ListObjectsV2", b.url, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			name := strings.TrimPrefix(key, prefix)
			if name == "" || strings.HasSuffix(name, "/") {
				continue // a folder marker
			}
			if !fs.ValidPath(name) || path.Clean(name) != name || !filepath.IsLocal(filepath.FromSlash(name)) {
				return nil, "", fmt.Errorf("%s: the object name %q cannot be a local file name (empty, \".\" or \"..\" elements)", b.objURL(key), name)
			}
			if name == MirrorStateName || name == MirrorStateName+".tmp" {
				return nil, "", fmt.Errorf("%s: an object named %s would clash with the mirror's own record", b.objURL(key), name)
			}
			objs[name] = mirrorObject{Key: key, Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag)}
			if mod != nil {
				mod[name] = aws.ToTime(o.LastModified)
			}
		}
	}
	// A name that is both a file and a folder ("a" and "a/b") cannot be copied.
	for name := range objs {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := objs[d]; ok {
				return nil, "", fmt.Errorf("%s: the object %q is also a folder of %q: it cannot be copied to a local folder", b.url, d, name)
			}
		}
	}
	if len(objs) > 0 || b.url.Prefix == "" {
		return objs, "", nil
	}
	out, err := b.head(ctx, b.url.Prefix)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return objs, "", nil
		}
		return nil, "", err
	}
	base := path.Base(b.url.Prefix)
	objs[base] = mirrorObject{Key: b.url.Prefix, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag)}
	if mod != nil {
		mod[base] = aws.ToTime(out.LastModified)
	}
	return objs, base, nil
}

// fetch copies one object to dst through a temporary file in dst's folder. A body cut short
// is asked again for the bytes still missing (bodyRetry; from the start where the listing gave
// no ETag to pin the rest to).
func (b *Backend) fetch(ctx context.Context, o mirrorObject, dst string) error {
	key := o.Key
	u := b.objURL(key)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), fetchTempPattern)
	if err != nil {
		return err
	}
	lock, err := storage.LockTemp(f) // until the rename: removeAbandonedFetches leaves it
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	defer lock.Close()
	var n int64
	var modified *time.Time
	err = bodyRetry(ctx, func() (bool, error) {
		in := &awss3.GetObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key)}
		if o.ETag != "" {
			in.IfMatch = aws.String(o.ETag)
			if n > 0 {
				in.Range = aws.String(fmt.Sprintf("bytes=%d-", n))
			}
		} else if n > 0 {
			if err := f.Truncate(0); err != nil {
				return false, err
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return false, err
			}
			n = 0
		}
		out, err := b.client.GetObject(ctx, in)
		if err != nil {
			return false, err
		}
		defer out.Body.Close()
		modified = out.LastModified
		m, err := io.Copy(f, out.Body)
		n += m
		if err == nil && n < o.Size {
			// a body that ended at a Content-Length shorter than the object
			err = fmt.Errorf("%w: %d of the object's %d bytes", errShortBody, n, o.Size)
		}
		return true, err
	})
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil && n != o.Size {
		err = fmt.Errorf("%s: GetObject: got %d bytes, the listing said %d", u, n, o.Size)
	} else if err != nil {
		err = b.wrap("GetObject", u, err)
	}
	if err == nil && modified != nil {
		// The copy carries the object's time, not the time of the copy: what identifies an
		// input's content (its size and modification time, which parts record) is then the
		// same in every copy of one object, on every machine.
		err = os.Chtimes(f.Name(), *modified, *modified)
	}
	if err == nil {
		// fsync, close, rename: a copy the mirror's record lists survives a crash whole.
		err = fileutil.CommitFile(f, dst)
	} else {
		f.Close()
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// fetchTempPattern names the temporary files of fetch (os.CreateTemp's pattern).
const fetchTempPattern = ".packer-fetch-*"

// removeAbandonedFetches removes the temporary files that fetches killed mid-object left in
// the folders below root (or in root alone, unless deep): those whose lock is free
// (storage.RemoveAbandoned); a fetch running in another process holds its lock.
func removeAbandonedFetches(root string, deep bool) {
	if !deep {
		m, _ := filepath.Glob(filepath.Join(globEscape(root), fetchTempPattern))
		for _, p := range m {
			storage.RemoveAbandoned(p)
		}
		return
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if ok, _ := filepath.Match(fetchTempPattern, d.Name()); ok {
				storage.RemoveAbandoned(p)
			}
		}
		return nil
	})
}

func readMirrorState(dir, source string) (*mirrorState, error) {
	p := filepath.Join(dir, MirrorStateName)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		if len(ents) > 0 {
			return nil, fmt.Errorf("%s is not empty and holds no %s: it is not a copy of an object store location, and nothing in it is overwritten; give an empty or new folder", dir, MirrorStateName)
		}
		return &mirrorState{Source: source, Objects: map[string]mirrorObject{}}, nil
	}
	if err != nil {
		return nil, err
	}
	var s mirrorState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if s.Source != source {
		return nil, fmt.Errorf("%s is a copy of %s, not of %s: give another folder", dir, s.Source, source)
	}
	if s.Objects == nil {
		s.Objects = map[string]mirrorObject{}
	}
	return &s, nil
}

func writeMirrorState(dir string, s *mirrorState) error {
	data, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	return fileutil.WriteFileAtomic(filepath.Join(dir, MirrorStateName), data)
}
