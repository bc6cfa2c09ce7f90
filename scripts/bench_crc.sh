#!/usr/bin/env bash
# Cost of the default record CRC-32C check in the Python and Go readers (warm page cache,
# CRC on vs off, best of --repeat), after every CRC-32C backend's GB/s (packer-hw, packer-c, crc32c,
# google_crc32c, numpy); --rates-only, --epochs (first epoch vs dd) and --backend NAME: see
# scripts/bench_crc.py.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/packer ./cmd/packer
exec "${PY:-/usr/bin/python3}" scripts/bench_crc.py "$@"
