package hdf5

// libhdf5 is not linked: shim.c opens it with dlopen when HDF5 is first used (see load.go). The
// headers are still needed to compile, for the library's types; the #cgo lines find them where
// Debian and Ubuntu's libhdf5-dev put them (/usr/include/hdf5/serial), or under /usr/local.

// #cgo CFLAGS: -I/usr/local/include
// #cgo linux CFLAGS: -I/usr/include/hdf5/serial
// #cgo linux LDFLAGS: -ldl
// #include <stdlib.h>
// #include <string.h>
// #include "shim.h"
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// libMu serialises every call into libhdf5. The library is only safe for concurrent use when
// built thread-safe (Debian's is; others may not be), and even then it runs one call at a time
// behind its own global lock, so nothing is lost by taking the lock here. It is the package's only
// global state, and it guards a process-global C library.
var libMu sync.Mutex

// lib runs fn holding libMu on a locked OS thread with HDF5's error printing turned off for that
// thread. In a thread-safe libhdf5 the error stack is per thread, so silencing it once (as the
// binding's init does, on whichever thread runs init) does not cover the threads Go later runs
// cgo calls on; doing it here, lazily, before every batch of calls does.
//
// It first loads libhdf5 (once per process), and returns load's error, ErrNoLibrary, without
// running fn when the library is missing.
func lib(fn func() error) error {
	if err := Load(); err != nil {
		return err
	}
	libMu.Lock()
	defer libMu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.pk_silence()
	return fn()
}

// h5error describes the failure of an HDF5 call: what was attempted, and the innermost message
// of the library's error stack. It must run on the thread that made the failing call (inside lib).
func h5error(what string, err error) error {
	var buf [512]C.char
	var errnum C.int
	C.pk_errmsg(&buf[0], C.size_t(len(buf)), &errnum)
	msg := C.GoString(&buf[0])
	switch {
	case errnum != 0:
		// A system call failed under the library (the file driver's write on a full disk): its
		// message would carry a time stamp and buffer addresses; the errno says it all.
		return fmt.Errorf("%s: %w: %w", what, syscall.Errno(errnum), ErrHDF5)
	case msg != "":
		// The library's message names the API call; the binding's error ("code -1") adds nothing.
		if api, _, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(api, "H5") {
			return fmt.Errorf("%s: %w", msg, ErrHDF5)
		}
		return fmt.Errorf("%s: %s: %w", what, msg, ErrHDF5)
	case err != nil:
		return fmt.Errorf("%s: %v: %w", what, err, ErrHDF5)
	}
	return fmt.Errorf("%s: %w", what, ErrHDF5)
}

func herr(rc C.herr_t, what string) error {
	if rc < 0 {
		return h5error(what, nil)
	}
	return nil
}

func hid(id int64) C.hid_t { return C.hid_t(id) }

// LibraryVersion returns the version of the libhdf5 the program loaded, or 0.0.0 when it cannot
// load one.
func LibraryVersion() (major, minor, release uint) {
	var a, b, c C.uint
	_ = lib(func() error { C.pk_version(&a, &b, &c); return nil })
	return uint(a), uint(b), uint(c)
}

// setStrAttr attaches the scalar UTF-8 string attribute name=value to the object id.
func setStrAttr(id int64, name, value string) error {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	cv := C.CString(value)
	defer C.free(unsafe.Pointer(cv))
	return herr(C.pk_set_str_attr(hid(id), cn, cv), "write attribute "+name)
}

// strAttr reads the scalar string attribute name of the object id.
func strAttr(id int64, name string) (string, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var out *C.char
	if err := herr(C.pk_get_str_attr(hid(id), cn, &out), "read attribute "+name); err != nil {
		return "", err
	}
	defer C.pk_free(unsafe.Pointer(out))
	if out == nil {
		return "", nil
	}
	return C.GoString(out), nil
}

// linkExists reports whether the path name exists under the location id (one level at a time, as
// H5Lexists requires).
func linkExists(id int64, name string) bool {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.pk_link_exists(hid(id), cn) > 0
}

// dims returns a dataset's current and maximum dimensions.
func dims(ds *handle) (cur, max []uint64, err error) {
	var d, m [32]C.hsize_t
	rank := C.pk_dims(hid(ds.ID()), &d[0], &m[0], C.int(len(d)))
	if rank < 0 || int(rank) > len(d) {
		return nil, nil, h5error("read dataspace", nil)
	}
	cur = make([]uint64, rank)
	max = make([]uint64, rank)
	for i := range cur {
		cur[i], max[i] = uint64(d[i]), uint64(m[i])
	}
	return cur, max, nil
}

const (
	classInteger = int(C.H5T_INTEGER)
	classFloat   = int(C.H5T_FLOAT)
	classString  = int(C.H5T_STRING)
	orderLE      = int(C.H5T_ORDER_LE)
)

