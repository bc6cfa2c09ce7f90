#!/usr/bin/env bash
# Proves that the release binary runs on a bare machine: builds it (scripts/build-release.sh,
# which fails unless `ldd` lists only glibc's own libraries), copies it with a folder of JPEG and
# PNG images into a minimal Debian bookworm root file system (debootstrap --variant=minbase: no
# libjpeg, no libhdf5, no CUDA, nothing but the base packages), and there, under chroot with an
# empty environment:
#
#   packer build /imgs -o /out --resize 64 --crop 64    must pack every image (device auto: CPU)
#   packer verify /out                                  must pass
#   packer build ... --format hdf5                      must fail (exit 1 or 2, no panic) with the
#                                                       message naming the package to install
#
# then installs that package in the root (apt-get install libhdf5-103-1) and builds and verifies
# with --format hdf5 again, which must now work (PACKER_BARE_SKIP_HDF5=1 skips this part).
#
# The root file system is built once with debootstrap from Debian's package archive and cached
# as a tarball under ${XDG_CACHE_HOME:-~/.cache}/packer/, so later runs only unpack it. Needs root
# (or sudo) for debootstrap and chroot, debootstrap itself (installed with apt-get when missing),
# and /usr/bin/python3 with Pillow for the images. Mounts /proc in the root; unmounts it and
# removes the root on exit.
#
#   bash scripts/test-bare.sh
#   PACKER_DEBIAN_MIRROR=http://mirror.example/debian bash scripts/test-bare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
mirror=${PACKER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
cache_dir=${XDG_CACHE_HOME:-$HOME/.cache}/packer
cache=$cache_dir/rootfs-$suite-minbase-amd64.tar.gz
[ "$(go env GOARCH)" = amd64 ] || { echo "test-bare: amd64 only (the cached root is amd64)" >&2; exit 1; }

tmp=$(mktemp -d)
root=$tmp/root
cleanup() {
  if mountpoint -q "$root/proc" 2>/dev/null; then $SUDO umount "$root/proc" || $SUDO umount -l "$root/proc"; fi
  if [ -d "$root" ] && ! grep -q " $root/" /proc/mounts; then $SUDO rm -rf --one-file-system "$root"; fi
  rm -rf "$tmp" 2>/dev/null || $SUDO rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT

# The root file system: from the cache, or debootstrap (then cached).
mkdir -p "$root"
if [ -s "$cache" ]; then
  echo "test-bare: root file system from $cache"
  $SUDO tar -C "$root" --numeric-owner -xzpf "$cache"
else
  if ! command -v debootstrap >/dev/null 2>&1; then
    echo "test-bare: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends debootstrap >/dev/null
  fi
  echo "test-bare: debootstrap --variant=minbase $suite from $mirror (once; cached afterwards)"
  t0=$(date +%s)
  if ! $SUDO debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$tmp/debootstrap.log" 2>&1; then
    tail -20 "$tmp/debootstrap.log" >&2
    echo "test-bare: FAILED: debootstrap" >&2
    exit 1
  fi
  echo "test-bare: debootstrap took $(($(date +%s) - t0)) s"
  mkdir -p "$cache_dir"
  $SUDO rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/* 2>/dev/null || true
  $SUDO tar -C "$root" --numeric-owner -czf "$tmp/rootfs.tar.gz" .
  $SUDO chown "$(id -u):$(id -g)" "$tmp/rootfs.tar.gz"
  mv -f "$tmp/rootfs.tar.gz" "$cache"
fi
# Bare means bare: none of the libraries packer used to link may be there.
present=$(cd "$root" && ls -d usr/lib/*/libjpeg* usr/lib/*/libhdf5* usr/lib/*/libcuda* 2>/dev/null || true)
if [ -n "$present" ]; then
  echo "test-bare: FAILED: the root file system is not bare: $present" >&2
  exit 1
fi

# The binary, checked on the host.
bash scripts/build-release.sh "$tmp/packer" >/dev/null
echo "test-bare: ldd of the release binary (host):"
ldd "$tmp/packer" | sed 's/^/  /'

# Images: 2 classes, JPEG and PNG, RGB and grayscale, of several sizes.
/usr/bin/python3 - "$tmp/imgs" <<'PYEOF'
import os, sys
from PIL import Image
for k, cls in enumerate(["cat", "dog"]):
    d = os.path.join(sys.argv[1], cls)
    os.makedirs(d)
    for i in range(4):
        w, h = 70 + 13 * i, 90 - 7 * i
        im = Image.new("RGB", (w, h))
        im.putdata([((x * 5 + k * 90) % 256, (y * 3 + i * 40) % 256, (x + y) % 256) for y in range(h) for x in range(w)])
        if i % 2 == 0:
            im.save(os.path.join(d, "%d.jpg" % i), quality=90)
        else:
            (im.convert("L") if i == 3 else im).save(os.path.join(d, "%d.png" % i))
PYEOF
$SUDO cp "$tmp/packer" "$root/packer"
$SUDO cp -r "$tmp/imgs" "$root/imgs"
$SUDO mount -t proc proc "$root/proc"

# in_root CMD...: runs CMD in the root with an empty environment; output to $tmp/out.log.
in_root() {
  $SUDO env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$root" "$@" >"$tmp/out.log" 2>&1
}
show() { sed 's/^/  /' "$tmp/out.log"; }

echo "test-bare: chroot: ldd /packer (the root's own ldd and loader)"
in_root ldd /packer || { show; echo "test-bare: FAILED: ldd in the root" >&2; exit 1; }
show
if grep -q 'not found' "$tmp/out.log"; then echo "test-bare: FAILED: a library is missing in the root" >&2; exit 1; fi
echo "test-bare: chroot: /packer --version"
in_root /packer --version || { show; echo "test-bare: FAILED: packer does not start in the bare root" >&2; exit 1; }
show
echo "test-bare: chroot: /packer build /imgs -o /out --resize 64 --crop 64"
in_root /packer build /imgs -o /out --resize 64 --crop 64 || { show; echo "test-bare: FAILED: build" >&2; exit 1; }
tail -3 "$tmp/out.log" | sed 's/^/  /'
echo "test-bare: chroot: /packer verify /out"
in_root /packer verify /out || { show; echo "test-bare: FAILED: verify" >&2; exit 1; }
show
grep -q '8 records' "$tmp/out.log" || { echo "test-bare: FAILED: want 8 records" >&2; exit 1; }
echo "test-bare: chroot: /packer build /imgs -o /out-h5 --resize 64 --crop 64 --format hdf5 (must fail: no libhdf5)"
set +e
in_root /packer build /imgs -o /out-h5 --resize 64 --crop 64 --format hdf5
rc=$?
set -e
show
if [ "$rc" -eq 0 ] || [ "$rc" -gt 2 ]; then echo "test-bare: FAILED: --format hdf5 exited $rc, want 1 or 2" >&2; exit 1; fi
if grep -q 'panic\|goroutine ' "$tmp/out.log"; then echo "test-bare: FAILED: --format hdf5 panicked" >&2; exit 1; fi
grep -q 'apt-get install libhdf5-103-1' "$tmp/out.log" || { echo "test-bare: FAILED: the error does not name the package" >&2; exit 1; }

# Then the same binary with libhdf5 installed, as a user would: apt-get install the package the
# message names, inside the root, and --format hdf5 must work (dlopen finds the library).
if [ "${PACKER_BARE_SKIP_HDF5:-}" != 1 ]; then
  echo "test-bare: chroot: apt-get install libhdf5-103-1, then --format hdf5 again"
  $SUDO cp /etc/resolv.conf "$root/etc/resolv.conf"
  in_root sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libhdf5-103-1' ||
    { show; echo "test-bare: FAILED: apt-get install libhdf5-103-1 in the root" >&2; exit 1; }
  in_root /packer build /imgs -o /out-h5 --resize 64 --crop 64 --format hdf5 || { show; echo "test-bare: FAILED: build --format hdf5 with libhdf5" >&2; exit 1; }
  tail -2 "$tmp/out.log" | sed 's/^/  /'
  in_root /packer verify /out-h5 || { show; echo "test-bare: FAILED: verify of the hdf5 dataset" >&2; exit 1; }
  show
  # Same binary, same inputs, on the host: the same bytes (both use Debian 12's libhdf5).
  "$tmp/packer" build "$tmp/imgs" -o "$tmp/host-h5" --resize 64 --crop 64 --format hdf5 >/dev/null 2>&1
  "$tmp/packer" build "$tmp/imgs" -o "$tmp/host" --resize 64 --crop 64 >/dev/null 2>&1
  for d in out-h5:host-h5 out:host; do
    n=0
    while read -r f; do
      cmp "$tmp/${d#*:}/$f" "$root/${d%%:*}/$f" || { echo "test-bare: FAILED: /${d%%:*}/$f in the root differs from the host's build" >&2; exit 1; }
      n=$((n + 1))
    done < <(cd "$tmp/${d#*:}" && find . -type f | sort)
    [ "$n" -gt 0 ] || { echo "test-bare: FAILED: the host's build wrote nothing" >&2; exit 1; }
  done
  echo "test-bare: /out and /out-h5 are byte-identical to the host's builds"
fi
echo "test-bare: ok ($(($(date +%s) - start)) s)"
