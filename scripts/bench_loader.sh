#!/usr/bin/env bash
# Training-style loading benchmarks of issue 4, each a ratio measured side by side in one run.
#
#   scripts/bench_loader.sh [PHOTOS] [WORKDIR]
#     PHOTOS   folder made by scripts/make_photos.sh (made there, N=1000 / 200, when missing);
#              default /tmp/packer-photos; its imagenet/ set is used
#     WORKDIR  default /tmp/packer-bench-loader (cleared per run)
#   env: REPS (default 3) rounds; EPOCHS (default 20) packer epochs per measurement;
#        PASSES (default 40) full reads per HDF5/shard measurement.
#
# 1. DataLoader throughput, 224x224x3 uint8 images, shuffled, 2 worker processes, no GPU:
#    - packer: `packer build --resize 256 --crop 224` (exact) output, read by
#      packer_reader.torch.PackerIterableDataset(batch_size=256, shuffle=True, num_workers=2)
#      through DataLoader(batch_size=None, num_workers=2, persistent_workers=True), EPOCHS epochs
#      (set_epoch each), so a measurement is long enough to time.
#    - torchvision: ImageFolder(transform=Compose([Resize(256), CenterCrop(224), PILToTensor()]))
#      through DataLoader(batch_size=256, shuffle=True, num_workers=2, persistent_workers=True),
#      one epoch over the same JPEGs (page cache warm).
#    Each measurement is one fresh python process, timed from the DataLoader's creation (worker
#    start-up included) to the last batch; the CPU time includes the worker processes
#    (RUSAGE_CHILDREN after they are joined). Batches are only touched (shape), not used.
#    packer yields HWC batches, PILToTensor CHW: the same bytes per image, a different layout.
#    Also printed, not part of the ratio: packer with num_workers=0 (python/README.md's
#    recommended setting: the reader's own prefetch thread, no worker processes).
# 2. HDF5 through h5py against the shard reader, same records (the same build with
#    --format hdf5): sequential batches of 256, warm page cache, PASSES full passes per
#    measurement. h5py: Dataset.read_direct of /images and /labels slices into preallocated
#    arrays; shards: packer_reader.open(...).batches(256, copy=False) (reusable buffers, prefetch thread).
#    dd bs=4M over the same files gives the machine's warm read limit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PHOTOS=${1:-/tmp/packer-photos}
W=${2:-/tmp/packer-bench-loader}
REPS=${REPS:-3}
EPOCHS=${EPOCHS:-20}
PASSES=${PASSES:-40}
PY=/usr/bin/python3

echo "# scripts/bench_loader.sh $*   (REPS=$REPS EPOCHS=$EPOCHS PASSES=$PASSES)"
echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')   commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has local changes)')"
echo "# host: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/Mem:/ {print $2}') GB RAM   load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# torch $($PY -c 'import torch; print(torch.__version__)')   torchvision $($PY -c 'import torchvision; print(torchvision.__version__)')   Pillow $($PY -c 'import PIL; print(PIL.__version__)')   h5py $($PY -c 'import h5py; print(h5py.__version__, "HDF5", h5py.version.hdf5_version)')"

go build -o bin/packer ./cmd/packer
P=$ROOT/bin/packer
if [ ! -d "$PHOTOS/imagenet" ]; then
  scripts/make_photos.sh "$PHOTOS" 1000 200
fi
SRC=$PHOTOS/imagenet
rm -rf "$W"; mkdir -p "$W"
"$P" build "$SRC" -o "$W/shards" --resize 256 --crop 224 >/dev/null
"$P" build "$SRC" -o "$W/hdf5" --resize 256 --crop 224 --format hdf5 >/dev/null
N=$(find "$SRC" -name '*.jpg' | wc -l)
echo "# data: $SRC, $N JPEGs ($(du -sh "$SRC" | cut -f1)); packed: $(du -sh "$W/shards" | cut -f1) of shards, $(du -sh "$W/hdf5" | cut -f1) of HDF5"

