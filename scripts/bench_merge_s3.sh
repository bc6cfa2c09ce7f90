#!/usr/bin/env bash
# scripts/bench_merge_s3.sh [--per-file N] [--parts P] [--cut K]
#
# Merge time of parts in a bucket, by server-side copy against the way before it (issue 27 item
# 4, the bucket half), on a real S3 server on loopback (versitygw, scripts/s3-server.sh): a
# synthetic CIFAR-10 (internal/tools/mkcifar, 5 x N records of 3073 bytes, default N=20000:
# 307 MB) is built as P parts (default 8) with --cut-inputs K (default 12500) into a bucket,
# and merged into another bucket (a) by this packer (every shard copied inside the store) and
# (b) by the packer of BASE (default: main's merge base with HEAD, built in a temporary
# worktree), which copies the parts to local disk, merges there and uploads the result. Reports
# the slowest part build, each merge's time (best of 3) and whether each merged dataset is
# byte-identical to the one-machine local build (the stored objects compared file by file),
# and the time of cp -r of the parts' objects on the server's disk (what its copies cost here).
#
# Needs the server (bash scripts/s3-server.sh install) and bc.
set -euo pipefail
cd "$(dirname "$0")/.."
per=20000; parts=8; cut=12500
while [ $# -gt 0 ]; do
  case $1 in
    --per-file) per=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --cut) cut=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/packer-bench-merge-s3.XXXXXX")
base=${BASE:-$(git merge-base HEAD main)}
trap 'bash scripts/s3-server.sh stop >/dev/null 2>&1 || true; git worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go build -o bin/packer ./cmd/packer
git worktree add --detach "$work/base" "$base" >/dev/null 2>&1
(cd "$work/base" && go build -o "$work/packer-before" ./cmd/packer)
eval "$(bash scripts/s3-server.sh start "$work/root" 2>/dev/null)"
bash scripts/s3-server.sh bucket parts >/dev/null
bash scripts/s3-server.sh bucket out >/dev/null
go run ./internal/tools/mkcifar -kind cifar10 -per-file "$per" -dir "$work/src" >/dev/null
src="$work/src/cifar-10-batches-bin"
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }
echo "packer merge of $parts parts in a bucket: by server-side copy (this commit, $(git rev-parse --short HEAD)) against copy here, merge, upload (packer of $(git rev-parse --short "$base"))"
echo "source: synthetic CIFAR-10, $((5 * per)) records of 3073 bytes; --cut-inputs $cut; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
bin/packer build "$src" -o "$work/full" --cut-inputs "$cut" >/dev/null
echo "dataset: $(du -sb "$work/full" | cut -f1) bytes in $(ls "$work/full" | grep -c pks) shards"
slow=0; sum=0
for i in $(seq 0 $((parts - 1))); do
  t0=$(now); bin/packer build "$src" -o "s3://parts/p$i" --part "$i/$parts" --cut-inputs "$cut" >/dev/null; t1=$(now)
  s=$(secs "$t0" "$t1"); sum=$(echo "$sum + $s" | bc -l)
  slow=$(echo "if ($s > $slow) $s else $slow" | bc -l)
done
printf 'part builds to the bucket: slowest %.2fs, all %.2fs\n' "$slow" "$sum"
ps=(); for i in $(seq 0 $((parts - 1))); do ps+=("s3://parts/p$i"); done
for mode in copy before; do
  bin=bin/packer; [ "$mode" = copy ] || bin="$work/packer-before"
  m=999999
  for r in 1 2 3; do
    t0=$(now); "$bin" merge -o "s3://out/$mode$r" "${ps[@]}" >/dev/null 2>&1; t1=$(now)
    m=$(echo "x = $(secs "$t0" "$t1"); if (x < $m) x else $m" | bc -l)
  done
  # The server's posix backend keeps each object as a plain file of the bucket's folder: the
  # stored bytes, compared file by file with the one-machine build.
  same=yes
  for f in "$work/full"/*; do cmp -s "$f" "$work/root/out/${mode}1/$(basename "$f")" || same=NO; done
  [ "$(ls "$work/root/out/${mode}1" | wc -l)" = "$(ls "$work/full" | wc -l)" ] || same=NO
  eval "t_$mode=$m"
  printf '%-7s merge %.2fs (%.1f%% of the slowest part build); merged == one-machine build: %s\n' "$mode" "$m" "$(echo "100 * $m / $slow" | bc -l)" "$same"
done
printf 'merge by copy: %.1f%% of the time of the merge before it\n' "$(echo "100 * $t_copy / $t_before" | bc -l)"
# The loopback server's CopyObject copies the object's bytes on this machine's disk (a posix
# backend); cp of the parts' files is the floor of that, which a store that copies inside
# itself does not charge to the merging machine.
sync; t0=$(now); cp -r "$work/root/parts" "$work/cp"; sync; t1=$(now)
printf 'cp -r of the parts'"'"' objects on the server'"'"'s disk (the floor of its copies here): %.2fs\n' "$(secs "$t0" "$t1")"
