package hdf5

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"
)

// libraryNames are the sonames tried in order when LibraryEnv is not set: Debian and Ubuntu's
// serial build of HDF5 1.10 (the release the package is tested with and the only one whose
// output bytes are pinned), the plain name other distributions give it, then the names of
// 1.14 (310) and 1.12 (200), and last the unversioned development link.
func libraryNames() []string {
	if runtime.GOOS == "darwin" {
		return []string{"libhdf5.103.dylib", "libhdf5.310.dylib", "libhdf5.200.dylib", "libhdf5.dylib"}
	}
	return []string{
		"libhdf5_serial.so.103", "libhdf5.so.103",
		"libhdf5_serial.so.310", "libhdf5.so.310",
		"libhdf5_serial.so.200", "libhdf5.so.200",
		"libhdf5_serial.so", "libhdf5.so",
	}
}

func load() error {
	names := libraryNames()
	if v := os.Getenv(LibraryEnv); v != "" {
		names = []string{v}
	}
	var why []string
	var buf [512]C.char
	for _, name := range names {
		cn := C.CString(name)
		rc := C.pk_load(cn, &buf[0], C.size_t(len(buf)))
		C.free(unsafe.Pointer(cn))
		if rc == 0 {
			return nil
		}
		why = append(why, C.GoString(&buf[0]))
	}
	// dlopen's message for a missing file is "NAME: cannot open shared object file: No such file
	// or directory"; one line per name tried would bury the hint.
	detail := strings.Join(why, "; ")
	if allMissing(why) {
		detail = "tried " + strings.Join(names, ", ")
	}
	return fmt.Errorf("%w (%s): %s", ErrNoLibrary, InstallHint, detail)
}

func allMissing(why []string) bool {
	for _, w := range why {
		if !strings.Contains(w, "No such file") {
			return false
		}
	}
	return true
}

// newHandle wraps id, or returns an error when id is negative (the call failed).
func newHandle(id C.hid_t, close func(int64) bool) (*handle, error) {
	if id < 0 {
		return nil, fmt.Errorf("returned %d", int64(id))
	}
	return &handle{id: int64(id), close: close}, nil
}

func closeFile(id int64) bool     { return C.pk_fclose(C.hid_t(id)) >= 0 }
func closeDataset(id int64) bool  { return C.pk_dclose(C.hid_t(id)) >= 0 }
func closeType(id int64) bool     { return C.pk_tclose(C.hid_t(id)) >= 0 }
func closeSpace(id int64) bool    { return C.pk_sclose(C.hid_t(id)) >= 0 }
func closePropList(id int64) bool { return C.pk_pclose(C.hid_t(id)) >= 0 }
func closeGroup(id int64) bool    { return C.pk_gclose(C.hid_t(id)) >= 0 }

// createFile creates (truncates) an HDF5 file with default properties.
func createFile(name string) (*handle, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return newHandle(C.pk_fcreate(cn), closeFile)
}

// openFile opens an HDF5 file read-only.
func openFile(name string) (*handle, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return newHandle(C.pk_fopen(cn), closeFile)
}

// Predefined types copied by copyType, and property list classes for newPropList.
const (
	typeU8LE  = int(C.PK_T_STD_U8LE)
	typeI64LE = int(C.PK_T_STD_I64LE)
	typeF32LE = int(C.PK_T_IEEE_F32LE)
	typeCS1   = int(C.PK_T_C_S1)
	typeI32LE = int(C.PK_T_STD_I32LE)
	typeF64LE = int(C.PK_T_IEEE_F64LE)
	plistDCPL = int(C.PK_P_DATASET_CREATE)
	plistDAPL = int(C.PK_P_DATASET_ACCESS)
	maxRank   = 32
)

// copyType returns a transient copy of a predefined type.
func copyType(which int) (*handle, error) {
	return newHandle(C.pk_type_copy(C.int(which)), closeType)
}

// newPropList creates a property list of class which (plistDCPL, plistDAPL).
func newPropList(which int) (*handle, error) {
	return newHandle(C.pk_plist_create(C.int(which)), closePropList)
}

func hsizes(d []uint64) (*C.hsize_t, error) {
	if len(d) == 0 || len(d) > maxRank {
		return nil, fmt.Errorf("rank %d", len(d))
	}
	c := make([]C.hsize_t, len(d))
	for i, v := range d {
		c[i] = C.hsize_t(v)
	}
	return &c[0], nil
}

// createSimpleSpace makes a dataspace of the current and maximum dimensions.
func createSimpleSpace(cur, max []uint64) (*handle, error) {
	if len(cur) != len(max) {
		return nil, fmt.Errorf("rank %d with %d maximum dimensions", len(cur), len(max))
	}
	c, err := hsizes(cur)
	if err != nil {
		return nil, err
	}
	m, _ := hsizes(max)
	return newHandle(C.pk_simple_space(C.int(len(cur)), c, m), closeSpace)
}

// setChunk sets the chunk dimensions of a dataset creation property list.
func setChunk(dcpl *handle, dims []uint64) error {
	c, err := hsizes(dims)
	if err != nil {
		return err
	}
	if C.pk_set_chunk(hid(dcpl.id), C.int(len(dims)), c) < 0 {
		return errors.New("H5Pset_chunk failed")
	}
	return nil
}

// setChunkCache sets the raw data chunk cache of a dataset access property list.
func setChunkCache(dapl *handle, slots, bytes int, w0 float64) error {
	if C.pk_set_chunk_cache(hid(dapl.id), C.size_t(slots), C.size_t(bytes), C.double(w0)) < 0 {
		return errors.New("H5Pset_chunk_cache failed")
	}
	return nil
}

// createDataset creates dataset name under loc with the given type, space and creation
// properties.
func createDataset(loc *handle, name string, t, space, dcpl *handle) (*handle, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return newHandle(C.pk_dcreate(hid(loc.id), cn, hid(t.id), hid(space.id), hid(dcpl.id)), closeDataset)
}

// openDataset opens dataset name under loc, with access properties dapl (nil: the defaults).
func openDataset(loc *handle, name string, dapl *handle) (*handle, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	a := C.hid_t(0) // H5P_DEFAULT
	if dapl != nil {
		a = hid(dapl.id)
	}
	return newHandle(C.pk_dopen(hid(loc.id), cn, a), closeDataset)
}

// fileSetup pins the file's object format versions (see pk_file_setup).
func fileSetup(f *handle) error {
	return herr(C.pk_file_setup(hid(f.id)), "set library version bounds")
}

// createGroup creates group name under loc, without object times.
func createGroup(loc *handle, name string) (*handle, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	g := C.pk_create_group(hid(loc.id), cn)
	if g < 0 {
		return nil, h5error("create group "+name, nil)
	}
	return &handle{id: int64(g), close: closeGroup}, nil
}

// makeVlenUTF8 turns a copy of the C string type into a variable-length UTF-8 string type.
func makeVlenUTF8(t *handle) error { return herr(C.pk_make_vlen_utf8(hid(t.id)), "string type") }

// makeFloat16 turns a copy of the 32-bit float type into IEEE binary16.
func makeFloat16(t *handle) error { return herr(C.pk_make_float16(hid(t.id)), "float16 type") }

// dcplSetup turns off object time tracking and, when fillType is not nil, sets a zero fill value
// of that type (see pk_dcpl_setup).
func dcplSetup(dcpl, fillType *handle) error {
	ft := C.hid_t(-1)
	if fillType != nil {
		ft = hid(fillType.id)
	}
	return herr(C.pk_dcpl_setup(hid(dcpl.id), ft), "dataset creation properties")
}
