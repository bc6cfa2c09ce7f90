#!/usr/bin/env bash
# Compiles packer_reader's hardware CRC-32C (python/packer_reader/_crc32c_hw.c) and its O_DIRECT
# batch reads through Linux native asynchronous I/O (python/packer_reader/_direct_aio.c), plain C
# loaded with ctypes, into one shared library: by default python/packer_reader/_lib/libpackercrc.so,
# where the reader finds it in the source tree (scripts/setup.sh); scripts/build-wheel.sh passes
# its own output path. Rebuilt only when a .c is newer. Without gcc it says so and exits 0: the
# reader then falls back to the crc32c module or NumPy, and to a thread pool for O_DIRECT reads
# (a compiler is never required).
#
#   bash scripts/build-crc.sh [OUT.so [ARCH]]
#
# With ARCH (x86_64 or aarch64; scripts/build-wheel.sh) it is compiled by the release's toolchain
# for the glibc 2.17 floor (scripts/glibc-floor-env.sh) instead of the host's gcc, always.
set -euo pipefail
cd "$(dirname "$0")/.."
src=python/packer_reader/_crc32c_hw.c
src2=python/packer_reader/_direct_aio.c
out=${1:-python/packer_reader/_lib/libpackercrc.so}
arch=${2:-}
if [ -n "$arch" ]; then
  cc=$(bash scripts/glibc-floor-env.sh "$arch" | sed -n 's/^export CC="\(.*\)"$/\1/p')
  mkdir -p "$(dirname "$out")"
  $cc -O2 -fPIC -shared -Wall -Wextra -Wl,--as-needed -o "$out.tmp" "$src" "$src2"
  mv -f "$out.tmp" "$out"
  exit 0
fi
if ! command -v gcc >/dev/null 2>&1; then
  echo "build-crc: no gcc; packer_reader uses its fallback CRC-32C" >&2
  exit 0
fi
if [ -f "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "$src2" ]; then
  exit 0
fi
mkdir -p "$(dirname "$out")"
gcc -O2 -fPIC -shared -Wall -Wextra -o "$out.tmp" "$src" "$src2"
mv -f "$out.tmp" "$out"
