#!/usr/bin/env bash
# Proves the release's glibc floor where users are: builds both wheels (scripts/build-wheel.sh,
# x86_64 and aarch64; each carries the release binary) and then
#
#   1. scripts/check-glibc.sh on every ELF file in both wheels: no glibc symbol version newer than
#      2.28, no library other than glibc's own;
#   2. in a minimal Debian 11 (bullseye, glibc 2.31) x86-64 root, under chroot with an empty
#      environment: the binary builds a small folder of JPEG and PNG images, verifies and inspects
#      it, and the output is byte-identical to the same binary's build on this host; then
#      `pip install` of the x86_64 wheel into a venv of the root's own Python 3.9 (pip 20.3, which
#      must accept the manylinux_2_28 tag), the wheel's `packer` builds the same dataset and
#      packer_reader reads it back (records, classes, pixels, its own CRC-32C library);
#   3. the aarch64 binary (from the aarch64 wheel) under qemu user emulation (qemu-aarch64-static,
#      Debian's qemu-user-static) with the C library of a Debian 11 arm64 root (-L): the same
#      build, verify and inspect, byte-identical to the x86-64 build.
#
# A Debian 10 (glibc 2.28) root is not part of it: Debian 10's packages have left
# deb.debian.org for archive.debian.org, which the test machines cannot reach. The floor itself
# is what the wheels' files are checked against (1), and the toolchain links against 2.28's
# symbol versions (scripts/glibc-floor-env.sh).
#
# The two roots are made once with debootstrap (the x86-64 one with python3 and python3-venv, and
# NumPy's wheel from PyPI installed into its /venv; the arm64 one only unpacked, --foreign, for its
# libraries) and cached as tarballs under ${XDG_CACHE_HOME:-~/.cache}/packer/; later runs only
# unpack them. Needs root (or sudo) for debootstrap and chroot, /usr/bin/python3 with Pillow.
#
#   bash scripts/test-glibc.sh
#   PACKER_DEBIAN_MIRROR=http://mirror.example/debian bash scripts/test-glibc.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
mirror=${PACKER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache_dir=${XDG_CACHE_HOME:-$HOME/.cache}/packer
NUMPY=numpy==1.26.4  # the newest NumPy with wheels for Debian 11's Python 3.9

tmp=$(mktemp -d)
root=$tmp/root11
aroot=$tmp/root11-arm64
proc_mounted=
cleanup() {
  # Only the /proc mounted here, by its flag: the arm64 root's proc is a link to the host's /proc.
  if [ -n "$proc_mounted" ]; then $SUDO umount "$root/proc" || $SUDO umount -l "$root/proc"; fi
  if ! grep -q " $tmp/" /proc/mounts; then rm -rf --one-file-system "$tmp" 2>/dev/null || $SUDO rm -rf --one-file-system "$tmp"; fi
}
trap cleanup EXIT
fail() { echo "test-glibc: FAILED: $*" >&2; exit 1; }

# unpack_root DIR TARBALL SETUP...: unpacks TARBALL into DIR, or first makes it by running
# SETUP... (a function that fills DIR) and packs DIR into TARBALL.
unpack_root() {
  local dir=$1 tarball=$2 t0
  shift 2
  mkdir -p "$dir"
  if [ -s "$tarball" ]; then
    $SUDO tar -C "$dir" --numeric-owner -xzpf "$tarball"
    return
  fi
  if ! command -v debootstrap >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends debootstrap >/dev/null
  fi
  t0=$(date +%s)
  "$@" "$dir"
  echo "test-glibc: made $(basename "$tarball") in $(($(date +%s) - t0)) s (once; cached)"
  $SUDO rm -rf "$dir/var/cache/apt/archives"/*.deb "$dir/var/lib/apt/lists"/* "$dir/root/.cache" 2>/dev/null || true
  mkdir -p "$cache_dir"
  $SUDO tar -C "$dir" --numeric-owner -czf "$tmp/rootfs.tar.gz" .
  $SUDO chown "$(id -u):$(id -g)" "$tmp/rootfs.tar.gz"
  mv -f "$tmp/rootfs.tar.gz" "$tarball"
}
debootstrap_log() {
  $SUDO debootstrap "$@" >"$tmp/debootstrap.log" 2>&1 || { tail -20 "$tmp/debootstrap.log" >&2; fail "debootstrap $*"; }
}
make_root11() {
  debootstrap_log --variant=minbase --include=python3,python3-venv bullseye "$1" "$mirror"
  # NumPy's wheel for Python 3.9 is downloaded by this host's pip (the root has no CA roots and
  # no network set up) and installed from the file.
  /usr/bin/python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --python-version 39 -d "$tmp/numpy" "$NUMPY" || fail "pip download $NUMPY"
  $SUDO cp "$tmp"/numpy/*.whl "$1/"
  $SUDO chroot "$1" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root sh -c \
    "python3 -m venv /venv && /venv/bin/pip install -q --no-index --disable-pip-version-check /numpy-*.whl && rm /numpy-*.whl" ||
    fail "python3 -m venv /venv; pip install $NUMPY in the Debian 11 root"
}
make_root11_arm64() {
  debootstrap_log --foreign --arch=arm64 --variant=minbase bullseye "$1" "$mirror"
}

# 1. The wheels, and every ELF file in them against the floor.
for arch in x86_64 aarch64; do
  bash scripts/build-wheel.sh "$tmp/dist" "$arch" >/dev/null
  mkdir -p "$tmp/whl-$arch"
  /usr/bin/python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
    "$tmp"/dist/packer_reader-*_"$arch".whl "$tmp/whl-$arch"
  elves=$(find "$tmp/whl-$arch" -type f -exec sh -c 'head -c 4 "$1" | grep -q "^.ELF"' _ {} \; -print)
  [ "$(echo "$elves" | wc -l)" = 2 ] || fail "want 2 ELF files (packer, libpackercrc.so) in the $arch wheel, got: $elves"
  # shellcheck disable=SC2086
  bash scripts/check-glibc.sh $elves | sed "s|$tmp/whl-$arch/|$arch wheel: |"
done
wheel=$(ls "$tmp"/dist/packer_reader-*-manylinux_2_28_x86_64.whl)
bin=$(ls "$tmp"/whl-x86_64/*.data/scripts/packer)
abin=$(ls "$tmp"/whl-aarch64/*.data/scripts/packer)
chmod +x "$bin" "$abin"

# Images: 3 classes, JPEG and PNG, RGB and grayscale, odd sizes.
/usr/bin/python3 - "$tmp/imgs" <<'PYEOF'
import os, sys
from PIL import Image
for c, name in enumerate(["owl", "fox", "elk"]):
    os.makedirs(os.path.join(sys.argv[1], name))
    for j in range(3):
        w, h = 41 + 9 * j + c, 37 + 5 * c
        im = Image.frombytes("RGB", (w, h), bytes((x * 11 + y * 5 + 60 * c + 20 * j + ch * 85) % 256
                                                  for y in range(h) for x in range(w) for ch in range(3)))
        path = os.path.join(sys.argv[1], name, "%02d" % j)
        if j == 1:
            im.convert("L").save(path + ".png")
        else:
            im.save(path + (".jpg" if j == 0 else ".png"), **({"quality": 85} if j == 0 else {}))
PYEOF
"$bin" build "$tmp/imgs" -o "$tmp/host" --resize 32 --crop 32 >/dev/null 2>&1 || fail "the release binary's build on this host"

# same_tree A B WHAT: every file of A is in B with the same bytes.
same_tree() {
  local n=0 f
  while read -r f; do
    $SUDO cmp -s "$1/$f" "$2/$f" || fail "$3: $f differs from this host's build"
    n=$((n + 1))
  done < <(cd "$1" && find . -type f | sort)
  [ "$n" -gt 0 ] || fail "$3: the host's build wrote nothing"
}
# steps RUN SRC DIR: build SRC into DIR, verify and inspect it, with the command RUN (a prefix).
steps() {
  local run=$1 src=$2 dir=$3
  $run build "$src" -o "$dir" --resize 32 --crop 32 >"$tmp/out.log" 2>&1 || { cat "$tmp/out.log"; fail "$run build"; }
  tail -2 "$tmp/out.log" | sed 's/^/  /'
  $run verify "$dir" >"$tmp/out.log" 2>&1 || { cat "$tmp/out.log"; fail "$run verify"; }
  grep -q '9 records' "$tmp/out.log" || { cat "$tmp/out.log"; fail "$run verify: want 9 records"; }
  sed 's/^/  /' "$tmp/out.log"
  $run inspect "$dir" >"$tmp/out.log" 2>&1 || { cat "$tmp/out.log"; fail "$run inspect"; }
  grep -q '^records *9$' "$tmp/out.log" || { cat "$tmp/out.log"; fail "$run inspect: want records 9"; }
  grep -q 'classes (3)' "$tmp/out.log" || { cat "$tmp/out.log"; fail "$run inspect: want 3 classes"; }
}

# 2. Debian 11, x86-64: the binary, then the wheel.
unpack_root "$root" "$cache_dir/rootfs-bullseye-minbase-py-amd64-1.tar.gz" make_root11
$SUDO cp "$bin" "$root/packer"
$SUDO cp "$wheel" "$root/"
$SUDO cp -r "$tmp/imgs" "$root/imgs"
[ -d "$root/proc" ] && [ ! -L "$root/proc" ] || fail "$root/proc is not a folder"
$SUDO mount -t proc proc "$root/proc"
proc_mounted=1
in11() { $SUDO env -i PATH=/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$root" "$@"; }
echo "test-glibc: Debian 11 x86-64 root: $(in11 ldd --version | head -1)"
in11 ldd /packer >"$tmp/out.log" 2>&1 || { cat "$tmp/out.log"; fail "ldd /packer in the Debian 11 root"; }
! grep -q 'not found' "$tmp/out.log" || { cat "$tmp/out.log"; fail "a library is missing in the Debian 11 root"; }
echo "test-glibc: Debian 11: /packer build, verify, inspect"
steps "in11 /packer" /imgs /out
same_tree "$tmp/host" "$root/out" "Debian 11: /out"
echo "test-glibc: Debian 11: pip install $(basename "$wheel") (the root's pip $(in11 /venv/bin/pip --version | awk '{print $2}'))"
in11 /venv/bin/pip install -q --no-index --disable-pip-version-check "/$(basename "$wheel")" >"$tmp/out.log" 2>&1 ||
  { cat "$tmp/out.log"; fail "pip install of the wheel in the Debian 11 root"; }
[ "$(in11 sh -c 'command -v packer')" = /venv/bin/packer ] || fail "Debian 11: packer is not the venv's"
echo "test-glibc: Debian 11: the wheel's packer build, verify, inspect; packer_reader reads it back"
steps "in11 packer" /imgs /out-wheel
same_tree "$tmp/host" "$root/out-wheel" "Debian 11: /out-wheel"
in11 /venv/bin/python - /out-wheel <<'PYEOF' || fail "Debian 11: packer_reader read-back"
import sys
import numpy as np
import packer_reader
from packer_reader import _crc32c
assert packer_reader.__file__.startswith("/venv/"), packer_reader.__file__
ds = packer_reader.open(sys.argv[1])
assert len(ds) == 9 and ds.classes == ["elk", "fox", "owl"], (len(ds), ds.classes)
assert np.bincount(ds.labels).tolist() == [3, 3, 3]
img, _ = ds[0]
assert img.shape == (32, 32, 3) and img.dtype == np.uint8 and img.any(), (img.shape, img.dtype)
assert sum(len(y) for _, y in ds.batches(4, shuffle=True, seed=2)) == 9
assert packer_reader.verify(sys.argv[1]).ok
assert _crc32c.BACKEND in ("packer-hw", "packer-c") and _crc32c._LIB.startswith("/venv/"), (_crc32c.BACKEND, _crc32c._LIB)
print("  read back %d records %s, CRC-32C %s, NumPy %s" % (len(ds), list(img.shape), _crc32c.BACKEND, np.__version__))
PYEOF

# 3. aarch64 under qemu user emulation, with Debian 11 arm64's C library.
if ! command -v qemu-aarch64-static >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends qemu-user-static >/dev/null
fi
unpack_root "$aroot" "$cache_dir/rootfs-bullseye-foreign-arm64-1.tar.gz" make_root11_arm64
qemu() { qemu-aarch64-static -L "$aroot" "$abin" "$@"; }
echo "test-glibc: aarch64 (qemu-aarch64-static, Debian 11 arm64's glibc $(basename "$(readlink "$aroot/lib/aarch64-linux-gnu/libc.so.6")")): $(qemu --version)"
steps qemu "$tmp/imgs" "$tmp/out-arm64"
same_tree "$tmp/host" "$tmp/out-arm64" "aarch64 under qemu"
echo "test-glibc: ok (x86-64 in Debian 11 and aarch64 under qemu: byte-identical to this host's build; $(($(date +%s) - start)) s)"
