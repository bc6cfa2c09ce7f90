#!/usr/bin/env bash
# Proves the release's glibc floor, glibc 2.17 (manylinux2014), where users are: builds both
# wheels (scripts/build-wheel.sh, x86_64 and aarch64; each carries the release binary) and then
#
#   1. scripts/check-glibc.sh on every ELF file in both wheels: no glibc symbol version newer than
#      2.17, no library other than glibc's own; and the wheels' tags, the floor's two names;
#   2. in minimal x86-64 roots of Debian 11 (bullseye, glibc 2.31, pip 20.3.4) and Ubuntu 20.04
#      (focal, glibc 2.31, pip 20.0.2), under chroot with an empty environment: the binary builds
#      a small folder of JPEG and PNG images, verifies and inspects it, and the output is
#      byte-identical to the same binary's build on this host; then one `pip install` of the
#      x86_64 wheel with the root's own pip, into a venv of the root's own Python (3.9, 3.8), the
#      wheel's `packer` builds the same dataset and packer_reader reads it back (records,
#      classes, pixels, its own CRC-32C library). Ubuntu's pip 20.0.2 predates the manylinux_2_17
#      name (pip 20.3) and installs the wheel by its manylinux2014 name: the same wheel without
#      that name must be refused there;
#   3. the aarch64 wheel, installed by Debian 11 arm64's own pip 20.3.4 running under qemu user
#      emulation (qemu-aarch64-static, Debian's qemu-user-static, with the files of an unpacked
#      Debian 11 arm64 root, -L; no binfmt_misc), one `pip install --target`, NumPy's aarch64
#      wheel with it; that pip must refuse the x86_64 wheel. Then, under the same emulation, its
#      packer binary's build, verify and inspect, byte-identical to the x86-64 build, and
#      packer_reader's read-back with the root's Python 3.9 (the wheel's CRC-32C library);
#      and the aarch64 container image (scripts/build-oci.sh) of that binary: reproducible (two
#      builds, one digest), pulled by podman as linux/arm64, and its packer's build, verify and
#      inspect under qemu with the image's own files, byte-identical;
#   4. only with PACKER_GLIBC_OLD=1 (or PACKER_GLIBC_UBUNTU=1, its old name): the binary in
#      Ubuntu 18.04 (glibc 2.27) and Ubuntu 16.04 (glibc 2.23), roots below the old 2.28 floor.
#      The wheel is not installed there: their Pythons (3.6, 3.5) are older than the reader's 3.8.
#
# PACKER_GLIBC_SKIP_UBUNTU=1 leaves out every Ubuntu root, for a machine that does not reach
# Ubuntu's archive (PACKER_UBUNTU_MIRROR); Debian packages no Ubuntu archive key, so those roots
# are made without a GPG check. No root of glibc 2.17 to 2.22 is part of it (CentOS 7's and RHEL
# 7's packages, and Debian 8's, are on servers the test machines do not reach): the floor is what
# every ELF file of the wheels is checked against (1), the toolchain links against 2.17's symbol
# versions (scripts/glibc-floor-env.sh), and the oldest glibc run is 2.31 (2.23 with (4)).
#
# The roots are made once with debootstrap (the x86-64 ones with python3 and python3-venv, and
# NumPy's wheel from PyPI installed into their /venv; the arm64 one only unpacked, --foreign, with
# python3 and python3-pip, and NumPy's aarch64 wheel beside it) and cached as tarballs under
# ${XDG_CACHE_HOME:-~/.cache}/packer/; later runs only unpack them. Needs root (or sudo) for
# debootstrap, chroot and podman, /usr/bin/python3 with Pillow; debootstrap, qemu-user-static,
# podman and runc are installed with apt-get when missing. Time on a shared 2-core machine: 60 s
# to 4 minutes with the roots cached, by load (Ubuntu 20.04 5-33 s of it, aarch64 42-174 s);
# making the roots adds about 105 s (Ubuntu 20.04), 25 s (Debian 11 arm64) and Debian 11's.
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
ubuntu_mirror=${PACKER_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}

# podman names an image pulled from oci:PATH after PATH, which must then be lowercase.
tmp=$(mktemp -d)
if [ "$(tr '[:upper:]' '[:lower:]' <<<"$tmp")" != "$tmp" ]; then
  low=$(tr '[:upper:]' '[:lower:]' <<<"$tmp")
  mkdir "$low"
  rmdir "$tmp"
  tmp=$low
