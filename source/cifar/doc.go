// Package cifar reads the CIFAR-10 and CIFAR-100 datasets in their official binary layout.
//
// # Format
//
// A CIFAR-10 batch file is a sequence of 3073-byte records: one label byte (0..9) followed by
// 3072 pixel bytes, the 1024 red values, then the 1024 green, then the 1024 blue values of a
// 32×32 image, each plane in row-major order. A CIFAR-100 file is a sequence of 3074-byte
// records: the coarse label (0..19), the fine label (0..99), then the same 3072 pixel bytes.
// There is no header, so a file's size must be a whole number of records.
//
// The training split of CIFAR-10 is data_batch_1.bin … data_batch_5.bin, the test split is
// test_batch.bin, and class names are the non-empty lines of batches.meta.txt. CIFAR-100 has
// train.bin and test.bin, with fine_label_names.txt and coarse_label_names.txt. Without a names
// file the class names are the decimal label values ("0", "1", …), since a CIFAR-format file
// made by someone else need not use the official classes.
//
// # Inputs
//
// [Open] accepts the extracted folder (cifar-10-batches-bin, cifar-100-binary), a folder
// containing it, the official .tar.gz archive (or a plain .tar), or a single .bin file. Records
// are emitted in file order (data_batch_1 … data_batch_5), then record order within a file.
//
// An archive is read as a stream. [Open] reads it once up to the point where every wanted
// member and names file has been seen, to check sizes and load class names. Enumerate then
// reads it again, in one pass when the members are stored in the wanted order; a member that
// comes before its turn (the official CIFAR-10 archive stores data_batch_2.bin last) is held
// in memory while it waits, up to [ArchiveBuffer] bytes in all, which covers the official
// archives. A member that does not fit waits for a further pass over the archive instead, so
// memory stays bounded and the order stays the file order whatever the member order.
//
// # Output
//
// Item.Raw is the 3072 stored pixel bytes (planes, as stored), Item.Label the (fine) label and,
// for CIFAR-100, Item.Aux is [coarse label] with SourceInfo.AuxNames ["coarse_label"]. Item
// names are "file#record", with the record counted from 0 within its file. Decode turns the
// planes into an interleaved 32×32×3 transforms.Image: a lossless permutation of the bytes.
//
// # Errors
//
// A file whose size is not a multiple of the record size, an empty batch file (0 bytes: it
// would contribute no record), a missing file, a FIFO or device where a file should be (never
// opened), or a damaged archive is an error from [Open] or Enumerate, naming the file, and stops
// the build. Class names are escaped with fsentry.Name (bytes that are not UTF-8 as \xHH, a
// backslash as \\); a names file that names one class twice is refused. A label byte out of range is a bad
// input: Decode returns a *source.InputError naming "file#record" and wrapping [ErrLabel], so
// the build skips or fails on it according to --on-error.
//
// # Concurrency
//
// Enumerate must be called from one goroutine at a time. Decode is safe for concurrent use.
package cifar
