#!/usr/bin/env bash
# Cold shuffled passes (O_DIRECT) against fio random reads at the same queue depth, and the
# cost of the checksum blocks in a cold shuffled epoch (scripts/bench_cold.py). Needs fio
# (Debian: apt-get install fio).
#   scripts/bench_cold.sh [--gb 1] [--cifar-records 100000] [--repeat 2] [--depth 8] [--no-go] [--no-python]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PY:-/usr/bin/python3}" scripts/bench_cold.py "$@"
