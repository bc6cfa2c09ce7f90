#!/usr/bin/env bash
# Checks that ELF files run on the release's glibc floor, glibc 2.17 (manylinux2014): fails (exit
# 1, naming the file and the version) if one references a glibc symbol version newer than 2.17 (readelf -V: the
# versions the dynamic loader will demand) or needs a shared library other than glibc's own
# (libc, libm, libpthread, libdl, librt, libresolv and the dynamic loader; readelf -d). Works on
# x86-64 and aarch64 files alike (readelf reads any ELF). Used by scripts/build-release.sh on the
# binary, scripts/build-wheel.sh on the wheel's files and scripts/test-glibc.sh.
#
#   bash scripts/check-glibc.sh FILE...
set -euo pipefail
# The floor is scripts/glibc-floor-env.sh's GLIBC_FLOOR, what the release is linked for.
floor=$(sed -n 's/^GLIBC_FLOOR=\([0-9][0-9.]*\).*/\1/p' "$(dirname "$0")/glibc-floor-env.sh")
[ -n "$floor" ] || { echo "check-glibc: no GLIBC_FLOOR in $(dirname "$0")/glibc-floor-env.sh" >&2; exit 2; }
[ $# -gt 0 ] || { echo "usage: check-glibc.sh FILE..." >&2; exit 2; }
rc=0
for f in "$@"; do
  fail=0
  if ! versions=$(readelf -V -W "$f" 2>/dev/null) || ! needed=$(readelf -d -W "$f" 2>/dev/null); then
    echo "check-glibc: $f: not an ELF file readelf can read" >&2
    rc=1
    continue
  fi
  newest=$(grep -o 'Name: GLIBC_[0-9.]*' <<<"$versions" | sed 's/Name: GLIBC_//' | sort -uV | tail -1)
  if [ -z "$newest" ]; then
    echo "check-glibc: $f: references no glibc symbol version (not a dynamically linked glibc program?)" >&2
    fail=1
  elif [ "$(printf '%s\n%s\n' "$floor" "$newest" | sort -V | tail -1)" != "$floor" ]; then
    echo "check-glibc: $f: needs GLIBC_$newest, newer than the floor $floor:" >&2
    grep -o 'Name: GLIBC_[0-9.]*' <<<"$versions" | sed 's/Name: //' | sort -uV | tr '\n' ' ' >&2
    echo >&2
    fail=1
  fi
  bad=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$needed" |
    grep -Ev '^lib(c|m|pthread|dl|rt|resolv)\.so\.[0-9]+$|^ld-linux[-a-z0-9_.]*\.so\.[0-9]+$' || true)
  if [ -n "$bad" ]; then
    echo "check-glibc: $f: needs libraries other than glibc's own: $(echo $bad)" >&2
    fail=1
  fi
  [ "$fail" = 1 ] || echo "check-glibc: $f: ok (newest glibc symbol version $newest, floor $floor)"
  [ "$fail" = 0 ] || rc=1
done
exit "$rc"
