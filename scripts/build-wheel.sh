#!/usr/bin/env bash
# Builds the packer wheel into dist/ (or $1) for Linux x86-64 or aarch64 ($2): the packer binary as
# the wheel's `packer` script (installed as bin/packer itself), plus the packer_reader package with
# its hardware CRC-32C library (packer_reader/_lib/libpackercrc.so, scripts/build-crc.sh). NumPy
# is its only requirement; the extras [s3], [torch], [hdf5] and [crc] come from
# python/pyproject.toml.
#
#   bash scripts/build-wheel.sh                 # dist/packer_reader-<version>-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
#   bash scripts/build-wheel.sh dist aarch64    # dist/packer_reader-<version>-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl
#   pip install dist/packer_reader-*.whl        # then: packer --version; python -c "import packer_reader"
#
# Both architectures are built on an x86-64 host. The binary is scripts/build-release.sh's and the
# CRC-32C library is compiled by the same toolchain, for glibc 2.17 (scripts/glibc-floor-env.sh):
# libjpeg-turbo linked statically, libhdf5 and libcuda opened with dlopen only when used, and only
# glibc's own libraries needed, which is what the manylinux policy allows. The platform tags are
# the floor's two names, manylinux_2_17_<arch> (PEP 600) and manylinux2014_<arch> (PEP 599), as
# one compressed tag set: pip 19.3 and later know the second, pip 20.3 and later the first, so
# the pip of Ubuntu 20.04 (20.0.2), Debian 11 (20.3.4) and RHEL/Rocky 8's python39 (20.2) installs
# it as it is. scripts/check-glibc.sh checks both ELF files against the floor before the wheel is
# written, so pip installs it on glibc 2.17 or later.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
arch=${2:-x86_64}
case "$arch" in
  x86_64 | aarch64) ;;
  *) echo "build-wheel: unsupported architecture $arch (x86_64 or aarch64)" >&2; exit 1 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash scripts/build-release.sh "$tmp/packer" "$arch" >/dev/null
# The floor's tag (PEP 600), and its older PEP 599 name where it has one, as a compressed tag set.
floor=$(sed -n 's/^GLIBC_FLOOR=\([0-9][0-9.]*\).*/\1/p' scripts/glibc-floor-env.sh)
plat=manylinux_${floor/./_}_$arch
case "$floor" in
  2.17) plat=$plat.manylinux2014_$arch ;;
  2.12) plat=$plat.manylinux2010_$arch ;;
esac
want=$(sed -n 's/^version = "\(.*\)"/\1/p' python/pyproject.toml)
if [ "$arch" = "$(uname -m)" ]; then
  got=$("$tmp/packer" --version | awk '{print $2}')
  if [ "$got" != "$want" ]; then
    echo "build-wheel: packer --version says $got but python/pyproject.toml says $want: make them agree" >&2
    exit 1
  fi
fi
# The reader's hardware CRC-32C (plain C, only glibc's libc), for the same floor.
bash scripts/build-crc.sh "$tmp/libpackercrc.so" "$arch"
bash scripts/check-glibc.sh "$tmp/packer" "$tmp/libpackercrc.so" >/dev/null
/usr/bin/python3 scripts/make_wheel.py "$tmp/packer" "$plat" "$out" "$tmp/libpackercrc.so"