cat >"$W/loader.py" <<'EOF'
"""loader.py KIND PATH EPOCHS -> prints "wall cpu images bytes"."""
import resource, sys, time
import torch
from torch.utils.data import DataLoader
kind, path, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(1)


def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


if kind.startswith("packer"):
    from packer_reader.torch import PackerIterableDataset
    nw = 0 if kind == "packer-w0" else 2
    data = PackerIterableDataset(path, batch_size=256, shuffle=True, seed=1, num_workers=nw)
    mk = lambda: DataLoader(data, batch_size=None, num_workers=nw, persistent_workers=nw > 0)
else:
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    data = ImageFolder(path, transform=T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()]))
    mk = lambda: DataLoader(data, batch_size=256, shuffle=True, num_workers=2, persistent_workers=True)
torch.manual_seed(1)
t0, c0 = time.perf_counter(), cpu()
loader = mk()
n = nbytes = 0
for e in range(epochs):
    if hasattr(data, "set_epoch"):
        data.set_epoch(e)
    for images, labels in loader:
        n += images.shape[0]
        nbytes += images.numel() * images.element_size()
wall = time.perf_counter() - t0
if getattr(loader, "_iterator", None) is not None:
    loader._iterator._shutdown_workers()  # join the workers, so their CPU time is counted
del loader
print(f"{wall:.3f} {cpu() - c0:.3f} {n} {nbytes}")
EOF

cat >"$W/readers.py" <<'EOF'
"""readers.py KIND OUT PASSES -> prints "wall cpu images bytes"."""
import os, sys, time
import numpy as np
kind, out, passes = sys.argv[1], sys.argv[2], int(sys.argv[3])
B = 256
n = nbytes = 0
if kind == "h5py":
    import h5py
    f = h5py.File(os.path.join(out, "data.h5"), "r")
    im, lb = f["images"], f["labels"]
    N = im.shape[0]
    buf = np.empty((B,) + im.shape[1:], im.dtype)
    lbuf = np.empty((B,), lb.dtype)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(passes):
        for s in range(0, N, B):
            e = min(N, s + B)
            im.read_direct(buf, np.s_[s:e], np.s_[0:e - s])
            lb.read_direct(lbuf, np.s_[s:e], np.s_[0:e - s])
            n += e - s
            nbytes += (e - s) * buf[0].nbytes
else:
    import packer_reader
    ds = packer_reader.open(out)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(passes):
        for images, labels in ds.batches(B, copy=False):
            n += images.shape[0]
            nbytes += images.nbytes
print(f"{time.perf_counter() - t0:.3f} {time.process_time() - c0:.3f} {n} {nbytes}")
EOF

RES=$W/results.txt; : >"$RES"
record() { # LABEL WALL CPU N BYTES (times below 10 ms count as 10 ms: the timers' resolution)
  local w=$2 c=$3
  [ "$(echo "$w < 0.01" | bc -l)" = 1 ] && w=0.01
  [ "$(echo "$c < 0.01" | bc -l)" = 1 ] && c=0.01
  echo "$1 $w $c $4 $5" >>"$RES"
  printf '    %-34s %7.2f s wall %7.2f s CPU  %9.1f img/s  %6.2f GB/s\n' "$1" "$w" "$c" "$(echo "$4/$w" | bc -l)" "$(echo "$5/$w/1000000000" | bc -l)"
}
best() { # LABEL -> "wall cpu n bytes" of the shortest run, and the median wall
  awk -v l="$1" '$1==l {k++; w[k]=$2; c[k]=$3; n=$4; b=$5} END {
    for (i=1;i<=k;i++) for (j=i+1;j<=k;j++) { if (w[j]<w[i]) {t=w[i];w[i]=w[j];w[j]=t} if (c[j]<c[i]) {t=c[i];c[i]=c[j];c[j]=t} }
    med = (k%2) ? w[(k+1)/2] : (w[k/2]+w[k/2+1])/2
    printf "%s %s %s %s %s", w[1], c[1], n, b, med }' "$RES"
}
summary() {
  for l in "$@"; do
    read -r w c n b m <<<"$(best "$l")"
    printf '  %-34s best %9.1f img/s (median %9.1f)  %6.2f GB/s   %8.1f img/CPU-s\n' "$l" "$(echo "$n/$w" | bc -l)" "$(echo "$n/$m" | bc -l)" "$(echo "$b/$w/1000000000" | bc -l)" "$(echo "$n/$c" | bc -l)"
  done
}
ratio() { # A B TEXT
  read -r aw ac an _ am <<<"$(best "$1")"; read -r bw bc bn _ bm <<<"$(best "$2")"
  printf '  RATIO %-40s %6.2fx wall-clock best (median %6.2fx)   %6.2fx per CPU-second   %s\n' "$1 / $2:" \
    "$(echo "($an/$aw)/($bn/$bw)" | bc -l)" "$(echo "($an/$am)/($bn/$bm)" | bc -l)" "$(echo "($an/$ac)/($bn/$bc)" | bc -l)" "$3"
}
load() { echo "  [load average: $(cut -d' ' -f1-3 /proc/loadavg)]"; }
run() { # LABEL SCRIPT ARGS...
  local label=$1; shift
  local out
  out=$(PYTHONPATH=$ROOT/python $PY "$@" | tail -1) || { echo "FAILED: $*"; exit 1; }
  # shellcheck disable=SC2086
  record "$label" $out
}

