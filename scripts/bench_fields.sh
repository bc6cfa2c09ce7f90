#!/usr/bin/env bash
# scripts/bench_fields.sh [WORKDIR] [--photos N] [--repeat R]
#
# Samples with fields against the image-only build of the same images, side by side in one run:
# N ImageNet-like photos (scripts/make_photos.sh) packed as an image folder, as a COCO
# detection file naming the same photos (3 boxes each: boxes, category, iscrowd, area fields)
# and as image/mask pairs (a palette PNG mask per photo), each with --resize 256 --crop 224 on
# one worker, R rounds alternating the three; the best time of each gives the build throughput
# ratio to the folder. Then the Python reader: every record of each dataset read in batches of
# 64 (dicts for the datasets with fields), best of R, records/s and the ratio to the image-only
# dataset.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/packer-bench-fields}
shift || true
photos=1000; repeat=3
while [ $# -gt 0 ]; do
  case $1 in
    --photos) photos=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
PY=/usr/bin/python3
go build -o bin/packer ./cmd/packer
mkdir -p "$work"
[ -d "$work/photos/imagenet" ] || bash scripts/make_photos.sh "$work/photos" "$photos" 1 >/dev/null
src="$work/photos/imagenet"
if [ ! -f "$work/coco.json" ]; then
  $PY - "$src" "$work" <<'PYEOF'
import json, os, sys
import numpy as np
from PIL import Image
src, work = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
images, anns = [], []
os.makedirs(os.path.join(work, "masks"), exist_ok=True)
for root, _, files in sorted(os.walk(src)):
    for f in sorted(files):
        rel = os.path.relpath(os.path.join(root, f), src)
        w, h = Image.open(os.path.join(src, rel)).size
        iid = len(images) + 1
        images.append({"id": iid, "file_name": rel, "width": w, "height": h})
        for k in range(3):
            bw, bh = rng.uniform(10, w / 2), rng.uniform(10, h / 2)
            anns.append({"id": len(anns) + 1, "image_id": iid, "bbox": [rng.uniform(0, w - bw), rng.uniform(0, h - bh), bw, bh],
                         "category_id": int(rng.integers(1, 81)), "iscrowd": 0, "area": bw * bh})
        m = Image.fromarray(rng.integers(0, 21, (h // 8, w // 8), dtype=np.uint8), "L").resize((w, h), Image.NEAREST).convert("P")
        d = os.path.join(work, "masks", os.path.dirname(rel))
        os.makedirs(d, exist_ok=True)
        m.save(os.path.join(d, os.path.splitext(os.path.basename(rel))[0] + ".png"))
cats = [{"id": i, "name": "c%d" % i} for i in range(1, 81)]
json.dump({"images": images, "annotations": anns, "categories": cats}, open(os.path.join(work, "coco.json"), "w"))
PYEOF
fi
args=(--resize 256 --crop 224 --workers 1 --force)
declare -A best
kinds=(folder coco pairs)
for r in $(seq "$repeat"); do
  for k in "${kinds[@]}"; do
    case $k in
      folder) cmd=(bin/packer build "$src" -o "$work/out-$k" "${args[@]}") ;;
      coco) cmd=(bin/packer build "$work/coco.json" --from coco --images "$src" -o "$work/out-$k" "${args[@]}") ;;
      pairs) cmd=(bin/packer build "$src" --from pairs --masks "$work/masks" -o "$work/out-$k" "${args[@]}") ;;
    esac
    t0=$(date +%s.%N); "${cmd[@]}" >/dev/null 2>&1; t1=$(date +%s.%N)
    t=$(echo "$t1 - $t0" | bc)
    if [ -z "${best[$k]:-}" ] || [ "$(echo "$t < ${best[$k]}" | bc)" = 1 ]; then best[$k]=$t; fi
  done
done
for k in "${kinds[@]}"; do bin/packer verify "$work/out-$k" >/dev/null; done
echo "build, $(nproc) cores, 1 worker, --resize 256 --crop 224, $photos photos, best of $repeat:"
for k in "${kinds[@]}"; do
  printf '  %-7s %6.2f s  %7.1f images/s  ratio to folder %.2f\n' "$k" "${best[$k]}" "$(echo "$photos / ${best[$k]}" | bc -l)" "$(echo "${best[folder]} / ${best[$k]}" | bc -l)"
done
PYTHONPATH=python $PY - "$work" "$repeat" <<'PYEOF'
import sys, time
import packer_reader
work, repeat = sys.argv[1], int(sys.argv[2])
res = {}
for k in ("folder", "coco", "pairs"):
    ds = packer_reader.open(f"{work}/out-{k}")
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter(); n = 0
        for b in ds.batches(64):
            n += len(b["image"]) if isinstance(b, dict) else len(b[0])
        t = time.perf_counter() - t0
        best = t if best is None else min(best, t)
    res[k] = n / best
print("python reader, batches of 64, warm page cache, best of %d:" % repeat)
for k, v in res.items():
    print("  %-7s %9.0f records/s  ratio to folder %.2f" % (k, v, v / res["folder"]))
PYEOF
