//go:build cgo

package video

// libavformat, libavcodec, libavfilter and libavutil are not linked: libav.c opens them with
// dlopen the first time a video is decoded in process (see inproc.go). Their headers
// (libavformat-dev, libavcodec-dev, libavfilter-dev, libavutil-dev) are needed to compile,
// for the structures' layouts.

// #cgo CFLAGS: -Wno-deprecated-declarations
// #cgo linux LDFLAGS: -ldl -lm
// #include <stdlib.h>
// #include "libav.h"
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The statuses of pkv_next.
const (
	avFrame       = C.PKV_FRAME
	avEnd         = C.PKV_END
	avLoggedError = C.PKV_LOGGED_ERROR
	avFail        = C.PKV_FAIL
	avInterrupted = C.PKV_INTERRUPTED
)

var (
	avOnce sync.Once
	avErr  error
)

// avLoad opens the libraries once per process.
func avLoad() error {
	avOnce.Do(func() {
		var buf [512]C.char
		if C.pkv_load(&buf[0], C.size_t(len(buf))) != 0 {
			avErr = fmt.Errorf("%w: %s", errNoLibav, C.GoString(&buf[0]))
		}
	})
	return avErr
}

// avVersions returns av_version_info() ("5.1.9-0+deb12u1") and libavcodec's version.
func avVersions() (info, codec string) {
	var a, b [128]C.char
	C.pkv_version_info(&a[0], C.size_t(len(a)), &b[0], C.size_t(len(b)))
	return C.GoString(&a[0]), C.GoString(&b[0])
}

// avDecoderNames lists the video decoders' names and their codecs' names.
func avDecoderNames() map[string]bool {
	const n = 1 << 20
	buf := (*C.char)(C.malloc(n))
	defer C.free(unsafe.Pointer(buf))
	C.pkv_decoders(buf, n)
	m := map[string]bool{}
	for _, s := range strings.Split(C.GoString(buf), "\n") {
		if s != "" {
			m[s] = true
		}
	}
	return m
}

// avCancel is a flag in C memory that interrupts a probe or a decode from any goroutine. The
// C side reads it until free; set after free does nothing.
type avCancel struct {
	mu sync.Mutex
	p  *C.int
}

func newAVCancel() *avCancel {
	p := (*C.int)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int(0)))))
	return &avCancel{p: p}
}

func (c *avCancel) set() {
	c.mu.Lock()
	if c.p != nil {
		atomic.StoreInt32((*int32)(unsafe.Pointer(c.p)), 1)
	}
	c.mu.Unlock()
}

func (c *avCancel) free() {
	c.mu.Lock()
	C.free(unsafe.Pointer(c.p))
	c.p = nil
	c.mu.Unlock()
}

// takeLog returns the lines lg holds and empties it. The C side must not be running on lg.
func takeLog(lg *C.pkv_log) []string {
	if lg == nil || lg.len == 0 {
		return nil
	}
	s := C.GoStringN(lg.buf, C.int(lg.len))
	lg.len = 0
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// avProbe reads the file as ffprobe -show_format -show_streams -count_packets does: its JSON
// (the fields parseProbe reads), the warning and error lines logged, and a negative code when
// the file could not be opened.
func avProbe(path string, c *avCancel) (json []byte, lines []string, code int) {
	const n = 1 << 20
	buf := (*C.char)(C.malloc(n))
	defer C.free(unsafe.Pointer(buf))
	lg := C.pkv_log_new(nil)
	if lg == nil {
		return nil, nil, -12 // ENOMEM
	}
	defer C.pkv_log_free(lg)
	url := C.CString(ffInput(path))
	defer C.free(unsafe.Pointer(url))
	rc := C.pkv_probe(url, buf, n, lg, (*C.int)(c.p))
	lines = takeLog(lg)
	if rc < 0 {
		return nil, lines, int(rc)
	}
	return []byte(C.GoString(buf)), lines, 0
}

// avDec is one open in-process decoder.
type avDec struct{ d *C.pkv_dec }

// avOpen opens path's stream for decoding; on failure the error is the last line logged.
func avOpen(url string, stream int, fps string, threads int, c *avCancel) (*avDec, error) {
	cu := C.CString(url)
	defer C.free(unsafe.Pointer(cu))
	cf := C.CString(fps)
	defer C.free(unsafe.Pointer(cf))
	var buf [512]C.char
	d := C.pkv_open(cu, C.int(stream), cf, C.int(threads), (*C.int)(c.p), &buf[0], C.size_t(len(buf)))
	if d == nil {
		return nil, fmt.Errorf("%s", C.GoString(&buf[0]))
	}
	return &avDec{d: d}, nil
}

// avFrameInfo describes the frame next returned.
type avFrameInfo struct {
	w, h   int
	pts    int64
	hasPTS bool
	tbNum  int64
	tbDen  int64
}

func (a *avDec) next() (int, avFrameInfo) {
	var f C.pkv_frame
	st := int(C.pkv_next(a.d, &f))
	fi := avFrameInfo{w: int(f.w), h: int(f.h), pts: int64(f.pts), tbNum: int64(f.tb_num), tbDen: int64(f.tb_den)}
	fi.hasPTS = st == avFrame && fi.pts != -1<<63
	return st, fi
}

// copyTo writes the frame next returned to dst, len w*h*3.
func (a *avDec) copyTo(dst []byte) { C.pkv_copy(a.d, (*C.uint8_t)(unsafe.Pointer(&dst[0]))) }

func (a *avDec) logLines() []string { return takeLog(C.pkv_dec_log(a.d)) }

func (a *avDec) close() { C.pkv_close(a.d) }
