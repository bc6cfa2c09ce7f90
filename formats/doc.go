// Package formats holds one subpackage per external dataset format: the sources
// (formats/imagedir, formats/cifar, formats/idx, formats/video), each exporting its entries of
// the source table (package source), and the outputs (formats/shards, formats/npy,
// formats/hdf5), each exporting its entry of the output table (package output). This package
// itself holds only the property test that drives every source through the real build.
package formats
