#!/usr/bin/env bash
# The main job end to end on data this machine can obtain without network: sets everything up
# (scripts/setup.sh), packs Fashion-MNIST (Debian's dataset-fashion-mnist) and a generated
# CIFAR-10 archive in the official format, verifies both, inspects them, reads them back with
# the Go streaming reader and the Python reader, and prints throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=/usr/bin/python3
OUT=${DEMO_OUT:-demo-out}
mkdir -p "$OUT"
P=bin/packer

echo
echo "== Fashion-MNIST (train split, 60000 images) -> shards"
$P build /usr/share/datasets/fashion-mnist -o "$OUT/fmnist" --force
$P verify "$OUT/fmnist"
$P inspect "$OUT/fmnist"
$P bench "$OUT/fmnist" --batch 256

echo
echo "== generated CIFAR-10 archive (official binary layout, .tar.gz) -> shards and npy"
go run ./internal/tools/mkcifar -kind cifar10 -per-file 2000 -tgz "$OUT/cifar-10-binary.tar.gz" >/dev/null
$P build "$OUT/cifar-10-binary.tar.gz" -o "$OUT/cifar10" --force
$P verify "$OUT/cifar10"
$P build "$OUT/cifar-10-binary.tar.gz" -o "$OUT/cifar10-npy" --format npy --force
$P verify "$OUT/cifar10-npy"
$P bench "$OUT/cifar10" --batch 256

echo
echo "== read back with the Python reader (packer_reader)"
PYTHONPATH=python $PY - "$OUT/fmnist" "$OUT/cifar10-npy" <<'PYEOF'
import sys, time
import packer_reader
for path in sys.argv[1:]:
    ds = packer_reader.open(path)
    t = time.perf_counter()
    n = 0
    for images, labels in ds.batches(256):
        n += len(labels)
    dt = time.perf_counter() - t
    img, label = ds[0]
    print(f"{path}: {n} records read in {dt:.2f}s ({n/dt:,.0f} records/s); "
          f"record 0: shape {img.shape} {img.dtype}, label {label} ({ds.classes[label]})")
PYEOF
echo
echo "demo: done; outputs in $OUT/"
