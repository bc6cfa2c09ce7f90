// Package source is the source contract: what the build engine asks of a source (the Source
// interface with its Item, Clip and SourceInfo, and the optional DirectSource and
// PlannedSource: types.go), the Options every source is opened with, the Entry by which a
// source kind registers itself with the command (its name, how detection recognizes it, how it
// opens), and Detect, which tells a source's kind by asking every entry's own Sniffer. It is the
// twin of package output, the contract of the output formats: the engine (pipeline) imports
// both, and no source or output format imports the engine.
//
// Each source kind is a package under this one (source/imagedir, source/cifar, source/idx,
// source/video, source/webdataset, source/tfrecord, source/parquet) that exports its entries;
// what several kinds share lives under source/internal (fsentry: the checks and lossless names
// of file entries; memdecode: decoding images held in memory). The command lists the entries in
// one table (cmd/packer/sources.go), in the order detection breaks ties; nothing registers
// itself at init. Because detection uses the very extension lists and names the sources open
// with, a kind Detect returns is one whose source accepts what detection saw.
//
// The property tests of this package (property_test.go, property_records_test.go) drive every
// source kind through the real build and check what it packs against a reference reading of
// the same files.
package source

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// Options are what the command hands every source's Open. A source reads the fields that
// apply to it; Entry.Classes says whether --classes applies. The transform is not among them:
// the engine hands it to the source once it has validated it (PlannedSource).
type Options struct {
	Split      string        // "train" or "test" (CIFAR, IDX); "" means train
	Classes    []string      // class names of IDX files and integer-labelled lists (--classes)
	ExifOrient bool          // apply EXIF orientation to images and frame images
	MaxPixels  int64         // decoded-image pixel cap; 0 is the default, negative disables it
	ClipLen    int           // frames per record (frames, video); 0 = one record per frame
	ClipStride int           // frames between clip starts (frames, video); 0 = ClipLen
	Short      string        // policy for videos shorter than a clip (frames, video)
	FPS        float64       // resample video timelines to this rate; 0 keeps every frame
	Timeout    time.Duration // ffprobe/ffmpeg wait bound (video); 0 = the default
	ImageKey   string        // the feature (tfrecord) or column (parquet) holding the image; "" = the default
	LabelKey   string        // the feature (tfrecord) or column (parquet) holding the label; "" = the default
	Fields     []string      // further members, columns or keys to carry as fields (--fields)
	Images     string        // the folder holding a COCO annotation file's images (--images); "" = the file's folder
	Masks      string        // the folder holding the masks of a pairs source (--masks)
	// Files, when set, serves the bytes of the inputs below the source's path (and below
	// Images and Masks): the path is then a view of an object store's listing (cmd/packer's
	// streamed s3:// sources), held in memory, whose files and folders a Lister Files answers
	// for (Stat, ReadDir: the objects' names, sizes and times), or made on disk as files that
	// hold no data. Only the kinds whose Entry sets Streams read through it; those that set
	// Lists walk the view through Stat and ReadDir, as they walk a local folder.
	Files Files
}

// Files serves the content of a view's files (Options.Files).
type Files interface {
	// Open opens the file at path (a file of the view, or an object's URL that a plan
	// recorded) for one sequential read, and returns its size. st, when not nil, is what a plan
	// recorded of it: a read of an object that is no longer the one planned fails (its ETag).
	// Errors wrap ErrFetch.
	Open(ctx context.Context, path string, st *Stamp) (io.ReadCloser, int64, error)
	// OpenAt opens the file at path for reads at any offset (ranged reads of an object,
	// pinned to its ETag as Open's), and returns its size. Errors, the reads' too, wrap
	// ErrFetch.
	OpenAt(ctx context.Context, path string, st *Stamp) (ReadAtCloser, int64, error)
}

// ReadAtCloser is a file opened by Files.OpenAt.
type ReadAtCloser interface {
	io.ReaderAt
	io.Closer
}

