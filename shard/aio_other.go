//go:build !linux

package shard

// aioContext is Linux native asynchronous I/O; elsewhere there is none and a Loader reads
// scattered records with a goroutine per read in flight.
type aioContext struct{ depth int }

func newAIO(depth int) *aioContext { return nil }

func (a *aioContext) close() {}

type aioRead struct {
	fd   uintptr
	buf  []byte
	off  int64
	name string
}

func (a *aioContext) readAll(reads []aioRead) error { return errNoAIO }
