#!/usr/bin/env bash
# packer_reader.grain.Source under Grain against packer's own iterators (warm): see
# scripts/bench_grain.py. Runs in the Grain venv (scripts/grain-venv.sh); needs bin/packer.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/grain-venv.sh)
exec "$PY" scripts/bench_grain.py "$@"
