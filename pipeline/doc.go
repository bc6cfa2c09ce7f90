// Package pipeline is the build engine behind `packer build`: it takes a Source (the inputs of
// a dataset), a compiled transform (transforms.Compiled) and an Output (one output format), decodes and transforms the
// inputs in parallel, writes the records in source order, and commits the finished output
// directory atomically with its manifest last. It knows no source kind, output format or device
// by name; the command (cmd/packer) opens them and hands them in through Options.
// docs/architecture.md places the package among the others.
//
// # Sources
//
// The source contract is package source, as the output contract is package output: the engine
// imports both, and no source imports the engine. Options.Source is a source.Source, which has
// three methods. Info describes the dataset (kind, classes, auxiliary label
// columns, frames per record, the frame size when it is fixed, a spec recorded in the
// manifest). Enumerate is called once, from one goroutine, and calls emit with every input in
// source order, each a source.Item numbered from 0. Decode is called from many worker goroutines at
// once, one Item per call, and calls emit with each record the item yields (zero or more: an
// image yields one, a video one per clip); the Clip it emits may reuse the source's buffers
// after emit returns.
//
// An error from Enumerate fails the build. An error from Decode is the item's: the item is a
// bad input, listed in the manifest's skipped list with the error as its reason
// (--on-error skip, the default) or the build fails naming it (--on-error fail); a
// *source.InputError names the input. Records the item emitted before the error stay packed and the
// reason says how many, on the CPU path and with a BatchResizer alike (the bytes do not depend
// on the path). An error that says nothing about the input (out of descriptors or memory, a
// failing disk or file server) fails the build whatever --on-error says (ErrSystem), and a
// cancelled context stops the workers. An item that decodes without an error but yields no
// record is skipped with ErrNoRecords.
//
// Two optional interfaces let a source go faster without changing a byte. A DirectSource
// (CIFAR, IDX) decodes an item straight into the record buffer (DecodeTo) when the transform
// is the identity and no BatchResizer is set. A PlannedSource (image folders and lists, frame
// folders, videos) is handed the build's DecodePlan in one call, before anything else is asked
// of it: the transform, compiled once by the caller (transforms.Spec.Compile), from which it derives
// the reduced JPEG scale --fast allows and whether frames of different sizes share a clip; and
// whether to decode only the part of each image the transform reads (Windows), which Build
// asks when the CPU transforms the frames or the BatchResizer is a WindowResizer (the GPU's
// is: region decoding stays on the CPU, the device gets each window with its offset).
//
// # Outputs
//
// The output contract is package output. Options.Output is the chosen format's output.Entry;
// its New creates the Output from an output.Config (staging directory, sample and label spec,
// classes, shard byte budget, dataset description) when the first record is ready,
// or at the end for a build with no record. Write is called from one goroutine, in record
// order, and must not keep Record.Data after it returns: the buffer is reused. Close finishes
// every file (synced, under its final name in the staging directory) and returns the manifest's
// file entries, with sizes and SHA-256; Abort removes what was written; Format gives the
// manifest's format and format_version. The engine knows no format by name: output/shards,
// output/npy and output/hdf5 each export their Entry, and the command picks one.
//
// # Order and determinism
//
// The enumerator groups consecutive items into jobs and queues each job's result channel, in
// enumeration order, before a worker takes the job. The single writer reads the result
// channels in that queued order, and each worker sends a job's records and per-item done
// markers in item order, so records reach the Output in source order whichever worker finished
// first. Nothing host- or timing-dependent goes into the files: shards are cut by the byte
// budget alone, the skipped list is in source order, and the manifest holds no time or path of
// the machine. The output is therefore byte-identical for any Options.Workers, and with a
// BatchResizer (the GPU), which must give the bytes of transforms.Worker.Apply (the command
// uses a GPU only after a self-check against the CPU on that machine), except for an item
// whose Decode fails after emitting records (see Sources).
//
// # The record shape, decided up front
//
// DatasetSpec decides every record's shape, dtype and layout from the source's Info and the
// transform before anything is decoded, never from the first record: a crop or an exact size,
// or a source of one frame size, fixes height and width; otherwise they vary (-1) and the
// shard format stores each record's shape. Entry.CheckSpec refuses npy and HDF5 for a varying
// shape before anything is written (ErrShapeNotFixed). A record that does not fit the decided
// spec is an internal error that fails the build, never a dropped image.
//
// # Every input accounted for
//
// Before anything is committed the writer checks that every item Enumerate emitted came back
// from the workers and was packed or skipped exactly once: enumerated == done and
// packed + skipped == enumerated (ErrInputsUnaccounted otherwise, and nothing is committed).
// --max-errors bounds the skipped list (ErrTooManyErrors).
//
// # The output directory
//
// Build refuses, before it creates or removes anything, an OUT that is, contains or lies inside
// one of Options.Inputs (ErrOutputOverlap; enumerated Item.Path values are checked as they come)
// and an OUT that is a mount point (ErrOutputMount). It then takes an exclusive lock on
// OUT.packer-lock for the whole build (ErrOutputLocked names the holder's pid), restores or
// clears what an interrupted build left beside OUT, and refuses a non-empty OUT without Force
// (ErrOutputExists), and a part at OUT or its checkpoint beside it unless this build is the same
// part (ErrPartIdentity). Records are written into OUT.packer-partial. After the Output's Close the
// manifest is written there last (WriteManifest: sealed with its own SHA-256 by
// shard.Manifest.Marshal, through a synced temporary file and a rename), and the staging
// directory becomes OUT in one step, published through the storage seam (storage.LocalStage,
// which holds the renames; the lock file and device primitives are storage's too): a rename
// that never replaces anything for a new OUT, an atomic exchange of the two names (renameat2
// RENAME_EXCHANGE) to replace one, and where the filesystem cannot exchange, two renames
// through OUT.packer-old that the next build undoes if it was cut between them. The parent folder is synced after each rename. A reader therefore
// sees either the old dataset or the whole new one, never a mix.
//
// # Files, by role
//
//   - build.go: Options, Build and its up-front checks (the decode plan, the
//     record shape, the output directory), the builder and its goroutines.
//   - worker.go: jobs, decoding (Decode, DecodeTo), transforming on the CPU.
//   - batch.go: the BatchResizer path (a group of items transformed in one call).
//   - writer.go: source-order writing: the recordWriter (open, record, inputDone, skip,
//     checkpoint, finish): the skipped list, accounting, the journal's state, the manifest.
//   - commit.go and commit_*.go: overlap and mount checks, the lock, recovery, the exchange.
//   - part.go and merge.go: builds in parts (Options.Part: a contiguous slice of the one
//     enumeration, the listing digest) and Merge, which joins the parts into the bytes one
//     build writes; partid.go: what may replace a part at OUT or its checkpoint (only the
//     same part: ErrPartIdentity); mergelink.go: the merge of parts cut at fixed input
//     positions (Options.CutInputs), which links their shards into place.
//   - resume.go: checkpoints (a journal in the staging folder, taken when the output says its
//     records are durable: output.Checkpointer) and Options.Resume, which goes on from one.
package pipeline
