#!/usr/bin/env bash
# scripts/bench_merge_s3.sh [--per-file N] [--parts P] [--cut K] [--runs R]
#
# Merge time of parts in a bucket, by server-side copy against the way before it and against
# the store's own floor (issue 27 item 4, the bucket half), on a real S3 server on loopback
# (versitygw, scripts/s3-server.sh): a synthetic CIFAR-10 (internal/tools/mkcifar, 5 x N
# records of 3073 bytes, default N=20000: 307 MB) is built as P parts (default 8) with
# --cut-inputs K (default 12500) into a bucket, and merged into another bucket (a) by this
# packer (every shard copied inside the store), (b) by the packer of BASE (default: main's
# merge base with HEAD, built in a temporary worktree: the copy merge before this branch), and
# (c) by the packer of OLD (default e55b0c5, the last one before the merge by copy), which
# copies the parts to local disk, merges there and uploads the result, and (d) by this packer in
# place: the same P parts built with --in-place into the dataset's prefix (their shards under
# their final names), then merge --in-place, which checks them there and writes only the
# manifest (each run builds its parts anew: a merge consumes their records). Reports the slowest part
# build, each merge's time (best of R runs, default 3, the three interleaved) and whether each
# merged dataset is byte-identical to the one-machine local build (the stored objects compared
# file by file), and the floors: the same shards copied by one CopyObject each, 16 at once,
# without any check (internal/tools/copyfloor, best of R), and cp -r of the parts' objects on
# the server's disk (what its copies cost here); then the ratios.
#
# Needs the server (bash scripts/s3-server.sh install) and bc.
set -euo pipefail
cd "$(dirname "$0")/.."
per=20000; parts=8; cut=12500; runs=3
while [ $# -gt 0 ]; do
  case $1 in
    --per-file) per=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --cut) cut=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/packer-bench-merge-s3.XXXXXX")
base=${BASE:-$(git merge-base HEAD main)}
old=${OLD:-e55b0c5}
trap 'bash scripts/s3-server.sh stop >/dev/null 2>&1 || true; git worktree remove --force "$work/base" >/dev/null 2>&1 || true; git worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go build -o bin/packer ./cmd/packer
go build -o "$work/copyfloor" ./internal/tools/copyfloor
for v in base old; do
  git worktree add --detach "$work/$v" "${!v}" >/dev/null 2>&1
  (cd "$work/$v" && go build -o "$work/packer-$v" ./cmd/packer)
done
eval "$(bash scripts/s3-server.sh start "$work/root" 2>/dev/null)"
bash scripts/s3-server.sh bucket parts >/dev/null
bash scripts/s3-server.sh bucket out >/dev/null
go run ./internal/tools/mkcifar -kind cifar10 -per-file "$per" -dir "$work/src" >/dev/null
src="$work/src/cifar-10-batches-bin"
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }
echo "packer merge of $parts parts in a bucket: after = by server-side copy (this commit, $(git rev-parse --short HEAD)); before = by server-side copy (packer of $(git rev-parse --short "$base")); old = copy here, merge, upload (packer of $(git rev-parse --short "$old"))"
echo "source: synthetic CIFAR-10, $((5 * per)) records of 3073 bytes; --cut-inputs $cut; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); best of $runs"
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
best() { echo "x = $1; if (x < $2) x else $2" | bc -l; }
t_after=999999; t_before=999999; t_old=999999; t_floor=999999; t_inplace=999999; slow_ip=0
for r in $(seq 1 "$runs"); do
  for i in $(seq 0 $((parts - 1))); do
    t0=$(now); bin/packer build "$src" -o "s3://out/inplace$r" --part "$i/$parts" --cut-inputs "$cut" --in-place >/dev/null; t1=$(now)
    s=$(secs "$t0" "$t1"); slow_ip=$(echo "if ($s > $slow_ip) $s else $slow_ip" | bc -l)
  done
  t0=$(now); bin/packer merge --in-place -o "s3://out/inplace$r" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }; t1=$(now)
  t_inplace=$(best "$(secs "$t0" "$t1")" "$t_inplace")
  for mode in after before old; do
    case $mode in after) bin=bin/packer ;; before) bin="$work/packer-base" ;; old) bin="$work/packer-old" ;; esac
    t0=$(now); "$bin" merge -o "s3://out/$mode$r" "${ps[@]}" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }; t1=$(now)
    eval "t_$mode=\$(best \$(secs $t0 $t1) \$t_$mode)"
  done
  t_floor=$(best "$("$work/copyfloor" "out/floor$r" "${ps[@]#s3://}")" "$t_floor")
done
printf 'part builds in place (--in-place): slowest %.2fs\n' "$slow_ip"
for mode in after before old inplace; do
  # The server's posix backend keeps each object as a plain file of the bucket's folder: the
  # stored bytes, compared file by file with the one-machine build.
  same=yes
  for f in "$work/full"/*; do cmp -s "$f" "$work/root/out/${mode}1/$(basename "$f")" || same=NO; done
  [ "$(ls "$work/root/out/${mode}1" | wc -l)" = "$(ls "$work/full" | wc -l)" ] || same=NO
  m=$(eval echo "\$t_$mode")
  printf '%-6s merge %.2fs (%.1f%% of the slowest part build); merged == one-machine build: %s\n' "$mode" "$m" "$(echo "100 * $m / $slow" | bc -l)" "$same"
done
printf 'floor: the %s shards copied by one CopyObject each, 16 at once, no check: %.2fs\n' "$(ls "$work/full" | grep -c pks)" "$t_floor"
# The loopback server's CopyObject copies the object's bytes on this machine's disk (a posix
# backend); cp of the parts' files is the floor of that, which a store that copies inside
# itself does not charge to the merging machine.
sync; t0=$(now); cp -r "$work/root/parts" "$work/cp"; sync; t1=$(now)
printf 'cp -r of the parts'"'"' objects on the server'"'"'s disk: %.2fs\n' "$(secs "$t0" "$t1")"
printf 'after/old %.1f%%; after/before %.1f%%; after/floor %.2f\n' "$(echo "100 * $t_after / $t_old" | bc -l)" "$(echo "100 * $t_after / $t_before" | bc -l)" "$(echo "$t_after / $t_floor" | bc -l)"
printf 'inplace/old %.1f%%; inplace/after (copy merge) %.1f%%; inplace/floor %.2f\n' "$(echo "100 * $t_inplace / $t_old" | bc -l)" "$(echo "100 * $t_inplace / $t_after" | bc -l)" "$(echo "$t_inplace / $t_floor" | bc -l)"
