package storage

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"
)

// A location names where a dataset or a source lives: a local path, or SCHEME://BUCKET/PREFIX
// in a store that a package of its own implements (storage/s3 for s3://). A Registry maps each
// scheme to its package's Location, and every other location (a path) to the local file
// system's (LocalLocation); the commands open every location through one table, so that adding
// a store is its package plus one line in that table.

// A Location is what a store's package registers: how its locations are recognised, checked
// and opened.
type Location struct {
	// Scheme names the store's locations: "s3" for s3://bucket/prefix. The local file system's
	// is "": its locations are the paths, every location that starts with no registered
	// SCHEME://.
	Scheme string
	// Parse checks loc (which starts with Scheme://) and returns it in its canonical form,
	// SCHEME://BUCKET or SCHEME://BUCKET/PREFIX with no trailing slash. Its error names loc
	// and is the command line's fault.
	Parse func(loc string) (string, error)
	// Open returns the store's backend of loc (a Parse-able location). It sends no request. A
	// store other than the local file system returns a Remote.
	Open func(ctx context.Context, loc string, opts OpenOptions) (Backend, error)
}

// LocalLocation is the local file system's entry in a Registry: a path, as it is, opened as
// NewLocal(path). A dataset is published there by a LocalStage, which the build engine makes
// itself (it holds the output's lock around its recovery, its resume and its publish).
func LocalLocation() Location {
	return Location{
		Parse: func(loc string) (string, error) { return loc, nil },
		Open: func(_ context.Context, loc string, _ OpenOptions) (Backend, error) {
			return NewLocal(loc), nil
		},
	}
}

// OpenOptions tune a Remote backend; the zero value is the store's defaults.
type OpenOptions struct {
	// PartSize is the size of the parts a file is uploaded in.
	PartSize int64
	// Parallel is the number of parts of one file sent at once.
	Parallel int
	// CacheDir, if set, keeps a local copy of every file opened, for readers that read a
	// dataset more than once. Never set it where the store itself must be read (verify).
	CacheDir string
	// StallTimeout aborts a read or write on a connection to the store that makes no progress
	// for this long; the request is then retried as after a reset (0: the store's default).
	StallTimeout time.Duration
}

// Remote is a Backend in a store other than the local file system: the contract a store's
// package implements (storage/s3 is one; storagetest checks its Backend half). Its objects
// cannot be renamed, so a dataset reaches it by an upload (Stage), and the commands that read
// local files read a copy (Download).
type Remote interface {
	Backend
	// Stage checks, before any work, that the backend's location may receive a new dataset
	// (a dataset there is refused, and an interrupted build's leftovers, unless opts.Force),
	// then makes the local folder the dataset is written in (opts.Staging). The caller
	// Discards the stage when it is done, published or not.
	Stage(ctx context.Context, opts StageOptions) (UploadStage, error)
	// Download copies the files at the backend's location into the local folder dir, for a
	// command that reads local files (the sources, merge).
	Download(ctx context.Context, dir string, opts DownloadOptions) (Mirror, error)
	// View lists the files at the backend's location once and makes the local folder dir a
	// view of them: one file per object, of its name, size and time but holding no data (a
	// sparse file), except the objects opts.Whole names, copied whole; the view's Open then
	// streams an object's bytes when they are read. With opts.InMemory the files stand in the
	// view's Stat and ReadDir only, until its Sparse makes them. dir "" makes a view of no
	// listing, whose Open reads only the objects named by URL.
	View(ctx context.Context, dir string, opts ViewOptions) (View, error)
}

// ViewOptions tune Remote.View.
type ViewOptions struct {
	// Whole, if set, says which files (by slash-separated name below the location) the view
	// holds whole: the small ones a source reads when it opens (lists, annotations).
	Whole func(name string) bool
	// InMemory keeps the listing in memory: no file is made in dir for an object (but those
	// Whole names), and the view's Stat and ReadDir answer for its files and folders as the
	// file system answers for the sparse files of a view without it.
	InMemory bool
}

