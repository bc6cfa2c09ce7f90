// Package shard reads and writes packer shard files and dataset manifests.
//
// A packed dataset is a directory of shard files (shard-NNNNN.pks) and a manifest.json that
// lists them. Each shard stores its records raw and back to back, so a batch of consecutive
// fixed-size records is one contiguous byte range that can be read straight into a [B, ...]
// array; labels, aux labels, per-record metadata and checksums live apart from the records, in
// an index at the end of the file.
//
// # Format
//
// The bytes of a shard are specified in FORMAT.md, beside this file; the constants in format.go
// are checked against it by the tests. The order in which a dataset's records are read is
// specified in ORDER.md. Version 2, the default (a keyed permutation of all records, global
// batches split among ranks, a LoaderState to resume on any number of ranks), is implemented
// by Permutation, NewPlanV2 and EpochOrderV2; version 1 (shard shuffle, rank split, shuffle
// buffer) by EpochOrder. testdata/order_v2_vectors.json and testdata/order_vectors.json hold
// golden sequences that every reader must reproduce.
//
// # Weighted mixtures
//
// A Mixture reads several datasets as one weighted stream (ORDER.md "Mixtures"; Python's
// packer_reader.mix reads the same order, testdata/mix_vectors.json holds golden sequences):
// NewMixture takes each dataset's record count and MixOptions (weights, seed, epoch size, with
// or without replacement); Mixture.Order gives one rank's (source, record) pairs of an epoch
// under ORDER.md v2's batching; NewMixLoader reads them from the datasets in batches of record
// bytes, labels and sources (records of different shapes are the caller's to batch). The source
// of each position is a stratified choice: every batch of every rank holds each source's share
// of records within less than Mixture.Depth of it. Mixture.State and Mixture.Restore carry every
// source's cursor; a state restores on any number of ranks. Mixture.Summary is what
// `packer mix-plan` prints.
//
// # Variable-size records
//
// A sample shape with -1 dimensions (images of any height and width: [-1, -1, 3]) gives
// variable-size records. The Writer stores each record's shape in the index (format version
// 2, FlagShapes; Writer.AppendShape), and Reader.RecordShape, Dataset.RecordShape and the
// Loader's Batch.Shape return each record at its own shape. Fixed-size shards are written as
// version 1, byte for byte as before; version-1 variable-size shards remain readable (with one
// -1 dimension the shape follows from the size; with more it is unknown, ErrShapeUnknown).
// Records are never padded: a batch of variable-size records is their bytes back to back with
// Batch.Offsets and Batch.Dims.
//
// Writing: NewWriter streams one shard to any io.Writer (Append* Close). Committing a written
// file durably (temporary name, fsync, rename, directory fsync) is the writers' business, not
// this package's: packer's outputs do it through the module's internal/fileutil. FormatShards
// and FormatNPY are the names of the two output formats this package reads.
//
// Reading: Open or NewReader give random access to one shard (Record, ReadRecords, Label, Aux,
// RecordMeta, DataRange). OpenDataset opens a directory through its manifest, with random
// access across shards and Dataset.NewLoader, a streaming batch loader for training: one
// prefetching goroutine, a ring of reusable page-aligned (optionally mlocked, or caller
// allocated, see Allocator) buffers, large sequential reads (optionally O_DIRECT), batches
// handed out as views into the buffers. OpenDataset also opens a --format npy dataset (a
// fixed-size images.npy read as one shard holding every record; see Dataset and npy.go): this
// is packer's one Go npy reader, which packer inspect and preview use too.
//
// Storage: the path-taking functions read the local file system. OpenDatasetFS, ReadManifestFS
// and OpenFS read through an FS instead (Open returning an io.ReaderAt with a Size), which the
// storage package implements over its backends (storage.ShardFS); this package never imports
// storage. DirFS is the local FS: over it ScanFile reads by path, and a Dataset holds its
// directory open (os.Root) and opens the manifest and every shard in it, the Loader's own
// O_DIRECT descriptors included, so that a dataset replaced while it is read (packer build
// --force) is never mixed with the new one: its own records are served, or an error. After
// every read of a local file the readers check that its size and modification time are those
// seen at open, so a file written over in place (cp, rsync --inplace) is an error too, though
// its blocks were checked before.
//
// Identity: a Dataset checks each shard when it first opens it, before any of its records is
// served: the shard index in its header, its sample and label spec, the dataset description,
// its record count and file size against the manifest, and the SHA-256 of its index against
// the manifest entry's index_sha256 (FORMAT.md, "Dataset") where there is one; the index holds
// the block CRCs, so a shard of another build with the same names and options is refused.
//
// Checking: every shard carries CRC-32C checksums of its header, footer, index and of each
// block of records. Readers check the header, footer and index on open and, by default, each
// block before returning its records. Scan checks a whole shard at sequential-read speed and
// reports every fault with the file, the record range and the offset. It reads the file once, in
// order from the first byte to the last (after one small read of the footer), in large chunks
// on a reader goroutine; ScanFile can read with O_DIRECT, and ScanOptions.Hash receives every
// byte as it is checked, so a file's SHA-256 costs no second read. StreamFile is the same
// reader and hash for files that are not shards. Errors for bad bytes
// are *CorruptionError values wrapping one of ErrMagic, ErrVersion, ErrChecksum, ErrTooLarge,
// ErrTruncated, ErrPadding or ErrFormat; no input makes this package panic.
//
// # Concurrency
//
// A Writer and a Loader are not safe for concurrent use: each must be used from
// one goroutine at a time. A Reader and a Dataset are safe for concurrent use (their reads are
// positioned reads). Scan may run concurrently on different files.
//
// A Loader's Batch (its Data, Offsets, Dims, Labels, Aux and Indices) is a view into the Loader's
// ring and is valid until the next call to Next or Close; copy whatever must live longer. The
// Loader's own goroutine fills the other buffers of the ring meanwhile, never the one handed
// out. Close stops that goroutine and frees the buffers; it must be called.
//
// # Limits
//
// Every length read from a file is checked against the limits of FORMAT.md (MaxMetaLen,
// MaxRecords, MaxRecordSize, MaxAux) and against the file size before memory is allocated
// for it, so a damaged or hostile file cannot make a reader allocate more than about its own
// size. A Reader keeps its shard's index in memory (8 bytes per record for labels, more with
// aux columns, variable sizes or metadata); a Loader holds Prefetch buffers of about ReadSize
// bytes each (at least one batch), plus this rank's record numbers (8 bytes per record) when
// shuffling or under reading order 2 (the default), and under order 1 the shuffle buffer.
//
// This package uses the standard library only, so trainers can embed it without cgo.
// It is a module of its own, github.com/packer-dev/packer/shard, whose go.mod states the oldest
// Go it builds with (go 1.24), tagged shard/vX.Y.Z with each packer release vX.Y.Z.
package shard
