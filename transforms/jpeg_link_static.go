//go:build cgo && linux && !packer_dynjpeg

package transforms

// libjpeg-turbo is linked statically on Linux, so the binary runs where libjpeg62-turbo is not
// installed: -l:libjpeg.a takes the archive that Debian and Ubuntu's libjpeg62-turbo-dev
// (libjpeg-turbo8-dev) ship next to the shared library. Build with -tags packer_dynjpeg to link
// libjpeg.so instead, where the distribution ships no libjpeg.a (Fedora without
// libjpeg-turbo-static).

// #cgo LDFLAGS: -l:libjpeg.a
import "C"
