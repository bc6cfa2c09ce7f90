#!/usr/bin/env bash
# Builds the release binary of packer: the binary the wheel carries and the one to copy onto a
# bare machine. Same build as scripts/install.sh's (cgo, -trimpath; the version is
# pipeline.Version, compiled in), then checked: on Linux `ldd` must list only the C library's own
# pieces (libc, libm, the dynamic loader, the vDSO and glibc's libpthread/libdl/librt), so the
# binary starts on any glibc system with nothing else installed. libjpeg-turbo is linked
# statically (transforms/jpeg_link_static.go); libhdf5, libcuda and ffmpeg's libraries
# (libavformat59 and friends) are opened with dlopen when --format hdf5, the GPU or --from video
# is used.
#
#   bash scripts/build-release.sh              # dist/packer
#   bash scripts/build-release.sh /tmp/packer  # or any path
#
# Needs gcc, libjpeg62-turbo-dev (its libjpeg.a), libhdf5-dev and libavformat-dev, libavcodec-dev,
# libavfilter-dev, libavutil-dev (headers only) at build time.
# Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist/packer}
mkdir -p "$(dirname "$out")"
CGO_ENABLED=1 go build -trimpath -o "$out.tmp" ./cmd/packer
if [ "$(go env GOOS)" = linux ]; then
  # One line per needed object: "libc.so.6 => /lib/...", "/lib64/ld-linux-x86-64.so.2 (...)".
  bad=$(ldd "$out.tmp" | awk '{print $1}' | xargs -n1 basename |
    grep -Ev '^(linux-vdso|linux-gate)\.so\.[0-9]+$|^ld-linux[-a-z0-9_.]*\.so\.[0-9]+$|^lib(c|m|pthread|dl|rt)\.so\.[0-9]+$' || true)
  if [ -n "$bad" ]; then
    echo "build-release: $out links libraries other than the C library's own:" >&2
    echo "$bad" | sed 's/^/  /' >&2
    ldd "$out.tmp" >&2
    rm -f "$out.tmp"
    exit 1
  fi
fi
mv -f "$out.tmp" "$out"
echo "$out"
