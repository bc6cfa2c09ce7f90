// Package idx reads MNIST-family datasets stored as IDX files (MNIST, Fashion-MNIST,
// Kuzushiji-MNIST, EMNIST), compressed with gzip or not.
//
// # Format
//
// An IDX file starts with a 4-byte magic number: two zero bytes, an element type code
// (0x08 ubyte, 0x09 byte, 0x0B short, 0x0C int, 0x0D float, 0x0E double) and the number of
// dimensions; then each dimension as a big-endian uint32; then the elements, big-endian, in
// row-major order. Gzip compression is detected by its magic bytes, not by the file name.
//
// The images file must hold ubyte elements of shape [N, H, W] (or [N, H, W, C] with C 1 or 3);
// the labels file must hold N integers (ubyte, byte, short or int; float labels are refused)
// of shape [N]. Each image becomes a transforms.Image of W×H×C (C is 1 for MNIST), so the
// packed sample is [H, W, 1] uint8 in HWC layout: the bytes are copied unchanged.
//
// # Files
//
// [Open] takes a folder and a split. For "train" it looks for train-images-idx3-ubyte, for
// "test" for t10k-images-idx3-ubyte or test-images-idx3-ubyte; a name may carry a prefix
// ("emnist-digits-train-images-idx3-ubyte"), ".gz", or dots for dashes
// ("train-images.idx3-ubyte"). When both the compressed and the uncompressed file are there,
// the uncompressed one is read, once both are checked to hold the same data: a stale extraction
// beside a newer download is refused, naming both files (so is a labels file and its twin).
// Several different candidates are an error asking for an explicit file. The labels file is the images file's name with "images-idx3" replaced by
// "labels-idx1". [Open] also takes an images file directly, and [OpenFiles] an explicit pair.
//
// # Class names
//
// IDX files carry no class names. A class list given to [Open] wins. Otherwise, when the
// images file's absolute path contains "fashion" (any case), as Debian's
// /usr/share/datasets/fashion-mnist does, and every label is 0..9, the names are
// Fashion-MNIST's [FashionClasses]; this is a heuristic on the path, so a Fashion-MNIST copy
// stored elsewhere gets digit names unless the names are given. Otherwise the names are the
// label values "0", "1", …, up to the largest label found (at least "0".."9", at most
// [MaxClasses] names). Where the names came from is recorded in the manifest's source spec
// ("classes_from").
//
// # Streaming and limits
//
// Enumerate reads the two files side by side, one record at a time, through buffered
// readers; memory does not depend on the file size. [Open] reads the labels file once to
// check it (it is small: one element per image) and to find the label range. Every header
// value is checked before it is used: at most [MaxDims] dimensions, at most [MaxCount] images,
// at most [MaxImageBytes] per image, equal image and label counts. An uncompressed file's size
// must match its header exactly; a compressed file must end exactly after its last record.
//
// # Errors
//
// Malformed files are errors from [Open] or Enumerate that stop the build and name the file
// (and the record, for truncation). A label outside the class list is a bad input: Decode
// returns a *source.InputError naming "file#record" and wrapping [ErrLabel]. Symbolic links
// to the files are followed (a folder of links to the .gz files is found like the files); a
// FIFO or device where a file should be is refused without being opened. Class names given as
// an option are escaped with fsentry.Name and must be distinct.
//
// # Concurrency
//
// Enumerate must be called from one goroutine at a time. Decode is safe for concurrent use.
package idx
