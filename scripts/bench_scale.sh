#!/usr/bin/env bash
# scripts/bench_scale.sh [WORKDIR] [SIZES...]
#
# The cost curve of a build: for each size (default 10000 100000 1000000), a folder of that many
# 16x12 PNG images in 100 classes (internal/tools/mkimages; kept in WORKDIR between runs), read
# once into the page cache, is packed with --crop 8 (192-byte records) under /usr/bin/time, reporting records/s, peak RSS,
# the manifest's size, and packer's listing time: the wall time of `packer build --part 0/N`
# (which enumerates the whole folder and decodes one image) minus nothing, so it is an upper
# bound. Also the file system's own listing (`find | wc -l`) for comparison, and the build's CPU
# time (user + system, from /usr/bin/time) as records per CPU-second: on a shared machine the
# wall-clock rate moves with the other load, the CPU cost per record much less. Prints one table.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/packer-scale}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000 1000000)
go build -o bin/packer ./cmd/packer
go build -o bin/mkimages ./internal/tools/mkimages
mkdir -p "$work"
printf '%-9s %12s %12s %10s %12s %12s %12s %12s\n' images records/s "rec/CPU-s" "peak RSS" manifest "packer list" "find list" "build s"
for n in "${sizes[@]}"; do
  src="$work/src-$n"
  if [ ! -f "$src/.complete" ]; then
    rm -rf "$src"
    bin/mkimages -n "$n" -classes 100 -dir "$src"
    touch "$src/.complete"
  fi
  out="$work/out-$n"
  rm -rf "$out" "$out.list"
  sync
  # Every size is measured with its files in the page cache (read once here): a folder of 10^6
  # files written long before is otherwise read back from the disk at a few thousand small
  # files a second, which measures the disk's random reads, not packer's cost per record.
  tar -cf - -C "$src" . | cat > /dev/null
  t0=$(date +%s.%N); find "$src" -type f | wc -l >/dev/null; t1=$(date +%s.%N)
  /usr/bin/time -f '%e %M' -o "$work/time-list" bin/packer build "$src" -o "$out.list" --crop 8 --part "0/$n" >/dev/null
  /usr/bin/time -f '%e %M %U %S' -o "$work/time-build" bin/packer build "$src" -o "$out" --crop 8 --workers 2 > "$work/build.out"
  read -r bsecs rss usr sys < "$work/time-build"
  read -r lsecs _ < "$work/time-list"
  recs=$(grep -o 'packed [0-9]*' "$work/build.out" | awk '{print $2}')
  [ "$recs" = "$n" ] || { echo "bench_scale: packed $recs of $n"; exit 1; }
  msize=$(stat -c %s "$out/manifest.json")
  printf '%-9s %12.0f %12.0f %9.0fMB %11.1fkB %11.2fs %11.2fs %11.1fs\n' "$n" "$(echo "$n / $bsecs" | bc -l)" "$(echo "$n / ($usr + $sys)" | bc -l)" "$(echo "$rss / 1024" | bc -l)" \
    "$(echo "$msize / 1024" | bc -l)" "$lsecs" "$(echo "$t1 - $t0" | bc -l)" "$bsecs"
  rm -rf "$out" "$out.list" "$out.list.packer-lock" "$out.packer-lock"
done
