//go:build !cgo

package video

import "fmt"

// Without cgo there is no way to call libav: the package builds (so the command builds with
// CGO_ENABLED=0) and every video is decoded through the ffmpeg command. avLoad fails before any
// of the functions below could run; they only satisfy the compiler.

var errNoCgo = fmt.Errorf("%w: this packer was built without cgo (CGO_ENABLED=0)", errNoLibav)

const (
	avFrame       = 1
	avEnd         = 0
	avLoggedError = -1
	avFail        = -2
	avInterrupted = -3
)

func avLoad() error                       { return errNoCgo }
func avVersions() (info, codec string)    { return "", "" }
func avDecoderNames() map[string]bool     { return nil }
func newAVCancel() *avCancel              { return &avCancel{} }
func (c *avCancel) set()                  {}
func (c *avCancel) free()                 {}
func (a *avDec) next() (int, avFrameInfo) { return avFail, avFrameInfo{} }
func (a *avDec) copyTo(dst []byte)        {}
func (a *avDec) logLines() []string       { return nil }
func (a *avDec) close()                   {}

type avCancel struct{}

type avDec struct{}

type avFrameInfo struct {
	w, h   int
	pts    int64
	hasPTS bool
	tbNum  int64
	tbDen  int64
}

func avProbe(path string, c *avCancel) (json []byte, lines []string, code int) {
	return nil, nil, -1
}

func avOpen(url string, stream int, fps string, threads int, c *avCancel) (*avDec, error) {
	return nil, errNoCgo
}
