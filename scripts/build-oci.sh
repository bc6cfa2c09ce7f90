#!/usr/bin/env bash
# Builds the container image of packer as an OCI image layout, without a container daemon and
# reproducibly: the same inputs give the same image (the manifest digest, printed last).
#
#   bash scripts/build-oci.sh                      # dist/packer (built if missing) -> dist/oci
#   bash scripts/build-oci.sh BINARY OUT           # any release binary, any new folder
#
# The image (one layer, written by internal/tools/mkoci) holds:
#   /usr/bin/packer                      the release binary (scripts/build-release.sh: libjpeg-turbo
#                                        linked in, nothing but glibc needed at start)
#   /lib/x86_64-linux-gnu/{libc,libm}.so.6, ld-linux-x86-64.so.2 (and the /lib64 link), and
#   libpthread.so.0, libdl.so.2, libresolv.so.2 (the binary is linked for glibc 2.28, where those
#   were still libraries of their own)
#                                        the glibc pieces the binary's `ldd` names, taken from the
#                                        installed Debian libc6 package and checked against dpkg's
#                                        own checksums of that package (a changed file is refused)
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
# versions are labels of the image), the Go version that compiles mkoci (its gzip), and
# SOURCE_DATE_EPOCH (default 0), the time of every file and of the config. Nothing of the host
# enters otherwise: no file times, owners or modes, no host name, no order of a directory read.
#
# Push or run it with the ordinary tools, for example
#   skopeo copy oci:dist/oci:0.2.0 docker://registry.example/packer:0.2.0
#   podman run --rm oci:dist/oci:0.2.0 --version
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-dist/packer}
out=${2:-dist/oci}
[ "$(go env GOARCH)" = amd64 ] || { echo "build-oci: amd64 only (the library paths are amd64's)" >&2; exit 1; }
if [ ! -e "$bin" ] && [ "$bin" = dist/packer ]; then
  bash scripts/build-release.sh >/dev/null
fi
[ -f "$bin" ] || { echo "build-oci: $bin: no such file (bash scripts/build-release.sh builds it)" >&2; exit 1; }
[ ! -e "$out" ] || { echo "build-oci: $out exists; remove it or name another folder" >&2; exit 1; }
version=$("$bin" --version | awk '{print $2}')
[ -n "$version" ] || { echo "build-oci: $bin --version printed no version" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# pkgfile PKG PATH: PATH, a file of Debian package PKG as installed, after checking its bytes
# against the package's md5sums (what dpkg --verify checks).
pkgfile() {
  local pkg=$1 p=$2 sums want got
  sums=$(dpkg-query --control-path "$pkg" md5sums 2>/dev/null) ||
    { echo "build-oci: package $pkg is not installed (apt-get install $pkg)" >&2; exit 1; }
  want=$(awk -v p="${p#/}" '$2 == p {print $1}' "$sums")
  [ -n "$want" ] || { echo "build-oci: $p is not a file of package $pkg" >&2; exit 1; }
  got=$(md5sum <"$p" | awk '{print $1}')
  [ "$got" = "$want" ] || { echo "build-oci: $p differs from package $pkg's file (md5 $got, want $want)" >&2; exit 1; }
  echo "$p"
}

args=(-o "$out" -tag "$version" -user 65532:65532 -workdir /
  -entrypoint /usr/bin/packer
  -env PATH=/usr/bin:/bin -env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
  -file "$bin:/usr/bin/packer:0755"
  -dir /tmp:1777)

# glibc: what ldd names (the loader by its link, the libraries by their real files), as files
# of libc6. The loader link /lib64/ld-linux-x86-64.so.2 points at the real file, as in Debian.
libc_dir=/lib/x86_64-linux-gnu
while read -r lib; do
  name=$(basename "$lib")
  case "$name" in
  ld-linux-x86-64.so.2)
    args+=(-file "$(pkgfile libc6 "$libc_dir/$name"):$libc_dir/$name:0755"
      -link "/lib64/$name:$libc_dir/$name") ;;
  *) args+=(-file "$(pkgfile libc6 "$libc_dir/$name"):$libc_dir/$name:0644") ;;
  esac
done < <(ldd "$bin" | awk '/=>/ {print $3; next} /ld-linux/ {print $1}' | sort -u)
args+=(-file "$(pkgfile libc6 /usr/share/doc/libc6/copyright):/usr/share/doc/libc6/copyright:0644")

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
  -label "dev.packer.libc6=$(dpkg-query -W -f '${Version}' libc6)"
  -label "dev.packer.ca-certificates=$(dpkg-query -W -f '${Version}' ca-certificates)")

go run ./internal/tools/mkoci "${args[@]}"