fi
aroot=$tmp/root11-arm64
store=$tmp/podman
pm=($SUDO podman --root "$store/root" --runroot "$store/run" --runtime runc --cgroup-manager cgroupfs --events-backend none)
mounted=()
cleanup() {
  # Only the /proc mounts made here, by name: the arm64 root's proc is a link to the host's /proc.
  local m
  for m in "${mounted[@]}"; do $SUDO umount "$m" || $SUDO umount -l "$m"; done
  if [ -d "$store" ]; then "${pm[@]}" system reset -f >/dev/null 2>&1 || true; fi
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
# make_pyroot PYVER PIN... -- DIR SUITE MIRROR [DEBOOTSTRAP_OPTION...]: a minimal root with python3 and
# python3-venv, a venv /venv with the pinned NumPy (PIN...; the first is NumPy) installed, and
# PIN... kept as wheels in /wheels. The wheels are downloaded by this host's pip (the root has no
# CA roots and no network set up) and installed from the files.
make_pyroot() {
  local pyver=$1 pins=() dir
  shift
  while [ "$1" != -- ]; do pins+=("$1"); shift; done
  shift
  dir=$1
  debootstrap_log --variant=minbase --include=python3,python3-venv "${@:4}" "$2" "$dir" "$3"
  /usr/bin/python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --python-version "$pyver" -d "$tmp/wheels-$pyver" "${pins[@]}" || fail "pip download ${pins[*]}"
  $SUDO mkdir -p "$dir/wheels"
  $SUDO cp "$tmp/wheels-$pyver"/*.whl "$dir/wheels/"
  $SUDO chroot "$dir" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root sh -c \
    "python3 -m venv /venv && /venv/bin/pip install -q --no-index --disable-pip-version-check /wheels/numpy-*.whl" ||
    fail "python3 -m venv /venv; pip install ${pins[0]} in the root"
}
# Debian 11: Python 3.9, NumPy 1.26.4 (the newest with wheels for 3.9).
make_root11() { make_pyroot 39 numpy==1.26.4 -- "$1" bullseye "$mirror"; }
# Ubuntu 20.04: Python 3.8, NumPy 1.24.4 (the newest for 3.8). Ubuntu's archive key is not
# packaged in Debian: no GPG check.
make_root20() { make_pyroot 38 numpy==1.24.4 -- "$1" focal "$ubuntu_mirror" --components=main,universe --no-check-gpg; }
make_root18() { debootstrap_log --variant=minbase --no-check-gpg bionic "$1" "$ubuntu_mirror"; }
make_root16() { debootstrap_log --variant=minbase --no-check-gpg xenial "$1" "$ubuntu_mirror"; }
# Debian 11 arm64, unpacked only (--foreign downloads python3, python3-pip and their libraries
# beside the base, dpkg-deb unpacks them; nothing is configured: qemu -L needs only the files),
# and NumPy's aarch64 wheel in /wheels.
make_root11_arm64() {
  local deb
  debootstrap_log --foreign --arch=arm64 --variant=minbase --include=python3,python3-pip bullseye "$1" "$mirror"
  for deb in "$1"/var/cache/apt/archives/*.deb; do $SUDO dpkg-deb -x "$deb" "$1"; done
  [ -x "$1/usr/bin/python3.9" ] && [ -d "$1/usr/lib/python3/dist-packages/pip" ] || fail "no python3.9 and pip in the unpacked arm64 root"
  /usr/bin/python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2014_aarch64 --python-version 39 -d "$tmp/wheels-arm64" numpy==1.26.4 || fail "pip download numpy (aarch64)"
  $SUDO mkdir -p "$1/wheels"
  $SUDO cp "$tmp"/wheels-arm64/*.whl "$1/wheels/"
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
  # The floor's two names, manylinux_2_17 (PEP 600, pip 20.3) and manylinux2014 (PEP 599, pip
  # 19.3), in the file name and in WHEEL.
  tags=$(sed -n 's/^Tag: //p' "$tmp/whl-$arch"/*.dist-info/WHEEL | tr '\n' ' ')
  [ "$tags" = "py3-none-manylinux_2_17_$arch py3-none-manylinux2014_$arch " ] || fail "the $arch wheel's tags: $tags"
  ls "$tmp"/dist/packer_reader-*-py3-none-manylinux_2_17_"$arch".manylinux2014_"$arch".whl >/dev/null || fail "the $arch wheel's file name"
done
# The check can fail: a program built by this host's gcc against Debian 12's glibc 2.36 needs
# GLIBC_2.34 (__libc_start_main), and check-glibc.sh must refuse it (a floor of 2.17 refuses
# anything built against a glibc newer than 2.17 that calls one of its newer functions).
echo 'int main(void) { return 0; }' | gcc -x c - -o "$tmp/host-gcc-program"
if bash scripts/check-glibc.sh "$tmp/host-gcc-program" >/dev/null 2>&1; then
  fail "check-glibc.sh passed a program built against this host's glibc 2.36"
fi
wheel=$(ls "$tmp"/dist/packer_reader-*_x86_64.whl)
bin=$(ls "$tmp"/whl-x86_64/*.data/scripts/packer)
chmod +x "$bin"

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

# in_root CMD...: CMD in the root $cur under chroot, with an empty environment.
in_root() { $SUDO env -i PATH=/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$cur" "$@"; }
# root_binary NAME DIR TARBALL MAKER: the root from TARBALL (made by MAKER) into DIR, /proc
# mounted, and the release binary's build, verify and inspect in it, byte-identical to the host's.
root_binary() {
  local name=$1
  cur=$2
  unpack_root "$cur" "$3" "$4"
  $SUDO cp "$bin" "$cur/packer"
  $SUDO cp "$wheel" "$cur/"
  $SUDO cp -r "$tmp/imgs" "$cur/imgs"
  [ -d "$cur/proc" ] && [ ! -L "$cur/proc" ] || fail "$cur/proc is not a folder"
  $SUDO mount -t proc proc "$cur/proc"
  mounted+=("$cur/proc")
  echo "test-glibc: $name x86-64 root: $(in_root ldd --version | head -1)"
  in_root ldd /packer >"$tmp/out.log" 2>&1 || { cat "$tmp/out.log"; fail "ldd /packer in the $name root"; }
  ! grep -q 'not found' "$tmp/out.log" || { cat "$tmp/out.log"; fail "a library is missing in the $name root"; }
  echo "test-glibc: $name: /packer build, verify, inspect"
  steps "in_root /packer" /imgs /out
  same_tree "$tmp/host" "$cur/out" "$name: /out"
}
# The reader's read-back of DIR (argv 1), installed under PREFIX (argv 2).
readback_py=$(cat <<'PYEOF'
import sys
import numpy as np
import packer_reader
from packer_reader import _crc32c
assert packer_reader.__file__.startswith(sys.argv[2]), packer_reader.__file__
ds = packer_reader.open(sys.argv[1])
assert len(ds) == 9 and ds.classes == ["elk", "fox", "owl"], (len(ds), ds.classes)
assert np.bincount(ds.labels).tolist() == [3, 3, 3]
img, _ = ds[0]
assert img.shape == (32, 32, 3) and img.dtype == np.uint8 and img.any(), (img.shape, img.dtype)
assert sum(len(y) for _, y in ds.batches(4, shuffle=True, seed=2)) == 9
assert packer_reader.verify(sys.argv[1]).ok
assert _crc32c.BACKEND in ("packer-hw", "packer-c") and _crc32c._LIB.startswith(sys.argv[2]), (_crc32c.BACKEND, _crc32c._LIB)
print("  read back %d records %s, CRC-32C %s, NumPy %s" % (len(ds), list(img.shape), _crc32c.BACKEND, np.__version__))
PYEOF
)
# root_wheel NAME: pip install of the wheel into the root's /venv, then the wheel's packer build,
# verify and inspect, and packer_reader's read-back.
root_wheel() {
  local name=$1
  echo "test-glibc: $name: pip install $(basename "$wheel") (the root's pip $(in_root /venv/bin/pip --version | awk '{print $2}'))"
  in_root /venv/bin/pip install -q --no-index --disable-pip-version-check "/$(basename "$wheel")" >"$tmp/out.log" 2>&1 ||
    { cat "$tmp/out.log"; fail "pip install of the wheel in the $name root"; }
  [ "$(in_root sh -c 'command -v packer')" = /venv/bin/packer ] || fail "$name: packer is not the venv's"
  echo "test-glibc: $name: the wheel's packer build, verify, inspect; packer_reader reads it back"
  steps "in_root packer" /imgs /out-wheel
  same_tree "$tmp/host" "$cur/out-wheel" "$name: /out-wheel"
  in_root /venv/bin/python - /out-wheel /venv/ <<<"$readback_py" || fail "$name: packer_reader read-back"
}
# 2. Debian 11 and Ubuntu 20.04, x86-64: the binary, then the wheel with the root's own pip.
root_binary "Debian 11" "$tmp/root11" "$cache_dir/rootfs-bullseye-minbase-py-amd64-1.tar.gz" make_root11
root_wheel "Debian 11"
done_in="Debian 11"
if [ "${PACKER_GLIBC_SKIP_UBUNTU:-}" != 1 ]; then
  t0=$(date +%s)
  root_binary "Ubuntu 20.04" "$tmp/root20" "$cache_dir/rootfs-focal-minbase-py-amd64-2.tar.gz" make_root20
  pipv=$(in_root /venv/bin/pip --version | awk '{print $2}')
  # This pip knows manylinux2014 but not manylinux_2_17 (pip 20.3): the wheel's second name is
  # what it installs by, and the same wheel named manylinux_2_17 alone must be refused.
  [ "$(printf '%s\n20.3\n' "$pipv" | sort -V | head -1)" = "$pipv" ] && [ "$pipv" != 20.3 ] ||
    fail "Ubuntu 20.04: want its pip older than 20.3 (it is $pipv): this case shows the manylinux2014 name at work"
  only217=$(basename "$wheel" | sed 's/\.manylinux2014_x86_64\.whl$/.whl/')
  $SUDO cp "$wheel" "$cur/$only217"
  if in_root /venv/bin/pip install -q --no-index --disable-pip-version-check "/$only217" >"$tmp/out.log" 2>&1; then
    fail "Ubuntu 20.04: pip $pipv installed $only217, a tag it predates: the refusal check cannot fail"
  fi
  grep -q 'is not a supported wheel on this platform' "$tmp/out.log" || { cat "$tmp/out.log"; fail "Ubuntu 20.04: pip's refusal of $only217"; }
  echo "test-glibc: Ubuntu 20.04: pip $pipv refuses $only217 (manylinux_2_17 alone) and installs the wheel by its manylinux2014 name:"
  root_wheel "Ubuntu 20.04"
  echo "test-glibc: Ubuntu 20.04 took $(($(date +%s) - t0)) s"
  done_in="Debian 11, Ubuntu 20.04"
fi

# 3. aarch64 under qemu user emulation, with Debian 11 arm64's C library, Python and pip.
if ! command -v qemu-aarch64-static >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends qemu-user-static >/dev/null
fi
t0=$(date +%s)
unpack_root "$aroot" "$cache_dir/rootfs-bullseye-foreign-arm64-3.tar.gz" make_root11_arm64
# apy ARG...: Debian 11 arm64's Python 3.9 under qemu (-L: its absolute paths are looked up in
# the root first), with an empty environment. No binfmt_misc: nothing it starts may be aarch64.
apy() { env -i PATH=/usr/bin:/bin HOME=/root PYTHONPATH="${PYTHONPATH:-}" qemu-aarch64-static -L "$aroot" "$aroot/usr/bin/python3.9" "$@"; }
# The root's own pip installs the aarch64 wheel and, as its requirement, NumPy's aarch64 wheel
# into a folder: one pip command, deciding the platform from the emulated Python itself
# (--no-compile: byte-compiling NumPy under emulation would double the time, about 25 s).
site=$tmp/site-arm64
awheel=$(ls "$tmp"/dist/packer_reader-*_aarch64.whl)
apip="-m pip install -q --disable-pip-version-check --no-compile --no-index --find-links $aroot/wheels --target"
# shellcheck disable=SC2086
if apy $apip "$tmp/site-x86" "$wheel" >"$tmp/out.log" 2>&1; then
  fail "aarch64: pip under qemu installed the x86_64 wheel: it does not decide the platform itself"
fi
grep -q 'is not a supported wheel on this platform' "$tmp/out.log" || { cat "$tmp/out.log"; fail "aarch64: pip's refusal of the x86_64 wheel"; }
echo "test-glibc: aarch64: pip $(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$aroot/usr/lib/python3/dist-packages/pip/__init__.py") under qemu refuses the x86_64 wheel; pip install $(basename "$awheel")"
# shellcheck disable=SC2086
apy $apip "$site" "$awheel" >"$tmp/out.log" 2>&1 || { cat "$tmp/out.log"; fail "aarch64: pip install of the aarch64 wheel under qemu"; }
[ -d "$site/numpy" ] || fail "aarch64: pip did not install NumPy, the wheel's requirement"
abin=$site/bin/packer
qemu() { qemu-aarch64-static -L "$aroot" "$abin" "$@"; }
echo "test-glibc: aarch64 (qemu-aarch64-static, Debian 11 arm64's glibc $(basename "$(readlink "$aroot/lib/aarch64-linux-gnu/libc.so.6")")): $(qemu --version)"
steps qemu "$tmp/imgs" "$tmp/out-arm64"
same_tree "$tmp/host" "$tmp/out-arm64" "aarch64 under qemu"
echo "test-glibc: aarch64: packer_reader from the aarch64 wheel reads it back (Debian 11 arm64's Python 3.9 under qemu)"
PYTHONPATH=$site apy - "$tmp/out-arm64" "$site" <<<"$readback_py" || fail "aarch64: packer_reader read-back under qemu"

# The aarch64 container image (scripts/build-oci.sh; scripts/test-k8s.sh runs the x86-64 one's
# pods): built from the wheel's binary twice, the second time from a copy with another time and
# mode under umask 077, the same digest; podman (test-k8s.sh's runtime) pulls the layout as
# linux/arm64; and the image's own files, with nothing of a Debian root, run its packer under
# qemu (-L the mounted image): build, verify, inspect, byte-identical to the host's build.
need=()
for p in podman runc; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
digest=$(bash scripts/build-oci.sh "$abin" "$tmp/oci-arm64" | tail -1)
mkdir "$tmp/copy"
cp "$abin" "$tmp/copy/packer"
chmod 0700 "$tmp/copy/packer"
touch -d '2001-02-03 04:05:06' "$tmp/copy/packer"
again=$( (umask 077 && bash scripts/build-oci.sh "$tmp/copy/packer" "$tmp/oci-arm64-again") | tail -1)
[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] && [ "$digest" = "$again" ] || fail "aarch64 image: two builds from the same inputs gave $digest and $again"
diff -r "$tmp/oci-arm64" "$tmp/oci-arm64-again" >/dev/null || fail "aarch64 image: the two layouts differ"
version=$(qemu --version | awk '{print $2}')
"${pm[@]}" pull -q --arch arm64 "oci:$tmp/oci-arm64:$version" >/dev/null || fail "aarch64 image: podman pull"
image=$("${pm[@]}" images -q | head -1)
plat=$("${pm[@]}" image inspect --format '{{.Os}}/{{.Architecture}}' "$image")
[ "$plat" = linux/arm64 ] || fail "aarch64 image: podman sees $plat"
mnt=$("${pm[@]}" image mount "$image")
echo "test-glibc: aarch64 image $digest ($plat, again the same), its own glibc under qemu:"
steps "qemu-aarch64-static -L $mnt $mnt/usr/bin/packer" "$tmp/imgs" "$tmp/out-arm64-image"
same_tree "$tmp/host" "$tmp/out-arm64-image" "aarch64 image under qemu"
"${pm[@]}" image unmount "$image" >/dev/null
echo "test-glibc: aarch64 took $(($(date +%s) - t0)) s"
done_in="$done_in and aarch64 under qemu (wheel and image)"

# 4. Opt-in (PACKER_GLIBC_OLD=1, or its old name PACKER_GLIBC_UBUNTU=1): the binary in Ubuntu
# 18.04 (glibc 2.27) and 16.04 (glibc 2.23), below the old 2.28 floor (its references stop at
# 2.14). No wheel: their Pythons, 3.6 and 3.5, are older than the reader's 3.8 (and their pips,
# 9.0.1 and 8.1.1, older than manylinux2014's 19.3).
if [ "${PACKER_GLIBC_OLD:-${PACKER_GLIBC_UBUNTU:-}}" = 1 ] && [ "${PACKER_GLIBC_SKIP_UBUNTU:-}" != 1 ]; then
  root_binary "Ubuntu 18.04" "$tmp/root18" "$cache_dir/rootfs-bionic-minbase-amd64-1.tar.gz" make_root18
  root_binary "Ubuntu 16.04" "$tmp/root16" "$cache_dir/rootfs-xenial-minbase-amd64-1.tar.gz" make_root16
  done_in="$done_in, Ubuntu 18.04 and 16.04 (binary)"
fi
echo "test-glibc: ok ($done_in: byte-identical to this host's build; $(($(date +%s) - start)) s)"
