#!/usr/bin/env bash
# scripts/release.sh [DIST]
#
# One release, every artifact, into DIST (default dist/): the release binary
# (scripts/build-release.sh) as packer-VERSION-linux-ARCH and the wheels (scripts/build-wheel.sh)
# for x86_64 and aarch64, the container image of each binary (scripts/build-oci.sh: linux/amd64,
# linux/arm64) as packer-VERSION-oci-ARCH.tar, an OCI archive of the layout whose one image is
# tagged VERSION (skopeo copy oci-archive:FILE:VERSION docker://REGISTRY/packer:VERSION-ARCH,
# then one manifest list of both if the registry wants one; podman load -i FILE names it
# localhost/VERSION; the same inputs give the same bytes), and SHA256SUMS over all of them (check with
# `sha256sum -c SHA256SUMS` in DIST). The Slurm scripts and Kubernetes manifests are in the
# binary and so in the wheel and the image too: packer cluster slurm|k8s. The version is
# pipeline.Version, which python/pyproject.toml and CHANGELOG.md must repeat (checked here and by
# TestVersionOneSource). Linux x86-64 and aarch64 binaries and wheels, both built on an x86-64
# host for glibc 2.17 or later (see build-release.sh and build-wheel.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${1:-dist}
version=$(sed -n 's/^const Version = "\(.*\)"/\1/p' pipeline/build.go)
[ "$(sed -n 's/^version = "\(.*\)"/\1/p' python/pyproject.toml)" = "$version" ] || { echo "release: python/pyproject.toml's version is not $version" >&2; exit 1; }
grep -m1 -E '^## [0-9]+\.[0-9]+\.[0-9]+' CHANGELOG.md | grep -q "^## $version " || { echo "release: CHANGELOG.md's latest release is not $version" >&2; exit 1; }
mkdir -p "$dist"
rm -f "$dist"/packer_reader-"$version"-*.whl
# Both architectures from this x86-64 host, each for glibc 2.17 or later (build-release.sh).
for arch in x86_64 aarch64; do
  bash scripts/build-release.sh "$dist/packer-$version-linux-$arch" "$arch" >/dev/null
  bash scripts/build-wheel.sh "$dist" "$arch" >/dev/null
done
bin="$dist/packer-$version-linux-x86_64"
[ "$("$bin" --version)" = "packer $version" ] || { echo "release: $bin --version says $("$bin" --version)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One image per architecture (build-oci.sh reads the aarch64 binary's version under qemu:
# qemu-user-static must be installed).
for arch in x86_64 aarch64; do
  oci="packer-$version-oci-$arch.tar"
  digest=$(bash scripts/build-oci.sh "$dist/packer-$version-linux-$arch" "$tmp/oci-$arch" | tail -1)
  # The layout as one archive, reproducibly: names sorted, owner 0:0, one time, modes fixed.
  tar --sort=name --format=gnu --owner=0 --group=0 --numeric-owner --mode=u=rwX,go=rX \
    --mtime="@${SOURCE_DATE_EPOCH:-0}" -C "$tmp/oci-$arch" -cf "$dist/$oci" .
  echo "release: image $digest in $dist/$oci"
done
(cd "$dist" && sha256sum packer-"$version"-linux-{x86_64,aarch64} packer_reader-"$version"-*.whl packer-"$version"-oci-{x86_64,aarch64}.tar > SHA256SUMS && sha256sum -c --quiet SHA256SUMS)
ls -l "$dist"
