#!/usr/bin/env bash
# Builds the packer wheel into dist/ (or $1): the packer binary as the wheel's `packer` script
# (installed as bin/packer itself), plus the packer_reader package with its hardware CRC-32C
# library (packer_reader/_lib/libpackercrc.so, scripts/build-crc.sh). NumPy is its only
# requirement; the extras [s3], [torch], [hdf5] and [crc] come from python/pyproject.toml.
#
#   bash scripts/build-wheel.sh            # dist/packer_reader-<version>-py3-none-manylinux_2_34_x86_64.whl
#   pip install dist/packer_reader-*.whl   # then: packer --version; python -c "import packer_reader"
#
# Linux x86-64 only, built on the host: the binary needs cgo (libjpeg-turbo), so an aarch64 wheel
# needs an aarch64 machine (or a cross C toolchain with arm64 libjpeg and HDF5 headers, which this
# script does not set up). The binary is scripts/build-release.sh's: libjpeg-turbo linked
# statically, libhdf5 and libcuda opened with dlopen only when used, and `ldd` listing only glibc's
# own libraries, which is what the manylinux policy allows. The platform tag is
# manylinux_2_<y>_<arch>, where 2.y is the highest glibc symbol version the binary references
# (objdump -T; 2.34 when built on Debian bookworm's glibc 2.36: __libc_start_main, pthread_* and
# dl* moved into libc.so.6 at 2.34), so pip installs it on glibc 2.34 or later only. Without
# objdump the tag stays linux_<arch>, which pip installs anywhere but PyPI refuses.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
case "$(go env GOOS)/$(go env GOARCH)" in
  linux/amd64) arch=x86_64 ;;
  linux/arm64) arch=aarch64 ;;
  *) echo "build-wheel: unsupported platform $(go env GOOS)/$(go env GOARCH)" >&2; exit 1 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash scripts/build-release.sh "$tmp/packer" >/dev/null
plat=linux_$arch
if command -v objdump >/dev/null 2>&1; then
  glibc=$(objdump -T "$tmp/packer" | grep -o 'GLIBC_2\.[0-9]*' | sort -uV | tail -1 | sed 's/^GLIBC_2\.//')
  [ -n "$glibc" ] && plat=manylinux_2_${glibc}_$arch
fi
want=$(sed -n 's/^version = "\(.*\)"/\1/p' python/pyproject.toml)
got=$("$tmp/packer" --version | awk '{print $2}')
if [ "$got" != "$want" ]; then
  echo "build-wheel: packer --version says $got but python/pyproject.toml says $want: make them agree" >&2
  exit 1
fi
# The reader's hardware CRC-32C (plain C, only glibc's libc; a wheel needs gcc on the build host).
bash scripts/build-crc.sh "$tmp/libpackercrc.so"
[ -f "$tmp/libpackercrc.so" ] || { echo "build-wheel: the CRC-32C library did not build (gcc?)" >&2; exit 1; }
/usr/bin/python3 scripts/make_wheel.py "$tmp/packer" "$plat" "$out" "$tmp/libpackercrc.so"
