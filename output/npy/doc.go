// Package npy writes packed datasets as NumPy .npy files and reads and checks them.
//
// # Format
//
// A dataset directory holds images.npy ([N, ...sample shape], dtype |u1, <f2 or <f4),
// labels.npy ([N], <i8), one aux_<name>.npy ([N], <i8) per auxiliary label column (for example
// aux_coarse_label.npy for CIFAR-100), and, when records carry metadata, meta.jsonl (one JSON
// value per line, in record order, "null" for a record without metadata). A dataset with fields
// (shard.Field, the manifest's "fields") has, after those, per field in schema order: for a
// fixed-size field (a fixed ndarray; an image field such as a mask, at the sample's height and
// width) NAME.npy of shape [N, ...shape] and the field's dtype; for a variable one (an ndarray
// with a -1 first dimension, text, bytes, json) NAME.values.npy, the records' values concatenated
// ([total rows, ...shape[1:]] of an ndarray, the uint8 bytes of the others), and NAME.offsets.npy
// (int64, N+1 entries: record i's values are rows offsets[i] to offsets[i+1], counted in rows for
// an ndarray and in bytes otherwise; offsets[0] is 0). Class names, the sample spec and the
// schema live in manifest.json.
// Every .npy file is format version 1.0: the magic
// "\x93NUMPY", version 1 0, a little-endian uint16 header length, and a header dictionary
// {'descr': ..., 'fortran_order': False, 'shape': (...), } padded with spaces and a newline so
// the data starts at a multiple of 64 bytes, as NumPy writes it. numpy.load(path,
// mmap_mode="r") maps the files directly.
//
// # Writing
//
// N is not known while records stream in, so the writer reserves the header size that the
// largest possible N (19 digits) would need and rewrites the header in place at Close, padded to
// the same size. The header size depends only on the dtype and sample shape, so outputs are
// byte-identical for identical inputs. Files are written under ".tmp" names, synced, read back
// once (to check the header just written and compute the SHA-256, which covers the final
// header and so cannot be computed while streaming), renamed, and the directory is synced.
//
// # Reading and checking
//
// [ReadHeader] parses a header with a strict parser for the literal subset NumPy writes, never
// evaluating anything, and checks every length before allocating ([MaxHeaderLen], [MaxDims]).
// [Check] checks a dataset's structure against its manifest for packer verify and reports
// every fault. Records are read by the shard package (shard.OpenDataset reads images.npy as
// one shard holding every record, with its labels, aux columns and metadata): the one Go npy
// reader, which inspect and preview reach through [Entry]'s Open and bench and trainers
// directly.
//
// # Concurrency
//
// A [Writer] is used from one goroutine.
package npy
