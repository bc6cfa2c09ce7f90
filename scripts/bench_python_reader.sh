#!/usr/bin/env bash
# Full-pass throughput of the Python reader (packer_reader) against dd on the same files.
# See scripts/bench_python_reader.py for the options:
#   scripts/bench_python_reader.sh [DIR] [--gb 2] [--batch 256] [--prefetch 1 0] [--repeat 3] [--torch-workers 0 2]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PY:-/usr/bin/python3}" scripts/bench_python_reader.py "$@"
