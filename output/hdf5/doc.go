// Package hdf5 writes packer datasets as one HDF5 file (--format hdf5) and checks and reads them
// back, through libhdf5's C API, called from a small cgo shim (shim.c): files, datasets, types,
// property lists, plus dataset extension (H5Dset_extent), object time tracking, library version
// bounds, a float16 type, variable-length strings and sequences and per-thread error silencing.
//
// # Loading libhdf5
//
// libhdf5 is not linked. The shim opens it with dlopen the first time the package touches an
// HDF5 file (Load), and resolves each function it calls, and the predefined type and property
// list class globals (H5T_C_S1_g, ...), with dlsym after H5open. So the program starts, and every
// other format works, on a machine without libhdf5; --format hdf5, and verify, inspect or
// preview of an HDF5 dataset, then fail with ErrNoLibrary and the package to install (Debian 12:
// libhdf5-103-1). Load tries Debian's serial soname of HDF5 1.10 (libhdf5_serial.so.103), the
// plain libhdf5.so.103, the sonames of 1.14 and 1.12, then the unversioned names; PACKER_LIBHDF5
// names one library (a file name or a path) instead. Output bytes are pinned for 1.10 only (see
// Determinism).
//
// # Building
//
// cgo with a C compiler (gcc) and the HDF5 headers (1.10 or later), for the library's types
// only: on Debian and Ubuntu, `apt-get install gcc libhdf5-dev`; the #cgo lines point at
// /usr/include/hdf5/serial, or /usr/local/include elsewhere. No library is needed at link time.
// Without cgo the package still builds (nocgo.go), and every HDF5 operation fails with
// ErrNoLibrary saying the binary was built without cgo.
// libhdf5 opens files with best-effort file locking; on a file system without locks set
// HDF5_USE_FILE_LOCKING=FALSE.
//
// Load calls H5open and turns off the automatic error printing of the thread it runs on. That
// covers only that thread: Debian's libhdf5 is built thread-safe, with per-thread error stacks,
// so this package silences the stack again on the locked OS thread before each batch of calls,
// and libhdf5 never prints to stderr.
//
// # Format
//
// OUT/data.h5 holds, in this order of creation:
//
//	/images   [N, ...sample shape]  uint8 (H5T_STD_U8LE), float16 (IEEE binary16, little endian)
//	                                or float32 (H5T_IEEE_F32LE)
//	/labels   [N]                   int64 (H5T_STD_I64LE)
//	/aux/<n>  [N]                   int64, one per auxiliary label column, in manifest order
//	/meta     [N]                   variable-length UTF-8 strings (per-record metadata JSON),
//	                                only when the records carry metadata
//
//	/NAME     one dataset per field (shard.Field) of a dataset with fields, in schema order:
//	          [N, ...shape] of the dtype for a fixed-size one (a fixed ndarray; an image field
//	          such as a mask, at the sample's height and width), [N] variable-length sequences
//	          of the dtype for a variable ndarray (each record's rows flattened; int64 attribute
//	          "shape", the field's shape with -1 first), [N] sequences of uint8 for bytes, [N]
//	          variable-length UTF-8 strings for text and json; each with the string attribute
//	          "kind" (fields.go)
//
// and these scalar variable-length UTF-8 string attributes on the root group: "format"
// (FormatName), "classes" (JSON array of class names), "sample" (JSON sample spec), "label"
// (JSON label spec) and "spec" (JSON dataset description: source and transform spec), and, only
// in a dataset with fields, "fields" (the schema, JSON).
//
// HDF5 1.10 has no predefined half-precision type. float16 is stored as a copy of
// H5T_IEEE_F32LE reshaped with H5Tset_fields(15, 10, 5, 0, 10), H5Tset_size(2) and
// H5Tset_ebias(15): exactly the type h5py defines for numpy.float16, so h5py reads it as float16
// and the bytes are the record bytes unchanged.
//
// Every dataset is chunked along axis 0 only, its first axis unlimited, uncompressed. An
// /images chunk is max(1, ChunkBytes/record size) records, so a chunk is one contiguous run of
// whole records of about a training batch; int64 columns use 8192-row chunks (64 KiB) and /meta
// 4096-row chunks. The writer buffers one chunk per dataset and writes it as a single hyperslab,
// growing the dataset with H5Dset_extent. The unwritten tail of the last chunk is zero filled.
//
// # Determinism
//
// The same records give a byte-identical data.h5 with the same libhdf5 version: object time
// tracking is off for every dataset and group, object formats are pinned to the earliest that
// can hold each object and never newer than HDF5 1.8's (H5Fset_libver_bounds), attributes are
// compact JSON with sorted keys, and chunks are written in the same order every time (the writer
// splits by record count only). A different libhdf5 release may lay the file out differently.
//
// # Concurrency
//
// All calls into libhdf5 are serialised by one package-level mutex, each on a locked OS thread
// whose HDF5 error printing is turned off first. An Output is used from one goroutine; a Reader's
// methods may be called concurrently (they run one at a time).
//
// # Limits
//
// Samples must have a fixed shape (at most 1 GiB each). Per-record metadata must not contain NUL
// bytes, nor a text field's values (an HDF5 string ends at NUL: such a record fails the build,
// naming it). libhdf5 does not survive arbitrary damage: random bit flips in a small data.h5 made
// 1.10.8 crash with SIGSEGV or loop forever in 3 of 400 trials. Check therefore compares the
// file's size and SHA-256 with the manifest before libhdf5 sees it, and reports a damaged file
// without parsing it: it names the file and what differs (size, signature, SHA-256), not which
// records are damaged. Open checks only the size; a Reader on a damaged
// file can crash the process.
package hdf5

// Names inside and around data.h5. They are part of the output format.
const (
	DataFile   = "data.h5"
	FormatName = "packer-hdf5/1"
	ImagesName = "images"
	LabelsName = "labels"
	AuxGroup   = "aux"
	MetaName   = "meta"
)
