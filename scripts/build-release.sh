#!/usr/bin/env bash
# Builds the release binary of packer for Linux x86-64 or aarch64: the binary the wheel carries
# and the one to copy onto a bare machine. It needs glibc 2.17 or later (manylinux2014: RHEL/CentOS
# 7 and later, Debian 8 and later, Ubuntu 14.04 and later) and nothing else installed: the C code
# is compiled and linked for that glibc floor by Zig's clang (scripts/glibc-floor-env.sh, which
# also cross-compiles to aarch64), libjpeg-turbo (Debian's libjpeg.a) is linked statically, and
# libhdf5, libcuda and ffmpeg's libraries (libavformat59 and friends) are opened with dlopen when
# --format hdf5, the GPU or --from video is used. Same Go build as scripts/install.sh's otherwise (cgo, -trimpath; the
# version is pipeline.Version, compiled in). Then checked (scripts/check-glibc.sh): no glibc
# symbol version newer than 2.17, and only glibc's own libraries (libc, libm, libpthread, libdl,
# librt, libresolv, the dynamic loader) needed.
#
#   bash scripts/build-release.sh                      # dist/packer, x86_64
#   bash scripts/build-release.sh /tmp/packer aarch64  # any path; x86_64 or aarch64
#
# Needs Go, /usr/bin/python3 with pip, apt-get and dpkg-deb: Zig and the Debian packages it builds
# with are downloaded into ${XDG_CACHE_HOME:-~/.cache}/packer/ once (see glibc-floor-env.sh).
# Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist/packer}
arch=${2:-x86_64}
mkdir -p "$(dirname "$out")"
env_file=$(mktemp)
trap 'rm -f "$env_file"' EXIT
bash scripts/glibc-floor-env.sh "$arch" >"$env_file"
(
  . "$env_file"
  go build -tags "$PACKER_GO_TAGS" -trimpath -o "$out.tmp" ./cmd/packer
)
if ! bash scripts/check-glibc.sh "$out.tmp" >/dev/null; then
  bash scripts/check-glibc.sh "$out.tmp" >&2 || true
  rm -f "$out.tmp"
  echo "build-release: $out does not meet the glibc floor" >&2
  exit 1
fi
mv -f "$out.tmp" "$out"
echo "$out"
