#!/usr/bin/env bash
# Assembles the checked-in PTX (gpu/kernels/resize.ptx) into machine code for sm_80 (A100 and
# the other 8.x GPUs) and sm_90 (H100/H200) with ptxas, the PTX assembler scripts/setup.sh
# fetches. The cubins are checked in and embedded next to the PTX (gpu/ptx.go); Open loads
# the one for the device's compute capability first, so a node whose driver cannot JIT PTX
# still runs. TestCubinsUpToDate reassembles them and fails if the checked-in copies differ,
# so run this (or `go generate ./gpu`) after every change to resize.ptx:
#
#   gpu/kernels/build-cubin.sh          # rewrites gpu/kernels/resize_sm80.cubin, resize_sm90.cubin
#   gpu/kernels/build-cubin.sh DIR      # writes them into DIR instead
#
# ptxas is $PACKER_PTXAS, else ptxas on $PATH, else the copy scripts/setup.sh puts in the cache.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here}"
PTXAS="${PACKER_PTXAS:-}"
if [ -z "$PTXAS" ]; then
  PTXAS="$(command -v ptxas || true)"
fi
if [ -z "$PTXAS" ]; then
  PTXAS="$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/packer/ptxas-*/ptxas 2>/dev/null | sort -V | tail -n 1 || true)"
fi
if [ -z "$PTXAS" ] || [ ! -x "$PTXAS" ]; then
  echo "build-cubin: ptxas not found (set PACKER_PTXAS or run scripts/setup.sh)" >&2
  exit 1
fi
for arch in 80 90; do
  "$PTXAS" -arch=sm_$arch -O3 -o "$out/resize_sm$arch.cubin" "$here/resize.ptx"
done