func datasetType(ds *handle) (typeInfo, error) {
	var cls, sign, order, vs C.int
	var size C.size_t
	if C.pk_type_info(hid(ds.ID()), &cls, &size, &sign, &order, &vs) < 0 {
		return typeInfo{}, h5error("read datatype", nil)
	}
	return typeInfo{class: int(cls), size: int(size), signed: sign == C.H5T_SGN_2, order: int(order), vlenStr: vs != 0}, nil
}

// writeRows grows ds to start+n rows and writes buf (n rows in the dataset's type) at row start.
func writeRows(ds *handle, start, n int64, buf []byte) error {
	if n == 0 {
		return nil
	}
	rc := C.pk_write_rows(hid(ds.ID()), C.hsize_t(start), C.hsize_t(n), unsafe.Pointer(&buf[0]), C.size_t(len(buf)))
	return herr(rc, fmt.Sprintf("write rows %d-%d", start, start+n-1))
}

// writeStrings grows the string dataset ds to start+n rows and writes the n NUL-terminated
// strings packed in buf at row start.
func writeStrings(ds *handle, start, n int64, packed []byte) error {
	if n == 0 {
		return nil
	}
	rc := C.pk_write_strings(hid(ds.ID()), C.hsize_t(start), C.hsize_t(n), (*C.char)(unsafe.Pointer(&packed[0])), C.size_t(len(packed)))
	return herr(rc, fmt.Sprintf("write strings %d-%d", start, start+n-1))
}

// readRows reads n rows from row start of ds into buf, in the dataset's own type.
func readRows(ds *handle, start, n int64, buf []byte) error {
	if n == 0 {
		return nil
	}
	if len(buf) == 0 {
		return fmt.Errorf("read rows %d-%d: empty buffer", start, start+n-1)
	}
	rc := C.pk_read_rows(hid(ds.ID()), C.hsize_t(start), C.hsize_t(n), unsafe.Pointer(&buf[0]), C.size_t(len(buf)))
	return herr(rc, fmt.Sprintf("read rows %d-%d", start, start+n-1))
}

// readString reads string i of a variable-length string dataset.
func readString(ds *handle, i int64) ([]byte, error) {
	var out *C.char
	if err := herr(C.pk_read_string(hid(ds.ID()), C.hsize_t(i), &out), fmt.Sprintf("read string %d", i)); err != nil {
		return nil, err
	}
	if out == nil {
		return nil, nil
	}
	defer C.pk_free(unsafe.Pointer(out))
	return C.GoBytes(unsafe.Pointer(out), C.int(C.strlen(out))), nil
}

// createVlenType makes a variable-length sequence type of base; the caller closes it.
func createVlenType(base *handle) (*handle, error) {
	return newHandle(C.pk_vlen_create(hid(base.ID())), closeType)
}

// writeVlen grows the vlen dataset ds to start+n rows and writes n sequences at row start: row
// i has lens[i] elements, packed one after another in data.
func writeVlen(ds *handle, start int64, lens []uint64, data []byte) error {
	if len(lens) == 0 {
		return nil
	}
	p := unsafe.Pointer(nil)
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	n := int64(len(lens))
	rc := C.pk_write_vlen(hid(ds.ID()), C.hsize_t(start), C.hsize_t(n), (*C.uint64_t)(unsafe.Pointer(&lens[0])), p, C.size_t(len(data)))
	return herr(rc, fmt.Sprintf("write sequences %d-%d", start, start+n-1))
}

// readVlen reads sequence i of a vlen dataset: its elements' bytes.
func readVlen(ds *handle, i int64) ([]byte, error) {
	var out unsafe.Pointer
	var n C.size_t
	if err := herr(C.pk_read_vlen(hid(ds.ID()), C.hsize_t(i), &out, &n), fmt.Sprintf("read sequence %d", i)); err != nil {
		return nil, err
	}
	if out == nil {
		return []byte{}, nil
	}
	defer C.pk_free(out)
	return C.GoBytes(out, C.int(n)), nil
}

// vlenBaseType describes the element type of a vlen dataset's sequences.
func vlenBaseType(ds *handle) (typeInfo, error) {
	var cls, sign, order C.int
	var size C.size_t
	if C.pk_vlen_base_info(hid(ds.ID()), &cls, &size, &sign, &order) < 0 {
		return typeInfo{}, h5error("read sequence type", nil)
	}
	return typeInfo{class: int(cls), size: int(size), signed: sign == C.H5T_SGN_2, order: int(order)}, nil
}

// setInt64sAttr attaches the 1-D int64 attribute name=v to the object id.
func setInt64sAttr(id int64, name string, v []int64) error {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	p := (*C.int64_t)(nil)
	if len(v) > 0 {
		p = (*C.int64_t)(unsafe.Pointer(&v[0]))
	}
	return herr(C.pk_set_i64s_attr(hid(id), cn, C.int(len(v)), p), "write attribute "+name)
}

const classVlen = int(C.H5T_VLEN)

// attrExists reports whether the object has the attribute name.
func attrExists(obj *handle, name string) bool {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.pk_attr_exists(hid(obj.ID()), cn) > 0
}
