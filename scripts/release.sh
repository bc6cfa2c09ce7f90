#!/usr/bin/env bash
# scripts/release.sh [DIST]
#
# One release, every artifact, into DIST (default dist/): the release binary
# (scripts/build-release.sh) as packer-VERSION-linux-ARCH, the wheel (scripts/build-wheel.sh),
# and SHA256SUMS over both (check with `sha256sum -c SHA256SUMS` in DIST). The version is
# pipeline.Version, which python/pyproject.toml and CHANGELOG.md must repeat (checked here and by
# TestVersionOneSource). Built on this host: Linux x86-64 (see build-wheel.sh for what the wheel's
# platform tag means).
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${1:-dist}
version=$(sed -n 's/^const Version = "\(.*\)"/\1/p' pipeline/build.go)
[ "$(sed -n 's/^version = "\(.*\)"/\1/p' python/pyproject.toml)" = "$version" ] || { echo "release: python/pyproject.toml's version is not $version" >&2; exit 1; }
grep -m1 -E '^## [0-9]+\.[0-9]+\.[0-9]+' CHANGELOG.md | grep -q "^## $version " || { echo "release: CHANGELOG.md's latest release is not $version" >&2; exit 1; }
mkdir -p "$dist"
arch=$(uname -m)
bin="$dist/packer-$version-linux-$arch"
bash scripts/build-release.sh "$bin" >/dev/null
[ "$("$bin" --version)" = "packer $version" ] || { echo "release: $bin --version says $("$bin" --version)" >&2; exit 1; }
rm -f "$dist"/packer_reader-"$version"-*.whl
bash scripts/build-wheel.sh "$dist" >/dev/null
(cd "$dist" && sha256sum "packer-$version-linux-$arch" packer_reader-"$version"-*.whl > SHA256SUMS && sha256sum -c --quiet SHA256SUMS)
ls -l "$dist"
