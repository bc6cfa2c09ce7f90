//go:build !cgo

package hdf5

import "fmt"

// Without cgo there is no way to call libhdf5: the package builds (so the command builds with
// CGO_ENABLED=0), and every HDF5 operation fails with errNoCgo, which wraps ErrNoLibrary. lib
// returns it before any of the functions below could run; they only satisfy the compiler.

var errNoCgo = fmt.Errorf("%w: this packer was built without cgo (CGO_ENABLED=0), which HDF5 needs: rebuild with cgo and libhdf5-dev's headers", ErrNoLibrary)

func load() error { return errNoCgo }

func lib(fn func() error) error {
	if err := Load(); err != nil {
		return err
	}
	return fn()
}

// The values of H5T_INTEGER, H5T_FLOAT and H5T_ORDER_LE.
const (
	classInteger = 0
	classFloat   = 1
	classVlen    = 9
	orderLE      = 0
)

const (
	typeU8LE = iota
	typeI64LE
	typeF32LE
	typeCS1
	typeI32LE
	typeF64LE
)

const (
	plistDCPL = iota
	plistDAPL
)

func h5error(what string, err error) error                 { return errNoCgo }
func createFile(string) (*handle, error)                   { return nil, errNoCgo }
func openFile(string) (*handle, error)                     { return nil, errNoCgo }
func copyType(int) (*handle, error)                        { return nil, errNoCgo }
func newPropList(int) (*handle, error)                     { return nil, errNoCgo }
func createSimpleSpace(cur, max []uint64) (*handle, error) { return nil, errNoCgo }
func setChunk(*handle, []uint64) error                     { return errNoCgo }
func setChunkCache(*handle, int, int, float64) error       { return errNoCgo }
func createDataset(loc *handle, name string, t, space, dcpl *handle) (*handle, error) {
	return nil, errNoCgo
}
func openDataset(loc *handle, name string, dapl *handle) (*handle, error) { return nil, errNoCgo }
func fileSetup(*handle) error                                             { return errNoCgo }
func createGroup(*handle, string) (*handle, error)                        { return nil, errNoCgo }
func makeVlenUTF8(*handle) error                                          { return errNoCgo }
func makeFloat16(*handle) error                                           { return errNoCgo }
func dcplSetup(dcpl, fillType *handle) error                              { return errNoCgo }
func setStrAttr(int64, string, string) error                              { return errNoCgo }
func strAttr(int64, string) (string, error)                               { return "", errNoCgo }
func linkExists(int64, string) bool                                       { return false }
func dims(*handle) (cur, max []uint64, err error)                         { return nil, nil, errNoCgo }
func datasetType(*handle) (typeInfo, error)                               { return typeInfo{}, errNoCgo }
func writeRows(ds *handle, start, n int64, buf []byte) error              { return errNoCgo }
func writeStrings(ds *handle, start, n int64, packed []byte) error        { return errNoCgo }
func readRows(ds *handle, start, n int64, buf []byte) error               { return errNoCgo }
func readString(ds *handle, i int64) ([]byte, error)                      { return nil, errNoCgo }
func createVlenType(*handle) (*handle, error)                             { return nil, errNoCgo }
func writeVlen(*handle, int64, []uint64, []byte) error                    { return errNoCgo }
func readVlen(*handle, int64) ([]byte, error)                             { return nil, errNoCgo }
func vlenBaseType(*handle) (typeInfo, error)                              { return typeInfo{}, errNoCgo }
func setInt64sAttr(int64, string, []int64) error                          { return errNoCgo }
func attrExists(*handle, string) bool                                     { return false }

// LibraryVersion returns 0.0.0: a build without cgo loads no libhdf5.
func LibraryVersion() (major, minor, release uint) { return 0, 0, 0 }
