//go:build cgo && (!linux || packer_dynjpeg)

package transforms

// libjpeg linked dynamically: on systems other than Linux, or with -tags packer_dynjpeg (see
// jpeg_link_static.go).

// #cgo LDFLAGS: -ljpeg
import "C"
