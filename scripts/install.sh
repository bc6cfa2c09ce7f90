#!/usr/bin/env bash
# Installs what running packer needs on Debian bookworm (or Ubuntu), and nothing for the tests:
# the C toolchain and what cgo builds against (gcc, libjpeg-turbo's libjpeg.a, linked statically,
# and the headers of libhdf5 and of ffmpeg's libraries; libhdf5 and libavformat/libavcodec/
# libavfilter/libavutil themselves are opened at run time, for --format hdf5 and --from video),
# ffmpeg (for --from video), the Go modules; then builds the packer binary and puts it on PATH.
#
#   bash scripts/install.sh                  # root: /usr/local/bin/packer; else ~/.local/bin/packer
#   PACKER_BIN_DIR=/opt/bin bash scripts/install.sh
#
# Needs Go 1.26 or later (https://go.dev/dl). scripts/setup.sh runs this, then adds the test
# toolchain. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  gcc libc6-dev pkg-config ca-certificates
  libjpeg62-turbo-dev libhdf5-dev  # for the cgo build; libhdf5-dev pulls in libhdf5-103-1 (run time)
  libavformat-dev libavcodec-dev libavfilter-dev libavutil-dev libswscale-dev  # headers: --from video decodes in process
  ffmpeg                           # decodes videos for --from video
)
if command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
else
  echo "install: not a Debian system: install gcc, libjpeg-turbo, HDF5 and ffmpeg 5.1's libraries (with headers) and ffmpeg yourself" >&2
fi

if ! command -v go >/dev/null 2>&1; then
  echo "install: Go is not installed; install Go 1.26 or later (https://go.dev/dl) and run this again" >&2
  exit 1
fi
go mod download

if [ -n "${PACKER_BIN_DIR:-}" ]; then
  dir=$PACKER_BIN_DIR
elif [ "$(id -u)" -eq 0 ]; then
  dir=/usr/local/bin
else
  dir=$HOME/.local/bin
fi
mkdir -p "$dir"
CGO_ENABLED=1 go build -trimpath -o "$dir/packer.tmp" ./cmd/packer
mv -f "$dir/packer.tmp" "$dir/packer"
echo "install: $("$dir/packer" --version) installed as $dir/packer"
case ":$PATH:" in
  *":$dir:"*) ;;
  *) echo "install: $dir is not on your PATH; add it, e.g. echo 'export PATH=\"$dir:\$PATH\"' >> ~/.bashrc" ;;
esac
