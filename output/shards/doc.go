// Package shards writes a dataset in packer's native shard format (--format shards): records
// go, in order, into shard files (shard-00000.pks, ...) of a byte budget each, hashed and
// written on goroutines of their own (O_DIRECT where the file system allows it) and committed
// in the background.
//
// It sits beside output/npy and output/hdf5, and not in shard, so that the three outputs are
// symmetric (each implements output.Output and exports an output.Entry for the command's
// table) and the engine knows none of them by name; and so that shard stays what every reader
// imports: the format, its readers and the low-level Writer, without the writer goroutines and
// the build-time policy (shard size, file naming, background commit) of a dataset build.
package shards
