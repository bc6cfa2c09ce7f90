//go:build !unix

package pipeline

import "os"

// oNoFollow: no flag for it here.
const oNoFollow = 0

// tryLock does not lock outside Unix: concurrent builds into one OUT are not detected there.
func tryLock(f *os.File) (bool, error) { return true, nil }

func deviceOf(st os.FileInfo) (uint64, bool) { return 0, false }