find "$SRC" -name '*.jpg' -exec cat {} + >/dev/null
cat "$W"/shards/* "$W"/hdf5/* >/dev/null

echo
echo "== 1. DataLoader, shuffled, 2 workers: packer_reader ($EPOCHS epochs per run) vs torchvision ImageFolder (1 epoch per run)"; load
for r in $(seq "$REPS"); do
  echo "  round $r"
  run packer-dataloader-w2 "$W/loader.py" packer "$W/shards" "$EPOCHS"
  run imagefolder-dataloader-w2 "$W/loader.py" imagefolder "$SRC" 1
  run packer-dataloader-w0 "$W/loader.py" packer-w0 "$W/shards" "$EPOCHS"
done
load
summary packer-dataloader-w2 imagefolder-dataloader-w2 packer-dataloader-w0
ratio packer-dataloader-w2 imagefolder-dataloader-w2 "(target >= 30)"
ratio packer-dataloader-w0 imagefolder-dataloader-w2 "(packer's recommended num_workers=0; same ImageFolder)"

echo
echo "== 2. sequential batches of 256, warm: h5py read_direct on data.h5 vs packer_reader on shards ($PASSES passes per run)"; load
SHB=$(cat "$W"/shards/*.pks | wc -c); H5B=$(wc -c <"$W/hdf5/data.h5")
for r in $(seq "$REPS"); do
  echo "  round $r"
  run shard-reader "$W/readers.py" shards "$W/shards" "$PASSES"
  run h5py-read_direct "$W/readers.py" h5py "$W/hdf5" "$PASSES"
  read -r e u s <<<"$(/usr/bin/time -f '%e %U %S' sh -c "for i in \$(seq $PASSES); do for f in $W/shards/*.pks; do dd if=\$f of=/dev/null bs=4M status=none; done; done" 2>&1 | tail -1)"
  record dd-shards "$e" "$(echo "$u + $s" | bc -l)" $((N * PASSES)) $((SHB * PASSES))
  read -r e u s <<<"$(/usr/bin/time -f '%e %U %S' sh -c "for i in \$(seq $PASSES); do dd if=$W/hdf5/data.h5 of=/dev/null bs=4M status=none; done" 2>&1 | tail -1)"
  record dd-hdf5 "$e" "$(echo "$u + $s" | bc -l)" $((N * PASSES)) $((H5B * PASSES))
done
load
echo "  (GB/s: image bytes delivered per second; for dd, file bytes read per second)"
summary shard-reader h5py-read_direct dd-shards dd-hdf5
ratio shard-reader h5py-read_direct "(shard reader over h5py)"
ratio shard-reader dd-shards "(shard reader over dd on the same files, warm)"
echo "# done $(date -u '+%H:%M:%S UTC')"
