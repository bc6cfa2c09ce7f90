// Package hdf5 writes packer datasets as one HDF5 file (--format hdf5) and checks and reads them
// back, through gonum.org/v1/hdf5 and libhdf5 (Debian: libhdf5-dev), plus a small cgo shim for
// what the binding lacks (H5Dset_extent, object time tracking, library version bounds, a float16
// type, variable-length strings, per-thread error silencing).
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
// and these scalar variable-length UTF-8 string attributes on the root group: "format"
// (FormatName), "classes" (JSON array of class names), "sample" (JSON sample spec), "label"
// (JSON label spec) and "spec" (JSON dataset description: source and transform spec).
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
// Samples must have a fixed shape. Per-record metadata must not contain NUL bytes. libhdf5 is a
// large C library parsing an intricate format: Check reports the damage it meets in a file as
// errors, but a maliciously crafted file may still crash libhdf5 itself; the file's SHA-256 in
// the manifest is the integrity check that does not depend on it.
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
