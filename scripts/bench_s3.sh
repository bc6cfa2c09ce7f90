#!/usr/bin/env bash
# Object-storage benchmarks against a real S3 server on loopback (versitygw, scripts/s3-server.sh):
#
#  1. reader: `packer bench s3://...` reads the dataset with the Go Loader through the store and,
#     in the same run, with a plain loop of parallel ranged GETs (8 in flight, 8 MiB each) over
#     the same objects; it prints the ratio reader/GETs (target >= 0.9), in order and shuffled.
#     Then scripts/s3shuffle: the Loader's order-2 shuffled epochs against a plain loop of
#     parallel ranged GETs of the same records in the same order, one GET per record, as many
#     in flight as the Loader (target >= 0.8; the dataset is larger than half the chunk cache,
#     so the Loader reads exact ranged GETs).
#  2. upload: the publish phase of `packer build -o s3://...` (upload_seconds in --json: every
#     data object sent, its SHA-256 checked, read back and checked again, the manifest last; the
#     shards are uploaded as they are finished, so this is the time during which an upload ran,
#     overlapping the build, plus the manifest's)
#     against a plain client's PUT of the same files (boto3 put_object, one request per file,
#     bodies already in memory), as a ratio of throughputs (target >= 0.8).
#
#   bash scripts/bench_s3.sh [RESIZE]      (default 64: fashion-mnist train at 64x64, 245 MB)
#
# Needs bin/packer (go build -o bin/packer ./cmd/packer), python3-boto3, and the server
# (bash scripts/s3-server.sh install). Prints load average and commit; results go to
# docs/bench/s3.txt by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
RESIZE=${1:-64}
PY=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/packer-bench-s3.XXXXXX")
trap 'bash scripts/s3-server.sh stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
eval "$(bash scripts/s3-server.sh start "$work/root" 2>/dev/null)"
bash scripts/s3-server.sh bucket bench >/dev/null
echo "commit $(git rev-parse --short HEAD); load average $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"

./bin/packer build /usr/share/datasets/fashion-mnist --resize "$RESIZE" -o "$work/local" --shard-size 64MiB >/dev/null
bytes=$(du -sb "$work/local" | cut -f1)
echo "dataset: fashion-mnist train at ${RESIZE}x${RESIZE}, $bytes bytes in $(ls "$work/local" | wc -l) files"

echo "== upload: packer's publish vs a plain client's PUT of the same files (alternating, 3 runs each)"
for i in 1 2 3; do
  up=$(./bin/packer build /usr/share/datasets/fashion-mnist --resize "$RESIZE" -o "s3://bench/up$i" --shard-size 64MiB --json 2>/dev/null |
    $PY -c 'import json,sys; print(json.load(sys.stdin)["upload_seconds"])')
  put=$($PY - "$work/local" "put$i" <<'PYEOF'
import os, sys, time, boto3
from botocore.config import Config
from concurrent.futures import ThreadPoolExecutor
d, prefix = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  config=Config(s3={"addressing_style": "path"}, max_pool_connections=8))
bodies = {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}
t = time.perf_counter()
with ThreadPoolExecutor(4) as ex:
    list(ex.map(lambda n: s3.put_object(Bucket="bench", Key=prefix + "/" + n, Body=bodies[n]), bodies))
print(time.perf_counter() - t)
PYEOF
)
  $PY -c "b=$bytes; u=$up; p=$put; print(f'run $i: packer publish {b/u/1e6:8.1f} MB/s ({u:.2f}s)   plain PUT {b/p/1e6:8.1f} MB/s ({p:.2f}s)   ratio {p/u:.3f}')"
done

echo "== reader: packer bench s3:// (Go Loader vs parallel ranged GETs)"
./bin/packer bench s3://bench/up1 --repeat 3
echo "-- shuffled"
./bin/packer bench s3://bench/up1 --repeat 3 --shuffle
echo "-- order-2 shuffled epochs: Go Loader vs parallel ranged GETs of the same records"
go run ./scripts/s3shuffle -repeat 3 s3://bench/up1
