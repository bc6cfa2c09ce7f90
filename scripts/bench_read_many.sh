#!/usr/bin/env bash
# Random-access batches (ds.read_many) against the sequential iterator and h5py fancy indexing,
# warm and cold: see scripts/bench_read_many.py for the options. Needs bin/packer (go build -o
# bin/packer ./cmd/packer) and h5py.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PY:-/usr/bin/python3}" scripts/bench_read_many.py "$@"