// A View is a local folder standing for the files at a store's location (Remote.View); its
// methods are safe for concurrent use.
type View interface {
	// Path is the view of the location: the folder, or the file when the location names one
	// object.
	Path() string
	// Object is what the listing says of the object that the view's file at path stands for.
	Object(path string) (ViewObject, bool)
	// Open opens the object that the view's file at path stands for, or the object at the
	// URL path, for one sequential read, and returns its size. The reads are pinned to etag,
	// or where it is "" to the ETag the object was listed with: an object replaced since is
	// an error naming it, never a mix of two versions. size is the object's size where path
	// is a URL (-1: unknown, asked of the store).
	Open(ctx context.Context, path, etag string, size int64) (io.ReadCloser, int64, error)
	// OpenAt is Open for reads at any offset: each a ranged GET (small ones through the
	// backend's chunk cache), pinned as Open's reads are.
	OpenAt(ctx context.Context, path, etag string, size int64) (Reader, error)
	// Stat and ReadDir are os.Stat and os.ReadDir, answered for the paths below the view's
	// folder from the listing (the same sizes, times and names as the view's sparse files,
	// whether they are made or not: ViewOptions.InMemory) and for other paths by the file
	// system. Nothing below the view's folder is a symbolic link.
	Stat(path string) (fs.FileInfo, error)
	ReadDir(path string) ([]fs.DirEntry, error)
	// Sparse makes the files of a view listed in memory (ViewOptions.InMemory), for a source
	// that walks the local folder itself; nothing for a view whose files are made.
	Sparse() error
}

// ViewObject is what a listing says of one object.
type ViewObject struct {
	URL     string
	Size    int64
	ModTime int64 // nanoseconds since 1970 UTC
	ETag    string
}

// StageOptions tune Remote.Stage and the publish of its stage.
type StageOptions struct {
	// Force replaces a dataset at the location (its files are deleted only once the new one
	// is in place) and removes an interrupted build's leftovers there.
	Force bool
	// Formats, if set, are the format names a dataset Force replaces may have (the command's
	// table of outputs): a dataset there of another format is refused, not replaced.
	Formats []string
	// Staging makes the local folder the dataset is written in before its upload; Discard
	// removes it.
	Staging func() (*Staging, error)
	// Warn, if set, is told what went wrong after the publish succeeded.
	Warn func(msg string)
	// Progress, if set, is called as the upload goes with the bytes sent and the total.
	Progress func(sent, total int64)
	// PartSent, if set, is called after each part of an upload is sent, with the upload's
	// context (a hook for tests that interrupt a build mid-upload).
	PartSent func(ctx context.Context, name string, part int32)
	// Command is the packer command that writes the dataset ("build" or "merge"; "" is
	// build): a message that asks for it to be run again names it.
	Command string
}

// An UploadStage is a Stage kept in a local folder until Publish uploads it: how a dataset
// reaches a store without renames. Discard removes the local folder, after a Publish too.
type UploadStage interface {
	Stage
	// Dir is the local folder the build writes the dataset in; Backend is its backend.
	Dir() string
}

// DownloadOptions tune Remote.Download.
type DownloadOptions struct {
	// Parallel is the number of files fetched at once (0: the store's default).
	Parallel int
	// NoRecord leaves no record of the copy in dir (a one-off copy, such as a dataset fetched
	// for a command that then checks every file of its folder); dir must be new or empty.
	// Without it, a later Download into the same folder fetches only what changed.
	NoRecord bool
	// Progress, if set, is called after each file with the bytes fetched so far and the
	// total to fetch.
	Progress func(done, total int64)
}

// Mirror is what Download made: Path is the local copy of the location (the folder, or the
// file when the location names one object); Fetched and Reused count the files fetched and
// those whose earlier copy was still current.
type Mirror struct {
	Path            string
	Objects         int
	Fetched, Reused int
	Bytes           int64 // bytes fetched
}

