// Package fileutil holds packer's durable-file plumbing for writers: the one create-and-commit
// of a written file (Create, Pending.Commit, CommitFile, WriteFileAtomic: a temporary name,
// fsync, rename) with the directory fsync (SyncDir), and the one O_DIRECT open of a file a
// writer (or packer bench) opens, with its fallback where the file system refuses O_DIRECT
// (OpenDirect, DirectUnsupported, ClearDirect).
//
// It imports only the standard library and no packer package, so every writer can use it: the
// outputs, pipeline, storage and its backends, the command. It is internal because it is no
// part of the reader API: the shard package, which trainers embed, reads (with its own O_DIRECT
// open for reads) and exports no fsync helpers. cmd/packer's TestOneDurableCommit checks that
// no other file syncs, renames or opens with O_DIRECT by itself (shard's read open aside).
//
// # Concurrency
//
// A Pending is not safe for concurrent use; the functions are.
package fileutil
