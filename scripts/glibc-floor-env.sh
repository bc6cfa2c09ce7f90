#!/usr/bin/env bash
# Prints the environment that builds packer's C code for the release's glibc floor, glibc 2.17
# (manylinux2014, also named manylinux_2_17: RHEL/CentOS 7 and later, Debian 8 and later, Ubuntu
# 14.04 and later; the first glibc of aarch64), for ARCH (x86_64 or aarch64) from this x86-64
# Debian host; scripts/build-release.sh and scripts/build-crc.sh
# eval it:
#
#   eval "$(bash scripts/glibc-floor-env.sh aarch64)"   # sets CC, CGO_CFLAGS, CGO_LDFLAGS, GOARCH
#
# The C compiler is Zig's clang (`zig cc -target ARCH-linux-gnu.2.17`, the ziglang wheel from
# PyPI, pinned below): it compiles against glibc headers of that version and links against stub
# libraries that carry only the symbol versions 2.17 had, so nothing newer can be referenced, and
# it cross-compiles to aarch64 with the same files. The C libraries the build needs come from
# Debian bookworm's packages of ARCH, downloaded with apt-get and unpacked (not installed) into a
# folder: libjpeg62-turbo-dev (libjpeg.a, linked statically, and its headers) and the headers of
# libhdf5-dev and libav{format,codec,filter,util}-dev (those libraries are opened with dlopen at
# run time; only their types are compiled in). Only those headers and libjpeg.a are on the search
# paths, never the host's /usr/include or /usr/lib, whose glibc is newer than the floor. Debian's
# libjpeg.a is compiled against bookworm's glibc 2.36, but a static archive's references carry no
# symbol version: they are bound at this link, to the 2.17 stubs (one it needed that 2.17 lacks
# would fail the link), and scripts/check-glibc.sh checks the result.
# aarch64 packages need the arm64 architecture in dpkg (added here, with sudo when not root).
#
# Zig and the unpacked packages are cached under ${XDG_CACHE_HOME:-~/.cache}/packer/ (about 380 MB
# and 5 MB per architecture), downloaded once.
set -euo pipefail
ZIG_VERSION=0.15.2
GLIBC_FLOOR=2.17 # the one place: scripts/check-glibc.sh and scripts/build-wheel.sh read it here
arch=${1:?usage: glibc-floor-env.sh x86_64|aarch64}
case "$arch" in
  x86_64) deb_arch=amd64 goarch=amd64 ;;
  aarch64) deb_arch=arm64 goarch=arm64 ;;
  *) echo "glibc-floor-env: unsupported architecture $arch (x86_64 or aarch64)" >&2; exit 1 ;;
esac
triplet=$arch-linux-gnu
cache=${XDG_CACHE_HOME:-$HOME/.cache}/packer
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# Zig, from its PyPI wheel (the wheel is a zip; only its ziglang/ folder is kept).
zig_dir=$cache/zig-$ZIG_VERSION
if [ ! -x "$zig_dir/ziglang/zig" ]; then
  echo "glibc-floor-env: downloading ziglang==$ZIG_VERSION from PyPI (once)" >&2
  tmp=$(mktemp -d)
  /usr/bin/python3 -m pip download --no-deps --only-binary=:all: --quiet --disable-pip-version-check \
    -d "$tmp" "ziglang==$ZIG_VERSION" >&2
  rm -rf "$zig_dir.tmp"
  /usr/bin/python3 - "$tmp" "$zig_dir.tmp" <<'PYEOF'
import glob, os, sys, zipfile
with zipfile.ZipFile(glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]) as z:
    for info in z.infolist():
        if info.filename.startswith("ziglang/"):
            z.extract(info, sys.argv[2])
os.chmod(os.path.join(sys.argv[2], "ziglang", "zig"), 0o755)
PYEOF
  rm -rf "$tmp" "$zig_dir"
  mv "$zig_dir.tmp" "$zig_dir"
fi

# The C libraries' headers and libjpeg.a of ARCH, from Debian's packages (version 1 of this layout).
sysroot=$cache/sysroot-$deb_arch-1
if [ ! -f "$sysroot/lib/libjpeg.a" ]; then
  if [ "$deb_arch" != "$(dpkg --print-architecture)" ] &&
    ! dpkg --print-foreign-architectures | grep -qx "$deb_arch"; then
    echo "glibc-floor-env: dpkg --add-architecture $deb_arch; apt-get update (once)" >&2
    $SUDO dpkg --add-architecture "$deb_arch"
    $SUDO apt-get update -q >&2
  fi
  echo "glibc-floor-env: downloading Debian's $deb_arch headers and libjpeg.a (once)" >&2
  tmp=$(mktemp -d)
  if ! (cd "$tmp" && apt-get download -q libjpeg62-turbo-dev:"$deb_arch" libhdf5-dev:"$deb_arch" \
    libavformat-dev:"$deb_arch" libavcodec-dev:"$deb_arch" libavfilter-dev:"$deb_arch" \
    libavutil-dev:"$deb_arch") >"$tmp/download.log" 2>&1; then
    cat "$tmp/download.log" >&2
    echo "glibc-floor-env: apt-get download of Debian's $deb_arch packages failed" >&2
    exit 1
  fi
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/x"; done
  rm -rf "$sysroot.tmp"
  mkdir -p "$sysroot.tmp/include" "$sysroot.tmp/lib"
  # jpeglib.h and friends, hdf5/serial/, and the multiarch folder (jconfig.h, libav*/).
  cp -r "$tmp/x/usr/include/." "$sysroot.tmp/include/"
  cp "$tmp/x/usr/lib/$triplet/libjpeg.a" "$sysroot.tmp/lib/"
  rm -rf "$tmp" "$sysroot"
  mv "$sysroot.tmp" "$sysroot"
fi

# CGO_CFLAGS come before the packages' own #cgo flags, so the hdf5/serial folder here is searched
# before the host's. -tags packer_dynjpeg makes the build link -ljpeg, which finds libjpeg.a (the
# only library in lib/): a static link, without the -l:libjpeg.a spelling Zig's linker does not
# take. --as-needed keeps libraries the binary does not use out of its NEEDED list; the debug
# sections are compressed, as Go's own linker asks of the host's linker.
cat <<EOF
export CC="$zig_dir/ziglang/zig cc -target $triplet.$GLIBC_FLOOR"
export CGO_ENABLED=1 GOOS=linux GOARCH=$goarch
export CGO_CFLAGS="-O2 -I$sysroot/include/hdf5/serial -I$sysroot/include -I$sysroot/include/$triplet"
export CGO_LDFLAGS="-L$sysroot/lib -Wl,--as-needed -Wl,--compress-debug-sections=zlib"
export PACKER_GO_TAGS=packer_dynjpeg
EOF
