// Package tfrecord is the source --from tfrecord: TFRecord files of tf.train.Example records,
// as TFDS and TF-slim keep ImageNet.
//
// # Layout
//
// The source is one TFRecord file or a folder of them (every non-hidden regular file whose name
// contains ".tfrecord" or "-of-", sorted by name; subfolders are not read). Compressed
// TFRecord files (GZIP, ZLIB) are not read.
//
// A TFRecord file is a sequence of records, each framed as: the data length (uint64, little
// endian), the masked CRC-32C of those 8 bytes (uint32), the data, the masked CRC-32C of the data
// (uint32), where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. Both checksums are checked.
//
// Each record's data is a tf.train.Example protocol buffer. The image is the one value of the
// bytes feature ImageKey ("image/encoded" by default) and the label the one value of the
// int64 feature LabelKey ("image/class/label"), the TFDS and TF-slim ImageNet convention; the
// wire format is read with google.golang.org/protobuf's protowire. Labels are kept as stored
// (TF-slim's ImageNet labels start at 1, with 0 for a background class: give --classes
// accordingly). Class names come from --classes.
//
// # Order, names, provenance, bad input
//
// Two names of one file in a folder (a link to another TFRecord file of it) are refused at
// open, naming both: its records would be packed twice.
//
// Records are in file order, then record order. A record is named "FILE#N" (N from 0) in
// errors and the manifest's skipped list, and carries {"file": FILE, "record": N} as
// per-record metadata. A record whose data checksum is wrong, whose Example does not parse, or
// that lacks the image or label feature, that names one of them twice (TensorFlow's parser keeps
// the last map entry of a key) or whose image or label feature holds several values (a
// FixedLenFeature of shape [] refuses them) is skipped with the reason (or fails the build with
// --on-error fail). Damage to the framing (a wrong length checksum, a file cut short) makes
// the rest of that file unreadable: it becomes one skipped entry "FILE (from record N)", the
// records before it are kept and the build goes on with the next file. A record longer than
// MaxRecordSize is refused before it is read.
package tfrecord
