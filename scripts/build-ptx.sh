#!/usr/bin/env bash
# Compiles packer's CUDA kernels (gpu/kernels/resize.cu + resize_body.h) to PTX with Debian's
# clang-14 alone: no CUDA toolkit, headers or libraries. The PTX is checked in and embedded in
# the binary (gpu/ptx.go); the Go test TestPTXUpToDate rebuilds it with this script and fails
# if the checked-in copy differs, so run this after every change to the kernels:
#
#   scripts/build-ptx.sh            # rewrites gpu/kernels/resize.ptx
#   scripts/build-ptx.sh OUT.ptx    # writes elsewhere (the test uses a temporary file)
#
# sm_52 with PTX ISA 4.1 (what clang-14 emits for it) is old enough that every current GPU's
# driver JIT-compiles it (the driver JITs PTX for any newer architecture). The output is
# deterministic: no paths, dates or host details go into it. -ffp-contract=off keeps the
# compiler from fusing a multiply and an add into an FMA (the kernels are integer-only today;
# this keeps any future float operation rounding like the CPU reference).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/gpu/kernels/resize.ptx}"
CLANG="${CLANG:-clang-14}"
if ! command -v "$CLANG" >/dev/null 2>&1; then
  echo "build-ptx: $CLANG not found (apt-get install clang-14)" >&2
  exit 1
fi
tmp="$(mktemp "${TMPDIR:-/tmp}/packer-ptx.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
# Compile from inside the kernels directory with relative names, so no absolute path can leak.
(cd "$root/gpu/kernels" && "$CLANG" -x cuda --cuda-device-only -nocudainc -nocudalib \
  --cuda-gpu-arch=sm_52 -O3 -ffp-contract=off -fno-ident -S -o "$tmp" resize.cu)
chmod 644 "$tmp"
mv "$tmp" "$out"
trap - EXIT
