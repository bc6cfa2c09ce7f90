#!/usr/bin/env bash
# scripts/bench_merge.sh [WORKDIR] [--per-file N] [--repeat R]
#
# Merge throughput against cp of the same bytes, measured side by side in one run: a synthetic
# CIFAR-10 (internal/tools/mkcifar, 5 x N records of 3073 bytes, default N=40000: 600 MB) is
# built as 4 parts; then, R times each and alternating, `packer merge` of the 4 parts and
# `cp -r` of the same 4 part folders are timed with warm caches (both read the parts from the
# page cache and write the same number of bytes). Reports the best time of each and the ratio
# merge/cp of throughputs (1.0: the merge moves bytes as fast as cp). The merged dataset is
# also compared with a one-machine build (cmp), so the timed merge is a correct one.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/packer-bench-merge}
shift || true
per=40000; repeat=3
while [ $# -gt 0 ]; do
  case $1 in
    --per-file) per=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
go build -o bin/packer ./cmd/packer
rm -rf "$work"; mkdir -p "$work"
go run ./internal/tools/mkcifar -kind cifar10 -per-file "$per" -dir "$work/src" >/dev/null
src="$work/src/cifar-10-batches-bin"
for i in 0 1 2 3; do bin/packer build "$src" -o "$work/p$i" --part "$i/4" >/dev/null; done
bin/packer build "$src" -o "$work/full" >/dev/null
bytes=$(du -sb "$work"/p[0-3] | awk '{s+=$1} END {print s}')
now() { date +%s.%N; }
best_merge=999999; best_cp=999999
for r in $(seq "$repeat"); do
  rm -rf "$work/m" "$work/c"; sync
  t0=$(now); bin/packer merge -o "$work/m" "$work"/p[0-3] >/dev/null; sync; t1=$(now)
  mkdir "$work/c"; t2=$(now); cp -r "$work"/p[0-3] "$work/c/"; sync; t3=$(now)
  m=$(echo "$t1 - $t0" | bc -l); c=$(echo "$t3 - $t2" | bc -l)
  best_merge=$(echo "if ($m < $best_merge) $m else $best_merge" | bc -l)
  best_cp=$(echo "if ($c < $best_cp) $c else $best_cp" | bc -l)
  printf 'run %d: merge %.2fs, cp %.2fs\n' "$r" "$m" "$c"
done
diff -r "$work/full" "$work/m" >/dev/null && same=yes || same=NO
printf 'bytes %d (%.0f MB); best merge %.2fs (%.0f MB/s, includes verifying the 4 parts), best cp %.2fs (%.0f MB/s); merge/cp throughput ratio %.2f; merged == one-machine build: %s\n' \
  "$bytes" "$(echo "$bytes/1000000" | bc -l)" "$best_merge" "$(echo "$bytes/1000000/$best_merge" | bc -l)" \
  "$best_cp" "$(echo "$bytes/1000000/$best_cp" | bc -l)" "$(echo "$best_cp/$best_merge" | bc -l)" "$same"
rm -rf "$work"
