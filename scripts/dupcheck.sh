#!/usr/bin/env bash
# scripts/dupcheck.sh: the duplicate-code check of the architecture work. It runs dupl (a
# syntax-tree clone detector, pinned below) over every non-test Go file of the repository and
# fails when it finds a copy of 80 tokens or more that is not in the list of accepted
# look-alikes below, each with its reason. The commit, O_DIRECT and decode-error code must
# exist once; cmd/packer's TestOneDurableCommit checks the first two by call site as well.
#
#   bash scripts/dupcheck.sh            # exit 0: no copies; 1: copies, listed
set -euo pipefail
cd "$(dirname "$0")/.."

DUPL_VERSION=v1.0.0
THRESHOLD=80
dupl="$(go env GOPATH)/bin/dupl"
if [ ! -x "$dupl" ] || ! go version -m "$dupl" 2>/dev/null | grep -q "mibk/dupl.*$DUPL_VERSION"; then
  go install "github.com/mibk/dupl@$DUPL_VERSION"
fi

# Accepted look-alikes (a file, or a pair "a|b" in either order): same shape, different work.
accepted=(
  # Per-tap unrolled resampling loops: the unrolling is the point (see the file's doc).
  "transforms/resample_taps.go"
  # Pixel conversion loops, one per image type and byte width, kept apart for speed.
  "transforms/color.go"
  # Two cobra command literals: same fields, different commands.
  "cmd/packer/cmd_inspect.go|cmd/packer/cmd_verify.go"
)

is_accepted() {
  local a=$1 b=$2 e
  for e in "${accepted[@]}"; do
    case "$e" in
      *"|"*) [ "$a|$b" = "$e" ] || [ "$b|$a" = "$e" ] && return 0 ;;
      *) [ "$a" = "$e" ] && [ "$b" = "$e" ] && return 0 ;;
    esac
  done
  return 1
}

found=0
while IFS= read -r line; do
  # "path:from-to: duplicate of path:from-to"
  a=${line%%:*}
  rest=${line#*duplicate of }
  b=${rest%%:*}
  if ! is_accepted "$a" "$b"; then
    echo "copy: $line"
    found=1
  fi
done < <(git ls-files '*.go' | grep -v '_test\.go$' | "$dupl" -files -t "$THRESHOLD" -plumbing)

if [ "$found" = 1 ]; then
  echo "dupcheck: copies of $THRESHOLD tokens or more found (factor them out, or add a reasoned entry to the accepted list)"
  exit 1
fi
echo "dupcheck: no copies of $THRESHOLD tokens or more outside the accepted look-alikes"
