#!/usr/bin/env bash
# Cost of the default record CRC-32C check in the Python and Go readers (warm page cache,
# CRC on vs off, best of --repeat); see scripts/bench_crc.py for the options.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/packer ./cmd/packer
exec "${PY:-/usr/bin/python3}" scripts/bench_crc.py "$@"
