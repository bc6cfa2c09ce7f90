#!/usr/bin/env bash
# scripts/bench_merge_link.sh [WORKDIR] [--per-file N] [--parts P] [--cut "K..."] [--runs R] [--no-full] [--repeat X]
#
# Merge time against part build time, before and after merging by link (issue 27 item 4): a
# synthetic CIFAR-10 (internal/tools/mkcifar, 5 x N records of 3073 bytes, default N=20000:
# 307 MB) is built as P parts (default 8) twice: without --cut-inputs (merged by rewriting every
# record, as before) and with --cut-inputs K for each K given (default 1000 and 12500; merged by
# hard-linking the parts' shards into place). Reports the slowest part build, each merge's time, the merge's extra disk
# (du of the parts and OUT together, hard links counted once, less du of the parts) and whether
# each merged dataset is byte-identical to the one-machine build with the same options. Merge
# times are the best of R runs (default 3; the machine may be shared); part build times are
# single runs. --no-full keeps only the manifest of each one-machine build (its shards are removed
# before the parts are built) and compares the merged dataset by its manifest (the same bytes,
# which list every file's size and SHA-256) and `packer verify` (every merged file against those
# SHA-256s): the same proof without a second copy on disk, to fit a large run on a small disk
# (the peak is then the source, the parts and one merged copy); at 10 GB:
#
#   bash scripts/bench_merge_link.sh /tmp/m10g --per-file 65000 --repeat 10 --cut "auto 12500" --runs 1 --no-full
#
# (10.0 GB of records; about 30 GB of disk at the peak: source, parts, the rewritten OUT).
# --repeat X writes each batch file X times over (the generator holds the whole dataset in
# memory, so 10 GB is made as 1 GB repeated: records of the same layout, repeated content).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/packer-bench-merge-link}
shift || true
per=20000; parts=8; cuts="1000 12500"; runs=3; full=1; repeat=1
while [ $# -gt 0 ]; do
  case $1 in
    --per-file) per=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --cut) cuts=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --no-full) full=0; shift ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
go build -o bin/packer ./cmd/packer
rm -rf "$work"; mkdir -p "$work"
go run ./internal/tools/mkcifar -kind cifar10 -per-file "$per" -dir "$work/src" >/dev/null
src="$work/src/cifar-10-batches-bin"
if [ "$repeat" -gt 1 ]; then
  for f in "$src"/*.bin; do
    for _ in $(seq 2 "$repeat"); do head -c "$(stat -c %s "$f")" "$f" >>"$f.more"; done
    cat "$f.more" >>"$f"; rm "$f.more"
  done
  per=$((per * repeat))
fi
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }
echo "packer merge: by rewriting (parts built without --cut-inputs) and by link (--cut-inputs K, K in $cuts)"
echo "source: synthetic CIFAR-10, $((5 * per)) records of 3073 bytes; $parts parts; $(nproc) cores; $(df -T "$work" | awk 'NR==2 {print $2}') file system"
for mode in rewrite $cuts; do
  d="$work/$mode"; mkdir -p "$d/parts"
  extra=(); name=rewrite
  if [ "$mode" != rewrite ]; then extra=(--cut-inputs "$mode"); name="link K=$mode"; fi
  bin/packer build "$src" -o "$d/full" "${extra[@]}" >/dev/null
  if [ "$full" = 0 ]; then
    cp "$d/full/manifest.json" "$d/full.manifest.json"; rm -rf "$d/full"
  fi
  slow=0; sum=0
  for i in $(seq 0 $((parts - 1))); do
    t0=$(now); bin/packer build "$src" -o "$d/parts/p$i" --part "$i/$parts" "${extra[@]}" >/dev/null; t1=$(now)
    s=$(secs "$t0" "$t1"); sum=$(echo "$sum + $s" | bc -l)
    slow=$(echo "if ($s > $slow) $s else $slow" | bc -l)
  done
  sync
  before=$(du -sk "$d"/parts/p*/ | awk '{s+=$1} END {print s}')
  # The merge makes OUT durable itself (fsync of every file and folder before the commit), so
  # no sync is timed; the best of R runs (the first into m, kept; the others removed).
  m=999999
  for r in $(seq 1 "$runs"); do
    o="$d/m"; [ "$r" = 1 ] || o="$d/m$r"
    t0=$(now); bin/packer merge -o "$o" "$d"/parts/p*/ >/dev/null; t1=$(now)
    m=$(echo "x = $(secs "$t0" "$t1"); if (x < $m) x else $m" | bc -l)
    if [ "$r" = 1 ]; then after=$(du -sk "$d"/parts/p*/ "$d/m" | awk '{s+=$1} END {print s}'); else rm -rf "$o"; fi
    sync
  done
  [ "$mode" = rewrite ] && rw=$m
  if [ "$full" = 0 ]; then
    if cmp -s "$d/full.manifest.json" "$d/m/manifest.json" && bin/packer verify "$d/m" >/dev/null; then
      same="yes (same manifest, verified)"
    else same=NO; fi
  elif diff -r "$d/full" "$d/m" >/dev/null; then same=yes; else same=NO; fi
  printf '%-12s %d shards; parts: slowest %.2fs, all %.2fs; merge %.2fs (%.1f%% of the slowest part, %.2f%% of all parts); parts %d KiB, extra disk of the merge %d KiB; merged == one-machine build: %s\n' \
    "$name" "$(ls "$d/m" | grep -c pks)" "$slow" "$sum" "$m" "$(echo "100 * $m / $slow" | bc -l)" "$(echo "100 * $m / $sum" | bc -l)" "$before" "$((after - before))" "$same"
  if [ "$mode" = rewrite ]; then rm -rf "$d/m"; fi  # (keeps the disk's peak at one merged copy)
  if [ "$mode" != rewrite ]; then
    t0=$(now); bin/packer merge -o "$d/m2" --remove-parts "$d"/parts/p*/ >/dev/null; t1=$(now)
    left=$(find "$d/parts" -mindepth 1 -maxdepth 1 | wc -l)
    printf '%-12s merge time %.1f%% of the rewriting merge'"'"'s\n' "$name" "$(echo "100 * $m / $rw" | bc -l)"
    printf '%-12s merge --remove-parts %.2fs; files left in the parts folder %d; OUT %d KiB\n' "$name" "$(secs "$t0" "$t1")" "$left" "$(du -sk "$d/m2" | cut -f1)"
  fi
  rm -rf "$d"
done
rm -rf "$work"
