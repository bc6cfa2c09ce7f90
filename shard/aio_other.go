//go:build !linux

package shard

import "errors"

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

// errNoAIO is aioContext.readAll where there is no native asynchronous I/O.
var errNoAIO = errors.New("shard: no native asynchronous I/O")

func (a *aioContext) readAll(reads []aioRead) error { return errNoAIO }
