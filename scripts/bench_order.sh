#!/usr/bin/env bash
# Shuffled passes, reading order v2 against v1, side by side (scripts/bench_order.py):
#   scripts/bench_order.sh [--gb 1] [--cifar-records 100000] [--repeat 3] [--batch 256]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PY:-/usr/bin/python3}" scripts/bench_order.py "$@"
