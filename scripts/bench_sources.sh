#!/usr/bin/env bash
# scripts/bench_sources.sh [WORKDIR] [--photos N] [--repeat R] [--big REPEAT]
#
# The record-format sources against an image folder, side by side in one run: N ImageNet-like
# photos (scripts/make_photos.sh) are written as WebDataset shards, TFRecord files and Parquet
# files by the real clients (scripts/make_record_sources.py: webdataset's TarWriter, protobuf,
# pyarrow; the fixtures venv of scripts/setup.sh), then each source is packed with
# --resize 256 --crop 224 on one worker, R rounds alternating the sources; the best time of each
# gives the throughput ratio to the folder (target >= 0.95). Then the memory high-water mark
# (peak RSS) of each record-format source on the same images repeated to about 100 MB and to
# about 1 GB of input (--big, default 10x the first): flat means independent of the input size.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/packer-bench-sources}
shift || true
photos=2000; repeat=3; big=10
while [ $# -gt 0 ]; do
  case $1 in
    --photos) photos=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --big) big=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
py="${PACKER_FIXTURE_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/packer/fixtures-venv-1/bin/python}"
go build -o bin/packer ./cmd/packer
mkdir -p "$work"
[ -d "$work/photos/imagenet" ] || bash scripts/make_photos.sh "$work/photos" "$photos" 1 >/dev/null
src="$work/photos/imagenet"
mb=$(du -sm "$src" | awk '{print $1}')
[ -d "$work/r1" ] || "$py" scripts/make_record_sources.py "$src" "$work/r1" 1
small=$(( (100 + mb - 1) / mb )); [ "$small" -ge 1 ] || small=1
[ -d "$work/rs" ] || "$py" scripts/make_record_sources.py "$src" "$work/rs" "$small"
[ -d "$work/rb" ] || "$py" scripts/make_record_sources.py "$src" "$work/rb" $((small * big))
args=(--resize 256 --crop 224 --workers 1 --force)
declare -A best
kinds=(folder webdataset tfrecord parquet)
path() { if [ "$1" = folder ]; then echo "$src"; else echo "$work/$2/$1"; fi; }
for r in $(seq "$repeat"); do
  for k in "${kinds[@]}"; do
    t0=$(date +%s.%N)
    GOMAXPROCS=1 bin/packer build "$(path "$k" r1)" --from "$k" -o "$work/out-$k" "${args[@]}" >/dev/null
    t=$(echo "$(date +%s.%N) - $t0" | bc -l)
    b=${best[$k]:-999999}
    best[$k]=$(echo "if ($t < $b) $t else $b" | bc -l)
  done
done
n=$(find "$src" -type f | wc -l)
echo "one worker, GOMAXPROCS=1, --resize 256 --crop 224, $n photos ($mb MB), best of $repeat:"
for k in "${kinds[@]}"; do
  printf '  %-10s %6.2fs %7.0f images/s  ratio to folder %.3f\n' "$k" "${best[$k]}" "$(echo "$n / ${best[$k]}" | bc -l)" "$(echo "${best[folder]} / ${best[$k]}" | bc -l)"
done
echo "peak RSS (2 workers), input repeated x$small and x$((small * big)):"
for k in webdataset tfrecord parquet; do
  line="  $(printf '%-10s' "$k")"
  for set in rs rb; do
    in=$(du -sm "$work/$set/$k" | awk '{print $1}')
    /usr/bin/time -f '%M' -o "$work/rss" bin/packer build "$work/$set/$k" --from "$k" -o "$work/out-$k-$set" --resize 256 --crop 224 --workers 2 --force >/dev/null
    line="$line  $(printf '%5d MB input: %4d MB' "$in" $(( $(cat "$work/rss") / 1024 )))"
    rm -rf "$work/out-$k-$set"
  done
  echo "$line"
done