// OpenInput opens the input file at path for one sequential read: through files where it is
// set (path is then a file of an object store's view: Options.Files), else with open.
func OpenInput(ctx context.Context, files Files, path string, open func(string) (*os.File, error)) (io.ReadCloser, error) {
	if files != nil {
		r, _, err := files.Open(ctx, path, nil)
		return r, err
	}
	return open(path)
}

// ErrFetch is wrapped by the errors of reads through Options.Files: the store failed, or an
// object changed since it was listed or planned. The build stops on it whatever --on-error
// says: it says nothing about the input.
var ErrFetch = errors.New("reading the source's store failed")

// Entry is what a source package exports for the command's table of source kinds.
type Entry struct {
	// Kind is the --from name and the manifest's source kind.
	Kind string
	// Help says what detection looks for, for Detect's error when nothing matches.
	Help string
	// Classes is set when --classes applies to the kind (its class names do not come from
	// the data).
	Classes bool
	// Sniff is how Detect recognizes the kind.
	Sniff Sniffer
	// Open opens a source of this kind at path.
	Open func(path string, o Options) (Source, error)
	// Replay, when set, opens a source of this kind at path only to decode the inputs a plan
	// file lists (pipeline.FromPlan: their Item.Path, Label and Aux), without listing the
	// source: what Open checks by walking it is not checked again, and Enumerate fails.
	// classes are the plan's class names. It is nil for kinds whose enumerator reads the
	// inputs' bytes (Item.Raw, Item.Note): their plan holds only the listing's count and
	// digest, and their parts list the source themselves, checked against it.
	Replay func(path string, o Options, classes []string) (Source, error)
	// NoShuffle, when not empty, says why a build of this kind refuses --shuffle (a build-time
	// permutation of the inputs, which lists them all before it writes any): its enumerator
	// reads every input's bytes from a stream as it lists it, so no input can be set aside
	// cheaply and fetched again later.
	NoShuffle string
	// Streams is set for kinds that read every input's bytes through Options.Files when it is
	// set (every kind packer lists: image folders and lists, WebDataset, TFRecord, Parquet,
	// COCO, pairs, frames, video, CIFAR, IDX): an s3:// source of such a kind is read from a
	// view of its listing, each input fetched when it is read, never copied whole.
	Streams bool
	// Lists is set for kinds whose open and listing walk the source's folders through
	// Options.Files where it is a Lister (Stat, ReadDir, fsentry.CheckIn), never the file
	// system itself (every kind packer lists): their view is held in memory, with no file
	// made per object. Another streamed kind's view would be made on disk as sparse files
	// first (storage.View.Sparse).
	Lists bool
}

// Sniffer is how Detect recognizes one source kind. Every field is optional; Detect asks
// them stage by stage (see Detect) and a kind matches when any of its fields does.
type Sniffer struct {
	// Top matches a name (lower case) directly inside a source folder: a file when dir is
	// false, a folder when true. A match makes the folder this kind.
	Top func(lower string, dir bool) bool
	// Confirm, when set, is asked about a folder that Top made this kind: an error says why the
	// folder only looks like this kind (Detect then refuses it, wrapping ErrUnknown).
	Confirm func(dir string) error
	// ClassExts are the extensions (with the dot, matched in any case) of the files a class folder of
	// this kind holds (SRC/class/file). The kind whose files are most numerous in a class
	// folder wins it; a tie goes to the entry listed first.
	ClassExts []string
	// NestedExts are the extensions of the files a class folder's subfolders hold
	// (SRC/class/item/file), asked only of class folders no ClassExts matched.
	NestedExts []string
	// FileExts are the extensions (any case) of a single file of this kind.
	FileExts []string
	// File matches a single file by its name (lower case, without its folder).
	File func(lower string) bool
	// Content matches the first bytes of a single file, or of its gzip-decompressed content.
	Content func(head []byte) bool
	// Member matches the name (lower case) of a tar archive's member, among its first ones.
	Member func(lower string) bool
	// Size matches a single file of no recognized name or content by its name and size.
	Size func(lower string, size int64) bool
}
