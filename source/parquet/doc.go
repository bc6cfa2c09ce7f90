// Package parquet is the source --from parquet: Parquet files whose image column holds encoded
// images, as the Hugging Face Hub serves ImageNet-1k and most image datasets.
//
// # Layout
//
// The source is one Parquet file, a folder of them (every non-hidden regular file ending in
// .parquet, sorted by name), or a glob in the file name ("data/train-*.parquet", its matches
// sorted by name; give --from parquet, detection needs an existing path). The image column (ImageColumn, --image-column; by default a
// column named "image", else "img") is either binary (the encoded image) or the Hugging Face
// datasets Image struct {bytes: binary, path: string}, whose "bytes" leaf is read. The label
// column (LabelColumn, --label-column; default "label") is an integer or a string. Integer
// labels are kept; their class names come from --classes or, when absent, from the Hugging
// Face feature metadata in the file (a ClassLabel's "names" under the "huggingface" key).
// String labels become classes, sorted, read from every file before the build starts; a label
// column of more than MaxClasses distinct values, or with a value longer than MaxClassName
// bytes, does not hold class names and is refused naming the file.
//
// Files are read row group by row group with github.com/parquet-go/parquet-go (pure Go,
// streaming pages; the README's dependency table says why): only the image and label columns
// are read, page by page side by side, so memory holds one page of each, never a row group or a
// file.
//
// # Limits
//
// parquet-go sizes a page's buffers from the sizes and value count its header claims, and
// decompresses whatever the page's data expands to: a 33 KB file holding one 1000 MB cell of
// zeros took a build to 3 GB. So before parquet-go reads a column chunk, every page header in
// it is read and checked: its data must lie in the chunk, its sizes be at most MaxPageSize
// (256 MiB, the limit the WebDataset and TFRecord sources put on a member or record), its value
// count at most MaxPageSize/8; and since a header can lie, its data is decompressed and counted
// (never held) and refused past MaxPageSize, whatever the codec (gzip, zstd, brotli; a snappy
// block by the length it starts with; an LZ4 block by walking its sequences, then decoded once
// into exactly that size, since parquet-go retries a block that fails with ever larger
// buffers). A chunk compressed with another codec than the file's first row group's (which
// parquet-go uses for all) is refused. A refused page makes its file unreadable from there, as
// other damage does. The check decompresses compressed pages a second time: nothing for the
// usual uncompressed or snappy image columns, one more pass for gzip, zstd or brotli ones.
//
// # Order, names, provenance, bad input
//
// Two names of one file in a folder or a glob's matches (a link to another file of it) are
// refused at open, naming both: its rows would be packed twice.
//
// Records are in file order, then row order. A row is named "FILE#ROW" (ROW from 0 within the
// file) and carries {"file": FILE, "row": ROW} as per-record metadata. A null image or label,
// an undecodable image, or a label out of --classes is skipped with the reason (or fails the
// build with --on-error fail). A file that cannot be opened as Parquet, or whose columns
// cannot be read, is one skipped entry "FILE (from row N)" with the reason, keeping the rows
// read before; the build goes on with the next file. A file without the image or label column
// is refused at open, naming the columns it has; so is one with two columns (or two struct
// fields) of the image's or the label's name, which pyarrow writes and readers resolve
// differently (in a folder's later file, that file is the skipped entry).
package parquet