// A Registry maps location schemes to the stores that open them. A location that starts
// with no registered SCHEME:// is a local path, which the entry of scheme "" opens (the
// local file system's, LocalLocation).
type Registry struct {
	locs []Location
}

// NewRegistry returns the registry of the given stores. Where two name one scheme, the first
// one opens its locations.
func NewRegistry(locs ...Location) *Registry {
	return &Registry{locs: locs}
}

// Lookup returns the store loc lies in: the one whose SCHEME:// starts it, else the local
// file system's entry (scheme ""). It returns false where no entry takes loc (a path, where
// the registry has no local entry).
func (r *Registry) Lookup(loc string) (Location, bool) {
	for _, l := range r.locs {
		if l.Scheme != "" && strings.HasPrefix(loc, l.Scheme+"://") {
			return l, true
		}
	}
	for _, l := range r.locs {
		if l.Scheme == "" {
			return l, true
		}
	}
	return Location{}, false
}

// Remote reports whether loc lies in a registered store other than the local file system (it
// is not a local path).
func (r *Registry) Remote(loc string) bool {
	l, ok := r.Lookup(loc)
	return ok && l.Scheme != ""
}

// Schemes lists the registered schemes of the stores other than the local file system, in
// the order they were registered.
func (r *Registry) Schemes() []string {
	var s []string
	for _, l := range r.locs {
		if l.Scheme != "" {
			s = append(s, l.Scheme)
		}
	}
	return s
}

// Parse returns loc in its canonical form where it lies in a registered store; a local path
// is returned as it is.
func (r *Registry) Parse(loc string) (string, error) {
	l, ok := r.Lookup(loc)
	if !ok || l.Scheme == "" {
		return loc, nil
	}
	c, err := l.Parse(loc)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(c, l.Scheme+"://") {
		return "", fmt.Errorf("%s: the %s store parsed it as %q, not a location of its own", loc, l.Scheme, c)
	}
	return c, nil
}

// Open returns the backend of loc, opened by the store it lies in (Lookup) with opts, and loc
// in its canonical form (Parse). A location that does not parse is the Parse error; one that
// no entry takes is an error naming it.
func (r *Registry) Open(ctx context.Context, loc string, opts OpenOptions) (Backend, string, error) {
	l, ok := r.Lookup(loc)
	if !ok {
		return nil, "", fmt.Errorf("%s: no store of this registry opens it (%s)", loc, strings.Join(r.Schemes(), ", "))
	}
	c, err := r.Parse(loc)
	if err != nil {
		return nil, "", err
	}
	b, err := l.Open(ctx, loc, opts)
	if err != nil {
		return nil, "", err
	}
	return b, c, nil
}

// Overlap reports whether a and b are valid locations of one store and one bucket of which
// one is the other or lies below it. Local paths never overlap here.
func (r *Registry) Overlap(a, b string) bool {
	la, oka := r.Lookup(a)
	lb, okb := r.Lookup(b)
	if !oka || !okb || la.Scheme != lb.Scheme {
		return false
	}
	ca, erra := r.Parse(a)
	cb, errb := r.Parse(b)
	if erra != nil || errb != nil {
		return false
	}
	return ca == cb || strings.HasPrefix(ca, cb+"/") || strings.HasPrefix(cb, ca+"/")
}

// SplitLocation splits a canonical location (Registry.Parse) into its scheme, bucket and
// prefix ("" for the whole bucket).
func SplitLocation(loc string) (scheme, bucket, prefix string) {
	scheme, rest, _ := strings.Cut(loc, "://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	return scheme, bucket, prefix
}

// JoinLocation is the inverse of SplitLocation.
func JoinLocation(scheme, bucket, prefix string) string {
	if prefix == "" {
		return scheme + "://" + bucket
	}
	return scheme + "://" + bucket + "/" + prefix
}
