#!/usr/bin/env bash
# Builds the container image of packer as an OCI image layout, without a container daemon and
# reproducibly: the same inputs give the same image (the manifest digest, printed last).
#
#   bash scripts/build-oci.sh                      # dist/packer (built if missing) -> dist/oci
#   bash scripts/build-oci.sh BINARY OUT           # any release binary, any new folder
#
# The image is for the binary's architecture, linux/amd64 or linux/arm64 (read from its ELF
# header; scripts/build-release.sh builds both on an x86-64 host): one image per layout, as
# scripts/release.sh ships one archive per architecture. The image (one layer, written by
# internal/tools/mkoci) holds:
#   /usr/bin/packer                      the release binary (scripts/build-release.sh: libjpeg-turbo
#                                        linked in, nothing but glibc needed at start)
#   /lib/TRIPLET/{libc,libm}.so.6, libpthread.so.0, libdl.so.2, libresolv.so.2 and the loader
#   (x86-64: /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 and the /lib64 link; aarch64:
#   /lib/aarch64-linux-gnu/ld-linux-aarch64.so.1 and the /lib link)
#                                        the glibc pieces the binary names (readelf: its NEEDED
#                                        libraries, linked for glibc 2.17, where libpthread, libdl
#                                        and libresolv were still libraries of their own, and its
#                                        loader), taken from Debian's libc6 package of the host's
#                                        version: x86-64's as installed, aarch64's downloaded once
#                                        (apt-get download libc6:arm64, its SHA-256 checked against
#                                        apt's index, cached under ~/.cache/packer/), every file
#                                        checked against the package's own checksums (a changed
#                                        file is refused)
#   /etc/ssl/certs/ca-certificates.crt   the Mozilla roots of Debian's ca-certificates package, in
#                                        name order (for https:// S3 endpoints); not the host's
#                                        generated bundle, which local certificates change
#   /etc/passwd, /etc/group              root and packer (65532), the user the image runs as
#   /tmp                                 1777
#   /usr/share/doc/{libc6,ca-certificates}/copyright
# and nothing else: no shell, no libhdf5 (--format hdf5 fails, naming the library), no ffmpeg
# (--from video fails the same way), no libcuda (a GPU runtime that mounts the driver's
# libraries into the container provides it). Entrypoint /usr/bin/packer, user 65532:65532.
#
# What decides the bytes: the binary, the libc6 and ca-certificates packages' files (their
# versions are labels of the image; libc6 of the binary's architecture), the Go version that compiles mkoci (its gzip), and
# SOURCE_DATE_EPOCH (default 0), the time of every file and of the config. Nothing of the host
# enters otherwise: no file times, owners or modes, no host name, no order of a directory read.
#
# Push or run it with the ordinary tools, for example
#   skopeo copy oci:dist/oci:0.2.0 docker://registry.example/packer:0.2.0
#   podman run --rm oci:dist/oci:0.2.0 --version
# The version is the binary's --version; an aarch64 binary is asked under qemu user emulation
# (qemu-aarch64-static from qemu-user-static, with the image's own glibc files), so building
# the arm64 image on an x86-64 host needs that package.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-dist/packer}
out=${2:-dist/oci}
if [ ! -e "$bin" ] && [ "$bin" = dist/packer ]; then
  bash scripts/build-release.sh >/dev/null
fi
[ -f "$bin" ] || { echo "build-oci: $bin: no such file (bash scripts/build-release.sh builds it)" >&2; exit 1; }
[ ! -e "$out" ] || { echo "build-oci: $out exists; remove it or name another folder" >&2; exit 1; }
case "$(readelf -h "$bin" 2>/dev/null | sed -n 's/^ *Machine: *//p')" in
  "Advanced Micro Devices X86-64") arch=amd64 triplet=x86_64-linux-gnu loader=ld-linux-x86-64.so.2 loader_link=/lib64 ;;
  AArch64) arch=arm64 triplet=aarch64-linux-gnu loader=ld-linux-aarch64.so.1 loader_link=/lib ;;
  *) echo "build-oci: $bin: not an x86-64 or aarch64 ELF file" >&2; exit 1 ;;
esac
libc_dir=/lib/$triplet

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# pkgfile PKG PATH [ROOT SUMS]: ROOT/PATH, a file of Debian package PKG (as installed, or unpacked
# into ROOT with the package's md5sums file SUMS), after checking its bytes against the
# package's md5sums (what dpkg --verify checks).
pkgfile() {
  local pkg=$1 p=$2 root=${3:-} sums=${4:-} want got
  if [ -z "$sums" ]; then
    sums=$(dpkg-query --control-path "$pkg" md5sums 2>/dev/null) ||
      { echo "build-oci: package $pkg is not installed (apt-get install $pkg)" >&2; exit 1; }
  fi
  want=$(awk -v p="${p#/}" '$2 == p {print $1}' "$sums")
  [ -n "$want" ] || { echo "build-oci: $p is not a file of package $pkg" >&2; exit 1; }
  got=$(md5sum <"$root$p" | awk '{print $1}')
  [ "$got" = "$want" ] || { echo "build-oci: $p differs from package $pkg's file (md5 $got, want $want)" >&2; exit 1; }
  echo "$root$p"
}

