#!/usr/bin/env bash
# Installs the wheel from scripts/build-wheel.sh into a fresh, clean virtual environment (no
# system site-packages: NumPy comes from the package index as the wheel's one requirement), then
# checks the metadata as a package index would (twine check and more, below), then the installed
# `packer` command and reader end to end: packer --version, a small build of
# a folder of images, and packer_reader reading it back from the venv's Python with the wheel's
# hardware CRC-32C library (BACKEND packer-hw on x86-64).
#
#   bash scripts/test-wheel.sh [WHEEL]    # default: builds one into a temporary folder
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
wheel=${1:-}
if [ -z "$wheel" ]; then
  bash scripts/build-wheel.sh "$tmp/dist" >/dev/null
  wheel=$(ls "$tmp"/dist/*.whl)
fi
case "$(basename "$wheel")" in
  *-py3-none-any.whl) echo "test-wheel: FAILED: $wheel is tagged any, but it carries a native binary"; exit 1 ;;
esac

/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
export PATH="$tmp/venv/bin:$PATH"
hash -r
[ "$(command -v packer)" = "$tmp/venv/bin/packer" ] || { echo "test-wheel: FAILED: packer is not the venv's"; exit 1; }
# The command is the binary itself (the wheel's script), not a Python launcher in front of it.
[ "$(head -c 4 "$tmp/venv/bin/packer" | od -An -c | tr -d ' ')" = "177ELF" ] || { echo "test-wheel: FAILED: bin/packer is not the binary"; exit 1; }
# The installed metadata lists what python/pyproject.toml lists (its one source), every extra.
"$tmp/venv/bin/python" - "$PWD/python/pyproject.toml" <<'PYEOF'
import sys, tomllib
from importlib.metadata import metadata
proj = tomllib.load(open(sys.argv[1], "rb"))["project"]
md = metadata("packer_reader")
want = set(proj["dependencies"]) | {'%s; extra == "%s"' % (d, e) for e, ds in proj["optional-dependencies"].items() for d in ds}
assert set(md.get_all("Requires-Dist")) == want, (md.get_all("Requires-Dist"), want)
assert set(md.get_all("Provides-Extra")) == set(proj["optional-dependencies"]), md.get_all("Provides-Extra")
assert md["Version"] == proj["version"]
PYEOF
# The documented extras resolve (s3: boto3, hdf5: h5py, crc: crc32c; torch is the multi-gigabyte
# CUDA build on PyPI: its line is checked in METADATA above, not downloaded).
"$tmp/venv/bin/python" -m pip install --dry-run --quiet --disable-pip-version-check --report "$tmp/extras.json" "$wheel[s3,hdf5,crc]" >/dev/null
"$tmp/venv/bin/python" - "$tmp/extras.json" <<'PYEOF'
import json, sys
names = {i["metadata"]["name"].lower() for i in json.load(open(sys.argv[1]))["install"]}
missing = {"boto3", "h5py", "crc32c"} - names
assert not missing, "extras did not resolve: %s (resolved %s)" % (missing, sorted(names))
PYEOF
# What a package index checks before it accepts the wheel: twine check --strict (the metadata
# fields, the long description renders as the Markdown it says it is), every classifier a known
# trove classifier (PyPI refuses others), project URLs, and the license: the repository has no
# licence file and pyproject.toml names none, so the wheel must declare none (an index then
# shows no license); a licence file requires License-Expression and the file in the wheel.
# Pinned, in a venv of their own (cached) so that they add nothing to the wheel's venv.
tv=${XDG_CACHE_HOME:-$HOME/.cache}/packer/twine-venv-7.0.0
if ! "$tv/bin/twine" --version >/dev/null 2>&1; then
  rm -rf "$tv"
  /usr/bin/python3 -m venv "$tv"
  "$tv/bin/pip" install --quiet --disable-pip-version-check "twine==7.0.0" "trove-classifiers==2026.9.21.13"
fi
"$tv/bin/twine" check --strict "$wheel"
"$tv/bin/python" - "$wheel" "$PWD" <<'PYEOF'
import email.parser, os, sys, zipfile
from trove_classifiers import classifiers as known
wheel, root = sys.argv[1:3]
z = zipfile.ZipFile(wheel)
md = email.parser.Parser().parsestr(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())
cls = md.get_all("Classifier") or []
assert cls, "no classifiers"
unknown = [c for c in cls if c not in known]
assert not unknown, "classifiers an index refuses: %s" % unknown
urls = dict(u.split(", ", 1) for u in md.get_all("Project-URL") or [])
assert {"Homepage", "Source", "Issues"} <= set(urls) and all(u.startswith("https://") for u in urls.values()), urls
assert md["Summary"] and "\n" not in md["Summary"], md["Summary"]
assert md["Description-Content-Type"] == "text/markdown" and len(md.get_payload()) > 1000
lic = sorted(n for n in os.listdir(root) if n.upper().startswith(("LICENSE", "LICENCE", "COPYING")))
declared = [k for k in ("License", "License-Expression", "License-File") if md[k]]
if lic:
    assert md["License-Expression"] and md.get_all("License-File") == lic, (lic, declared)
    print("test-wheel: license %s (%s)" % (md["License-Expression"], ", ".join(lic)))
else:
    assert not declared and not [c for c in cls if c.startswith("License ::")], declared
    print("test-wheel: no licence file in the repository and none chosen: the wheel declares no license (an index shows none)")
print("test-wheel: metadata an index accepts: twine check --strict, %d known classifiers, %d project URLs" % (len(cls), len(urls)))
PYEOF
version=$(packer --version)
echo "test-wheel: $version"
[ "$version" = "packer $(sed -n 's/^version = "\(.*\)"/\1/p' python/pyproject.toml)" ]
# The cluster scripts come with the wheel's command (packer cluster), the repository's bytes.
for f in submit.sh build-parts.sbatch merge.sbatch; do
  packer cluster slurm "$f" | cmp -s - "scripts/slurm/$f" || { echo "test-wheel: FAILED: the wheel's packer cluster slurm $f is not scripts/slurm/$f"; exit 1; }
done

# A folder of 12 images in 3 classes, written by the venv's Python (stdlib zlib + PNG chunks).
"$tmp/venv/bin/python" - "$tmp/images" <<'PYEOF'
import os, struct, sys, zlib
def png(path, w, h, seed):
    rows = b"".join(b"\0" + bytes((x * 7 + y * 3 + seed * 40 + c) % 256 for x in range(w) for c in range(3))
                    for y in range(h))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
for k, cls in enumerate(["ant", "bee", "cow"]):
    os.makedirs(os.path.join(sys.argv[1], cls))
    for i in range(4):
        png(os.path.join(sys.argv[1], cls, "%d.png" % i), 16, 12, k * 4 + i)
PYEOF
packer build "$tmp/images" -o "$tmp/out" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
packer verify "$tmp/out" >/dev/null

cd "$tmp"  # away from the checkout, so the installed package is the one imported
"$tmp/venv/bin/python" - "$tmp/out" "$tmp/venv" <<'PYEOF'
import sys
import numpy as np
import packer_reader
assert packer_reader.__file__.startswith(sys.argv[2]), packer_reader.__file__
ds = packer_reader.open(sys.argv[1])
assert len(ds) == 12 and ds.classes == ["ant", "bee", "cow"], (len(ds), ds.classes)
assert np.bincount(ds.labels).tolist() == [4, 4, 4]
img, label = ds[0]
assert img.shape == (12, 16, 3) and img.dtype == np.uint8, (img.shape, img.dtype)
n = sum(len(y) for _, y in ds.batches(5, shuffle=True, seed=1))
assert n == 12 and packer_reader.verify(sys.argv[1]).ok
import os
from packer_reader import _crc32c  # the wheel's own CRC-32C library, not a fallback
want = "packer-hw" if os.uname().machine == "x86_64" else "packer-c"
assert _crc32c.BACKEND == want and _crc32c._LIB.startswith(sys.argv[2]), (_crc32c.BACKEND, _crc32c._LIB)
print("test-wheel: read back %d records of %s from %s (CRC-32C: %s)" % (len(ds), list(img.shape), sys.argv[1], _crc32c.BACKEND))
PYEOF
echo "test-wheel: ok ($(basename "$wheel"))"
