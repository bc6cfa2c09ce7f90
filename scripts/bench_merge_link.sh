#!/usr/bin/env bash
# scripts/bench_merge_link.sh [WORKDIR] [--per-file N] [--parts P] [--cut "K..."]
#
# Merge time against part build time, before and after merging by link (issue 27 item 4): a
# synthetic CIFAR-10 (internal/tools/mkcifar, 5 x N records of 3073 bytes, default N=20000:
# 307 MB) is built as P parts (default 8) twice: without --cut-inputs (merged by rewriting every
# record, as before) and with --cut-inputs K for each K given (default 1000 and 12500; merged by
# hard-linking the parts' shards into place). Reports the slowest part build, each merge's time, the merge's extra disk
# (du of the parts and OUT together, hard links counted once, less du of the parts) and whether
# each merged dataset is byte-identical to the one-machine build with the same options. Merge
# times are the best of 3 (the machine may be shared); part build times are single runs.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/packer-bench-merge-link}
shift || true
per=20000; parts=8; cuts="1000 12500"
while [ $# -gt 0 ]; do
  case $1 in
    --per-file) per=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --cut) cuts=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
go build -o bin/packer ./cmd/packer
rm -rf "$work"; mkdir -p "$work"
go run ./internal/tools/mkcifar -kind cifar10 -per-file "$per" -dir "$work/src" >/dev/null
src="$work/src/cifar-10-batches-bin"
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }
echo "packer merge: by rewriting (parts built without --cut-inputs) and by link (--cut-inputs K, K in $cuts)"
echo "source: synthetic CIFAR-10, $((5 * per)) records of 3073 bytes; $parts parts; $(nproc) cores; $(df -T "$work" | awk 'NR==2 {print $2}') file system"
for mode in rewrite $cuts; do
  d="$work/$mode"; mkdir -p "$d/parts"
  extra=(); name=rewrite
  if [ "$mode" != rewrite ]; then extra=(--cut-inputs "$mode"); name="link K=$mode"; fi
  bin/packer build "$src" -o "$d/full" "${extra[@]}" >/dev/null
  slow=0; sum=0
  for i in $(seq 0 $((parts - 1))); do
    t0=$(now); bin/packer build "$src" -o "$d/parts/p$i" --part "$i/$parts" "${extra[@]}" >/dev/null; t1=$(now)
    s=$(secs "$t0" "$t1"); sum=$(echo "$sum + $s" | bc -l)
    slow=$(echo "if ($s > $slow) $s else $slow" | bc -l)
  done
  sync
  before=$(du -sk "$d"/parts/p*/ | awk '{s+=$1} END {print s}')
  # The merge makes OUT durable itself (fsync of every file and folder before the commit), so
  # no sync is timed; the best of 3 runs (the first into m, kept; the others removed).
  m=999999
  for r in 1 2 3; do
    o="$d/m"; [ "$r" = 1 ] || o="$d/m$r"
    t0=$(now); bin/packer merge -o "$o" "$d"/parts/p*/ >/dev/null; t1=$(now)
    m=$(echo "x = $(secs "$t0" "$t1"); if (x < $m) x else $m" | bc -l)
    if [ "$r" = 1 ]; then after=$(du -sk "$d"/parts/p*/ "$d/m" | awk '{s+=$1} END {print s}'); else rm -rf "$o"; fi
    sync
  done
  [ "$mode" = rewrite ] && rw=$m
  diff -r "$d/full" "$d/m" >/dev/null && same=yes || same=NO
  printf '%-12s %d shards; parts: slowest %.2fs, all %.2fs; merge %.2fs (%.1f%% of the slowest part, %.2f%% of all parts); parts %d KiB, extra disk of the merge %d KiB; merged == one-machine build: %s\n' \
    "$name" "$(ls "$d/m" | grep -c pks)" "$slow" "$sum" "$m" "$(echo "100 * $m / $slow" | bc -l)" "$(echo "100 * $m / $sum" | bc -l)" "$before" "$((after - before))" "$same"
  if [ "$mode" != rewrite ]; then
    t0=$(now); bin/packer merge -o "$d/m2" --remove-parts "$d"/parts/p*/ >/dev/null; t1=$(now)
    left=$(find "$d/parts" -mindepth 1 -maxdepth 1 | wc -l)
    printf '%-12s merge time %.1f%% of the rewriting merge'"'"'s\n' "$name" "$(echo "100 * $m / $rw" | bc -l)"
    printf '%-12s merge --remove-parts %.2fs; files left in the parts folder %d; OUT %d KiB\n' "$name" "$(secs "$t0" "$t1")" "$left" "$(du -sk "$d/m2" | cut -f1)"
  fi
  rm -rf "$d"
done
rm -rf "$work"
