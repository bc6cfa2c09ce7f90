//go:build !linux

package pipeline

import "os"

func createDirect(path string) (f *os.File, direct bool, err error) {
	f, err = os.Create(path)
	return f, false, err
}

func clearDirect(f *os.File) error { return nil }

func directUnsupported(err error) bool { return false }
