#!/usr/bin/env bash
# Benchmarks of the core (issue 2), each a ratio measured side by side in one run:
#  1. CIFAR packing: MB/s written by `packer build` vs `dd` writing the same number of bytes.
#  2. Reader: one full pass of `packer bench` (the streaming batch loader) over a >= 2 GB
#     dataset vs `dd bs=4M` on the same files, cold (evicted, O_DIRECT) and warm (page cache).
#  3. verify: `packer verify` vs `dd bs=4M iflag=direct` (cold) on the same files.
# Usage: scripts/bench_core.sh [WORKDIR]   (default /tmp/packer-bench; needs ~5 GB free)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/packer-bench}
mkdir -p "$W"
go build -o bin/packer ./cmd/packer
P=$PWD/bin/packer
PER_FILE=${PER_FILE:-140000}   # 5 files x 140000 records x 3072 bytes = 2.15 GB of records

if [ ! -f "$W/cifar-10-batches-bin/data_batch_5.bin" ]; then
  go run ./internal/tools/mkcifar -kind cifar10 -per-file "$PER_FILE" -dir "$W" >/dev/null
fi

evict() { # drop files from the page cache (GNU dd: iflag=nocache count=0 = posix_fadvise DONTNEED)
  for f in "$@"; do dd if="$f" iflag=nocache count=0 status=none; done
}
secs() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -1; }

echo "== 1. CIFAR packing ($(du -sh "$W/cifar-10-batches-bin" | cut -f1) of source, source in page cache)"
cat "$W"/cifar-10-batches-bin/*.bin >/dev/null
rm -rf "$W/out"
t_build=$(secs "$P" build "$W/cifar-10-batches-bin" -o "$W/out" --force)
bytes=$(du -cb "$W"/out/*.pks | tail -1 | cut -f1)
t_dd=$(secs dd if=/dev/zero of="$W/dd.out" bs=4M count=$(( (bytes + 4194303) / 4194304 )) conv=fsync status=none)
rm -f "$W/dd.out"
awk -v b="$bytes" -v tb="$t_build" -v td="$t_dd" 'BEGIN { printf "packer build: %.0f MB/s (%.2fs)   dd write+fsync: %.0f MB/s (%.2fs)   ratio %.2f\n", b/tb/1e6, tb, b/td/1e6, td, (b/tb)/(b/td) }'

files=("$W"/out/*.pks)
echo
echo "== 2. reader, full pass over $(du -sh "$W/out" | cut -f1) in ${#files[@]} shards"
for mode in cold warm; do
  for i in 1 2 3; do
    if [ $mode = cold ]; then evict "${files[@]}"; t=$(secs sh -c "for f in ${files[*]}; do dd if=\$f of=/dev/null bs=4M iflag=direct status=none; done")
    else cat "${files[@]}" >/dev/null; t=$(secs sh -c "for f in ${files[*]}; do dd if=\$f of=/dev/null bs=4M status=none; done"); fi
    echo "dd $mode: $(awk -v b="$bytes" -v t="$t" 'BEGIN{printf "%.2f GB/s (%.2fs)", b/t/1e9, t}')"
  done
  flag=""; [ $mode = cold ] && flag="--cold"
  "$P" bench "$W/out" --batch 256 --repeat 3 $flag
done

echo
echo "== 3. verify (cold) vs dd iflag=direct (cold)"
for i in 1 2; do
  evict "${files[@]}"; t_dd=$(secs sh -c "for f in ${files[*]}; do dd if=\$f of=/dev/null bs=4M iflag=direct status=none; done")
  evict "${files[@]}"; t_v=$(secs "$P" verify "$W/out")
  awk -v b="$bytes" -v tv="$t_v" -v td="$t_dd" 'BEGIN { printf "packer verify: %.2f GB/s (%.2fs)   dd: %.2f GB/s (%.2fs)   ratio %.2f\n", b/tv/1e9, tv, b/td/1e9, td, td/tv }'
done
