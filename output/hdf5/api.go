package hdf5

import (
	"errors"
	"sync"
)

// ErrHDF5 is wrapped by every error that comes from libhdf5 itself.
var ErrHDF5 = errors.New("hdf5: library error")

// ErrNoLibrary is wrapped by the error of every HDF5 operation when libhdf5 cannot be loaded (or,
// in a build without cgo, cannot be used at all).
var ErrNoLibrary = errors.New("libhdf5 could not be loaded")

// LibraryEnv names the environment variable that, when set, is the one libhdf5 to load: a file
// name searched as the dynamic loader searches (LD_LIBRARY_PATH, the ld.so cache), or a path.
const LibraryEnv = "PACKER_LIBHDF5"

// InstallHint says which package provides the library.
const InstallHint = "install it: Debian 12, Ubuntu 22.04: apt-get install libhdf5-103-1; Ubuntu 24.04: apt-get install libhdf5-103-1t64; Fedora: dnf install hdf5; or set " + LibraryEnv + " to the library's path"

var (
	loadOnce sync.Once
	loadErr  error
)

// Load loads libhdf5 if it is not loaded yet and reports whether it could. Every function of the
// package that touches an HDF5 file calls it first; a command calls it up front to refuse
// --format hdf5 before doing any work. The error wraps ErrNoLibrary, names the files tried and
// the package to install.
func Load() error {
	loadOnce.Do(func() { loadErr = load() })
	return loadErr
}

// handle is an open HDF5 object (file, dataset, datatype, dataspace, property list, group) and
// the call that closes it, which reports success. Close is idempotent.
type handle struct {
	id    int64
	close func(id int64) bool
}

func (h *handle) ID() int64 { return h.id }

// Close releases the object. The caller is inside lib.
func (h *handle) Close() error {
	if h == nil || h.id < 0 {
		return nil
	}
	ok := h.close(h.id)
	h.id = -1
	if !ok {
		return errors.New("close failed")
	}
	return nil
}

const unlimDim = ^uint64(0) // H5S_UNLIMITED

// typeInfo describes a dataset's element type.
type typeInfo struct {
	class   int // H5T_class_t
	size    int
	signed  bool
	order   int // H5T_order_t, or -1
	vlenStr bool
}
