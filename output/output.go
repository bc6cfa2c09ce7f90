// Package output is the contract between the build engine and the output formats: the Record
// the engine hands over, the Output that writes records, the Config an Output is created from,
// and the Entry by which an output format registers itself with the command.
//
// It is a package of its own, importing only shard and the standard library, so that an output
// format (a package under this one: output/shards, output/npy, output/hdf5) implements the
// contract without importing the engine: the reader halves of npy and hdf5 would otherwise pull
// in pipeline, and through it the transforms and cgo. It is the twin of package source, the
// contract of the source kinds. pipeline uses the contract; the command lists the entries (one
// table, cmd/packer/outputs.go) and hands the chosen one to the build; nothing registers itself
// at init.
package output

import (
	"errors"
	"fmt"
	"time"

	"github.com/packer-dev/packer/shard"
)

// Record is one output record, ready to be written. An Output must not keep Data after Write
// returns: the buffer is reused.
type Record struct {
	Data  []byte
	Label int64
	Aux   []int64
	Meta  []byte
	// Shape is the record's own shape when the dataset's sample shape varies (a -1 dimension);
	// nil for a fixed-size dataset.
	Shape []int
	// Fields are the record's values of Config.Fields, in that order, after the transform
	// (masks resized and cropped, boxes mapped): raw little-endian bytes, one slice per field.
	Fields [][]byte
	// Input is the position, in the source order, of the input the record comes from (a part's
	// inputs included: the whole source's order). Only an output with Config.CutInputs uses it.
	Input int64
}

// An Output writes records to one output format. Write is called from one goroutine, in record
// order. Close finishes every file (synced, under its final name) and returns the entries for the
// manifest; Abort removes whatever was written. Format names the format and its version for the
// manifest's format and format_version.
type Output interface {
	Write(r Record) error
	Close() ([]shard.FileEntry, error)
	Abort()
	Format() (name string, version int)
}

// Config is what every output format is created from.
type Config struct {
	Dir       string           // directory the files go into (a staging directory)
	Sample    shard.SampleSpec // record spec
	Label     shard.LabelSpec  // label spec
	Classes   []string         // class names
	HasMeta   bool             // records carry metadata
	ShardSize int64            // byte budget per shard (shards only)
	Meta      map[string]any   // dataset description stored in each file (source and transform spec)

	// ChecksumBlock is the byte size aimed for per checksum block (shards only); 0: the
	// format's default, shard.BlockTarget.
	ChecksumBlock int64
	// Fields is the sample schema beyond the sample and labels (shard.Field); empty for an
	// image-only dataset, which is written exactly as before. An output that cannot hold a
	// field refuses the build in Entry.CheckFields, before anything is decoded.
	Fields []shard.Field
	// CutInputs, when > 0, makes the shards output start a new shard at every CutInputs-th
	// input of the source order (Record.Input), besides the byte budget, and write version-4
	// shards that name their chunk and piece instead of their position (FORMAT.md "Dataset"):
	// the shards of a part that starts at a multiple of CutInputs are the whole build's. Other
	// formats refuse it (the command).
	CutInputs int64
	// Store, when set, takes the output's files as they are finished, for a dataset that is
	// not kept in Dir (an object-store OUT: each shard is uploaded while the next one is
	// written, and its local copy removed). nil: the files stay in Dir. Only an output that
	// writes its files one after another uses it (shards); the others leave their files in Dir.
	Store FileStore
}

// A FileStore takes the finished files of an output (Config.Store). Its methods may be called
// from several goroutines at once.
type FileStore interface {
	// Put stores the file fe, complete in dir (synced, under its final name, its SHA-256 in
	// fe), and removes it from dir. It returns when the file is stored for good.
	Put(dir string, fe shard.FileEntry) error
	// Keep is a resumed build's check of the files its checkpoint kept: the store holds each
	// of them whole, as Put stored it, or Keep fails naming it (the resume is then refused,
	// or the build started over: Keep's error says which); every other file of this build the
	// store holds (put after the checkpoint) is removed.
	Keep(files []shard.FileEntry) error
}

// Entry is what an output format package exports for the command's table of formats.
type Entry struct {
	// Name is the --format name and the manifest's format (one of shard's Format* names).
	Name string
	// New creates the format's Output.
	New func(cfg Config) (Output, error)
	// Check checks the structure of a dataset of this format against its manifest, for verify
	// (verify.FormatChecker); nil when verify's own checks of the files cover the format.
	Check func(dir string, m *shard.Manifest) []error
	// FixedShape is set when the format stores only records of one fixed sample shape.
	FixedShape bool
	// Version is the manifest's format_version of a dataset of sample spec spec.
	Version func(spec shard.SampleSpec) int
	// Resume, when set, reopens an interrupted build's output from the state its last
	// checkpoint recorded (see Checkpointer), after checking that what the state names is
	// exactly what was written (a resume refused otherwise, naming the file): what the state
	// names is kept, everything else in cfg.Dir but the engine's files (EngineFilePrefix) is
	// removed, and the next Write continues after the last checkpointed record. nil: the
	// format cannot resume (a resumed build starts it anew).
	Resume func(cfg Config, state []byte) (Output, error)
	// CutState, when set (with Resume), is a checkpoint's state cut to the files that hold
	// exactly its first records records (an error where no file ends there): the state of the
	// earlier checkpoint taken when those records were written, so that a resume whose kept
	// files are damaged from some point on goes on from before it.
	CutState func(state []byte, records int64) ([]byte, error)
	// Open is the format's reader half: it opens the dataset of this format that fsys holds
	// (its manifest m already read; loc is the dataset's location, for messages) for random
	// access, as packer inspect and preview read it. nil: the format cannot be opened so.
	Open func(loc string, fsys shard.FS, m *shard.Manifest) (Dataset, error)
	// FieldCheck refuses a field of the schema (Config.Fields) the format cannot hold, saying
	// why; CheckFields calls it for each field after the checks every format shares. nil: the
	// format holds no fields.
	FieldCheck func(f shard.Field) error
}

