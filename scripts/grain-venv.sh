#!/usr/bin/env bash
# Creates (once) the venv Grain and JAX (CPU) run in for packer_reader.grain's tests and
# benchmark, and prints its Python. The packages are pinned in python/tests/grain-requirements.txt
# and installed from PyPI with --no-deps (the file lists every one), wheels only, into a venv of
# their own (not over Debian's NumPy: JAX needs a newer one), kept in the cache folder under a
# name that changes with the file. A fresh install took 13 s in one run here and 69 s in another
# (the download's speed) and takes 650 MB, jaxlib most of it; later calls only check that the
# venv imports them (about 4 s).
#
#   PY=$(bash scripts/grain-venv.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
req=python/tests/grain-requirements.txt
sum=$(sha256sum "$req" | cut -c1-12)
venv="${XDG_CACHE_HOME:-$HOME/.cache}/packer/grain-venv-$sum"
if ! "$venv/bin/python" -c "import grain, jax" >/dev/null 2>&1; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv" >&2
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: -r "$req" >&2 ||
    ! "$venv/bin/python" -c "import grain, jax" >&2; then
    rm -rf "$venv"
    echo "grain-venv: could not install Grain and JAX ($req) from PyPI" >&2
    exit 1
  fi
fi
echo "$venv/bin/python"