# libc6 of the binary's architecture, at the installed libc6's version: the installed package
# itself, or (arm64) its .deb from apt, checked against the SHA-256 of apt's signed index, and
# unpacked into $libc_root with its md5sums.
libc_version=$(dpkg-query -W -f '${Version}' libc6)
libc_root="" libc_sums=""
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
  debs=${XDG_CACHE_HOME:-$HOME/.cache}/packer/debs
  deb=$debs/libc6_${libc_version//:/%3a}_$arch.deb
  want=$(apt-cache show --no-all-versions "libc6:$arch=$libc_version" 2>/dev/null | sed -n 's/^SHA256: //p' | head -1)
  if [ -z "$want" ]; then
    echo "build-oci: apt knows no libc6:$arch $libc_version (dpkg --add-architecture $arch; apt-get update)" >&2; exit 1
  fi
  if [ ! -f "$deb" ] || [ "$(sha256sum <"$deb" | awk '{print $1}')" != "$want" ]; then
    mkdir -p "$debs"
    (cd "$tmp" && apt-get download -q "libc6:$arch=$libc_version" >/dev/null 2>&1) ||
      { echo "build-oci: apt-get download libc6:$arch=$libc_version failed" >&2; exit 1; }
    mv -f "$tmp"/libc6_*_"$arch".deb "$deb"
  fi
  [ "$(sha256sum <"$deb" | awk '{print $1}')" = "$want" ] || { echo "build-oci: $deb does not match apt's SHA-256" >&2; exit 1; }
  libc_root=$tmp/libc6-$arch
  dpkg-deb -x "$deb" "$libc_root"
  dpkg-deb -e "$deb" "$tmp/libc6-$arch.control"
  libc_sums=$tmp/libc6-$arch.control/md5sums
fi

if [ "$arch" = "$(dpkg --print-architecture)" ]; then
  version=$("$bin" --version | awk '{print $2}')
elif command -v qemu-aarch64-static >/dev/null 2>&1; then
  version=$(qemu-aarch64-static -L "$libc_root" "$bin" --version | awk '{print $2}')
else
  echo "build-oci: an $arch binary's version is read under qemu user emulation: apt-get install qemu-user-static" >&2; exit 1
fi
[ -n "$version" ] || { echo "build-oci: $bin --version printed no version" >&2; exit 1; }

args=(-o "$out" -tag "$version" -arch "$arch" -user 65532:65532 -workdir /
  -entrypoint /usr/bin/packer
  -env PATH=/usr/bin:/bin -env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
  -file "$bin:/usr/bin/packer:0755"
  -dir /tmp:1777)

# glibc: the libraries the binary needs and its loader (readelf, which reads either
# architecture; glibc's libraries need nothing beyond libc and the loader), as files of libc6.
# The loader link (/lib64/ld-linux-x86-64.so.2, /lib/ld-linux-aarch64.so.1: the binary's
# PT_INTERP) points at the real file as libc6's own link does (absolute on amd64, relative on
# arm64).
interp=$(readelf -l -W "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]$/\1/p')
[ "$interp" = "$loader_link/$loader" ] || { echo "build-oci: $bin asks for the loader $interp, not $loader_link/$loader" >&2; exit 1; }
while read -r name; do
  case "$name" in
  "$loader")
    target=$(readlink "$libc_root$loader_link/$name") || { echo "build-oci: libc6 has no link $loader_link/$name" >&2; exit 1; }
    case "$target" in
    "$libc_dir/$name" | "${libc_dir#/lib/}/$name") ;;
    *) echo "build-oci: libc6's $loader_link/$name points at $target, not $libc_dir/$name" >&2; exit 1 ;;
    esac
    args+=(-file "$(pkgfile libc6 "$libc_dir/$name" "$libc_root" "$libc_sums"):$libc_dir/$name:0755"
      -link "$loader_link/$name:$target") ;;
  *) args+=(-file "$(pkgfile libc6 "$libc_dir/$name" "$libc_root" "$libc_sums"):$libc_dir/$name:0644") ;;
  esac
done < <({ readelf -d -W "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; echo "$loader"; } | sort -u)
args+=(-file "$(pkgfile libc6 /usr/share/doc/libc6/copyright "$libc_root" "$libc_sums"):/usr/share/doc/libc6/copyright:0644")

# The CA bundle: the package's own certificates, concatenated in name order.
cas=()
while read -r crt; do cas+=("$(pkgfile ca-certificates "$crt")"); done < <(dpkg -L ca-certificates | grep '^/usr/share/ca-certificates/mozilla/.*\.crt$' | LC_ALL=C sort)
[ ${#cas[@]} -gt 0 ] || { echo "build-oci: ca-certificates lists no certificate" >&2; exit 1; }
cat "${cas[@]}" >"$tmp/ca-certificates.crt"
args+=(-file "$tmp/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:0644"
  -file "$(pkgfile ca-certificates /usr/share/doc/ca-certificates/copyright):/usr/share/doc/ca-certificates/copyright:0644")

printf 'root:x:0:0:root:/root:/usr/sbin/nologin\npacker:x:65532:65532:packer:/tmp:/usr/sbin/nologin\n' >"$tmp/passwd"
printf 'root:x:0:\npacker:x:65532:\n' >"$tmp/group"
args+=(-file "$tmp/passwd:/etc/passwd:0644" -file "$tmp/group:/etc/group:0644")

args+=(-label "org.opencontainers.image.title=packer"
  -label "org.opencontainers.image.version=$version"
  -label "dev.packer.libc6=$libc_version"
  -label "dev.packer.ca-certificates=$(dpkg-query -W -f '${Version}' ca-certificates)")

go run ./internal/tools/mkoci "${args[@]}"
