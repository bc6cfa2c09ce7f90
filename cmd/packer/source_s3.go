package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/internal/progress"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/storage"
)

// mirrorSource makes an object-store SRC (s3://bucket/prefix) readable by the sources, which
// read local files: the objects below the prefix (or the one object the URL names) are copied
// into a local folder with the store's Download (s3.Backend.Download), each fetched whole
// under the ETag it was listed with and its size checked, and the build reads the copy. The
// folder is --source-cache when given (kept, so that a later build from the same SRC fetches
// only the objects that changed: repeated builds, --resume, parts built one after another on
// one node), else a new folder under $TMPDIR, removed by the returned cleanup (or by the next
// object-store command if this one is killed: newStaging). A list file names images relative
// to its folder, so a URL naming a list (.txt, .csv, .tsv) copies the list's folder. It
// returns the local path to build from, and how errors should name the copy's files (rename).
func mirrorSource(ctx context.Context, loc, cache string, errw progressWriter) (string, func(error) error, func(), error) {
	sl, err := splitSourceURL(loc)
	if err != nil {
		return "", nil, nil, err
	}
	scheme, bucket, prefix, list, from := sl.scheme, sl.bucket, sl.prefix, sl.list, sl.from
	b, _, err := openRemote(ctx, from, "")
	if err != nil {
		return "", nil, nil, err
	}
	cleanup := func() {}
	dir := cache
	if dir == "" {
		stage, err := newStaging("packer-s3-source-*", errw)
		if err != nil {
			return "", nil, nil, fmt.Errorf("the local copy of %s: %w", loc, err)
		}
		cleanup = func() { stage.Remove() }
		dir = filepath.Join(stage.Dir, bucket)
	}
	var bar *progress.Bar
	m, err := b.Download(ctx, dir, storage.DownloadOptions{Progress: func(done, total int64) {
		if bar == nil {
			bar = progress.New(errw, "fetching "+from, "bytes", total)
		}
		bar.Set(done)
	}})
	bar.Finish()
	if err != nil {
		cleanup()
		return "", nil, nil, fmt.Errorf("the source %s: %w", loc, err)
	}
	if cache != "" {
		fmt.Fprintf(errw, "source %s: %s in %s (%d fetched, %d unchanged)\n", from, humanize.Count(m.Objects, "object"), cache, m.Fetched, m.Reused)
	}
	p := m.Path
	if list != "" {
		p = filepath.Join(dir, list)
		if _, err := os.Stat(p); err != nil {
			cleanup()
			return "", nil, nil, fmt.Errorf("the source %s: no object %s in %s", loc, list, from)
		}
	}
	// The copy's root is the copy of the prefix (of the object's folder for one object).
	root := from
	if m.Path != dir {
		root = storage.JoinLocation(scheme, bucket, strings.TrimSuffix(path.Dir(prefix), "."))
	}
	rename := func(err error) error { return withURLNames(err, dir, strings.TrimSuffix(root, "/")) }
	return p, rename, cleanup, nil
}

// sourceURL is an object-store SRC taken apart: a URL naming a list file (.csv, .jsonl, ...)
// stands for the list's folder (from), where the list's images are, and the list's name.
type sourceURL struct {
	scheme, bucket, prefix string
	list                   string // the list's base name, or ""
	from                   string // the location of the folder read
}

func splitSourceURL(loc string) (sourceURL, error) {
	c, err := locations.Parse(loc)
	if err != nil {
		return sourceURL{}, usagef(err)
	}
	var u sourceURL
	u.scheme, u.bucket, u.prefix = storage.SplitLocation(c)
	if u.prefix != "" && slices.ContainsFunc(imagedir.ListExtensions, func(e string) bool {
		return strings.EqualFold(path.Ext(u.prefix), e)
	}) {
		u.list = path.Base(u.prefix)
		u.prefix = strings.TrimSuffix(path.Dir(u.prefix), ".")
	}
	u.from = storage.JoinLocation(u.scheme, u.bucket, u.prefix)
	return u, nil
}

// progressWriter is where progress and notes go (the command's standard error).
type progressWriter = interface{ Write([]byte) (int, error) }

// localNames is an error whose text names the files of an object-store source's local copy
// by their object URLs.
type localNames struct {
	err       error
	local, to string
}

func (e localNames) Error() string { return strings.ReplaceAll(e.err.Error(), e.local, e.to) }
func (e localNames) Unwrap() error { return e.err }

// withURLNames rewrites local paths below local in err's text as the URLs below to.
func withURLNames(err error, local, to string) error {
	if err == nil || local == "" {
		return err
	}
	return localNames{err, local, to}
}

// fetchDataset copies the dataset (or part) at the object-store location loc into the new
// local folder dir, for a command that reads local files (merge).
func fetchDataset(ctx context.Context, loc, dir string, errw progressWriter) error {
	b, c, err := openRemote(ctx, loc, "")
	if err != nil {
		return err
	}
	var bar *progress.Bar
	_, err = b.Download(ctx, dir, storage.DownloadOptions{NoRecord: true, Progress: func(done, total int64) {
		if bar == nil {
			bar = progress.New(errw, "fetching "+c, "bytes", total)
		}
		bar.Set(done)
	}})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("%s: %w", loc, err)
	}
	return nil
}
