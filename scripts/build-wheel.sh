#!/usr/bin/env bash
# Builds the packer wheel into dist/ (or $1): the packer command as a bundled binary with a
# `packer` console entry point, plus the packer_reader package. NumPy is its only requirement;
# torch, h5py and crc32c are the extras [torch], [hdf5] and [crc].
#
#   bash scripts/build-wheel.sh            # dist/packer_reader-<version>-py3-none-linux_x86_64.whl
#   pip install dist/packer_reader-*.whl   # then: packer --version; python -c "import packer_reader"
#
# Linux x86-64 only, built on the host: the binary needs cgo (libjpeg-turbo, libhdf5), so an
# aarch64 wheel needs an aarch64 machine (or a cross C toolchain with arm64 libjpeg and libhdf5,
# which this script does not set up). The platform tag is linux_<arch>, not manylinux: the binary
# still links libjpeg62-turbo and libhdf5 dynamically (Debian: apt-get install libjpeg62-turbo
# libhdf5-103-1), which the manylinux policy does not allow. Once they are linked statically the
# tag can become manylinux_2_<glibc>.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
case "$(go env GOOS)/$(go env GOARCH)" in
  linux/amd64) plat=linux_x86_64 ;;
  linux/arm64) plat=linux_aarch64 ;;
  *) echo "build-wheel: unsupported platform $(go env GOOS)/$(go env GOARCH)" >&2; exit 1 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=1 go build -trimpath -o "$tmp/packer" ./cmd/packer
want=$(sed -n 's/^version = "\(.*\)"/\1/p' python/pyproject.toml)
got=$("$tmp/packer" --version | awk '{print $2}')
if [ "$got" != "$want" ]; then
  echo "build-wheel: packer --version says $got but python/pyproject.toml says $want: make them agree" >&2
  exit 1
fi
/usr/bin/python3 scripts/make_wheel.py "$tmp/packer" "$plat" "$out"
