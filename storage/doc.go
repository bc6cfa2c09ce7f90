// Package storage is the seam between packer and the place a dataset's files live. A Backend
// is what the readers, verify and (later) the writers do with files: list them, stat one,
// open one for ranged reads, create one that becomes visible under its name only when
// committed, and remove one. Local is the first implementation: a directory of the local
// file system; storage/s3 (which this package does not import) is the second: the objects
// below a prefix of an S3 bucket.
//
// Names are slash-separated, relative to the backend's root, and valid in the sense of
// io/fs.ValidPath once cleaned by path.Clean ("a/b.pks", never "../x" or "/x"). A missing
// file is reported by an error that matches fs.ErrNotExist. Every method takes a context,
// since a remote backend's calls are network requests; Local only checks it before it starts
// (and List between files).
//
// A dataset is published, not written in place: a build writes into a Stage and publishes it
// at the end, so that a reader of the dataset's name sees the old dataset or the new one,
// never a half-written one. On the local file system (LocalStage) that is a staging directory
// beside OUT and an atomic exchange of the two directory names (renameat2 with
// RENAME_EXCHANGE, or two renames with a recovery step where the file system lacks it), under
// a lock file the caller holds (OpenLockFile, TryLock).
//
// # Locations
//
// A location is a local path or SCHEME://BUCKET/PREFIX. A Registry maps each scheme to the
// Location its store's package exports (storage/s3: s3.Location): Parse checks a location,
// Open returns the store's Remote, a Backend that also stages a dataset for upload
// (UploadStage: built in a local folder, uploaded by Publish) and downloads a copy of a
// location for the commands that read local files. The commands open every location through
// one registry, so that adding a store is its package plus one line in that table.
//
// # An object store as a Backend
//
// The seam is shaped so that an object store (S3 and its kin) implements it without renames,
// which an object store does not have:
//
//   - List: a paginated prefix listing (ListObjectsV2 with the root as prefix); Stat: a HEAD
//     request for the object's size.
//   - Open: a HEAD for the size, then io.ReaderAt as ranged GETs ("Range: bytes=a-b"); Close
//     releases nothing but pooled connections. The context given to Open (or bound by
//     ShardFS) carries every ranged read of the file.
//   - Create: a Writer that buffers parts and sends them as a multipart upload; Commit
//     completes the upload, which is the moment the object appears under its name, whole;
//     Abort aborts the upload, so no partial object is ever visible. A conditional write
//     (If-None-Match) refuses to overwrite where the caller asks for that.
//   - Remove: DELETE.
//   - Publishing a dataset: the data objects are uploaded first under the dataset's prefix
//     and the manifest last; a dataset exists exactly when its manifest does, so "commit"
//     is the manifest's upload, and a reader that finds no manifest sees no dataset.
//     Replacing a dataset writes under a fresh prefix and then the manifest that names it.
//
// The shard package does not import storage: it defines the small read interface it needs
// (shard.FS) and ShardFS adapts a Backend to it. storage imports only the standard library,
// shard and golang.org/x/sys (internal/archtest checks both rules).
package storage