// Dataset is random access to the records of a dataset of any format, what Entry.Open returns.
// Records are numbered from 0 in record order. A Dataset is safe for concurrent use.
type Dataset interface {
	Manifest() *shard.Manifest
	Len() int64
	// Record returns a new slice holding the bytes of record i's sample (not its fields).
	Record(i int64) ([]byte, error)
	// RecordShape returns record i's own shape (the sample shape for fixed-size records).
	RecordShape(i int64) ([]int, error)
	// Info returns record i's label, auxiliary labels and metadata.
	Info(i int64) (RecordInfo, error)
	// Fields returns record i's values of the manifest's fields (shard.Manifest.Fields), in
	// schema order, as raw little-endian bytes (new slices); nil for a dataset without fields.
	Fields(i int64) ([][]byte, error)
	Close() error
}

// RecordInfo is what a record carries beside its bytes.
type RecordInfo struct {
	Label int64
	Aux   []int64 // nil where the format's reader gives none
	Meta  []byte  // the record's metadata (one JSON value); nil when it has none
}

// OpenShardDataset opens, with shard.OpenDatasetFS, a dataset that the shard package reads
// (--format shards, and npy: shard reads its one images.npy array as one shard): the reader
// half of those formats' entries.
func OpenShardDataset(loc string, fsys shard.FS, m *shard.Manifest) (Dataset, error) {
	d, err := shard.OpenDatasetFS(fsys, shard.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	return shardDataset{d, len(d.Fields()) > 0}, nil
}

// shardDataset is a shard.Dataset as a Dataset.
type shardDataset struct {
	*shard.Dataset
	fields bool // the records carry fields
}

func (d shardDataset) Info(i int64) (RecordInfo, error) {
	if i < 0 || i >= d.Len() {
		return RecordInfo{}, fmt.Errorf("record %d out of range [0, %d)", i, d.Len())
	}
	s, j := d.Locate(i)
	r, err := d.Shard(s)
	if err != nil {
		return RecordInfo{}, err
	}
	return RecordInfo{Label: r.Label(j), Aux: r.Aux(j), Meta: r.RecordMeta(j)}, nil
}

// Record gives the sample's bytes: in a dataset with fields a shard record holds the field
// values after them (FORMAT.md, "Fields"), which Fields gives.
func (d shardDataset) Record(i int64) ([]byte, error) {
	if !d.fields {
		return d.Dataset.Record(i)
	}
	sample, _, err := d.RecordFields(i)
	return sample, err
}

// Fields gives record i's field values (shard.Dataset.RecordFields); nil for a dataset without
// fields (an npy dataset's are in files of their own, which output/npy reads).
func (d shardDataset) Fields(i int64) ([][]byte, error) {
	if !d.fields {
		if i < 0 || i >= d.Len() {
			return nil, fmt.Errorf("record %d out of range [0, %d)", i, d.Len())
		}
		return nil, nil
	}
	_, fields, err := d.RecordFields(i)
	return fields, err
}

// EngineFilePrefix starts the name of every file the build engine itself keeps in an output's
// folder while it builds (the resume journal); an output's files never start with it.
const EngineFilePrefix = "packer-"

// Checkpointer is implemented by an Output whose Entry has Resume. SetCheckpoint registers fn,
// which the output calls from Write, before it writes that record, when everything written
// before the record is durable in files the output will not change again (for the shards
// format: when a shard is complete, synced and renamed), at most once per interval every (0:
// whenever it can). state describes those files for Entry.Resume; fn records it, with the
// caller's own state at that record, durably (a journal) before it returns. An error from fn
// fails the Write.
type Checkpointer interface {
	SetCheckpoint(every time.Duration, fn func(state []byte) error)
}

// ErrShapeNotFixed is returned for a fixed-shape format (Entry.FixedShape) when the records'
// shape is not fixed.
var ErrShapeNotFixed = errors.New("records have no fixed shape")

// CheckSpec refuses a fixed-shape format for a spec whose shape varies, naming the flags that
// fix it and the formats that store records of varying shape.
func (e Entry) CheckSpec(spec shard.SampleSpec) error {
	if !e.FixedShape || spec.Fixed() {
		return nil
	}
	return fmt.Errorf("--format %s: %w: the sample shape is %v (height and width vary from image to image); "+
		"give --crop N or --size WxH for one fixed size, or use --format %s, which stores every image at its own size",
		e.Name, ErrShapeNotFixed, spec.Shape, shard.FormatShards)
}
