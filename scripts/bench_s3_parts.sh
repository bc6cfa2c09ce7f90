#!/usr/bin/env bash
# A build in 3 parts from a bucket (real S3 server on loopback: versitygw, scripts/s3-server.sh)
# against the same build from the same files on local disk:
#
#  - local-to-local: the 3 parts built one after another from the local folder into local folders;
#  - bucket-to-local: the same parts from s3://bench/photos (read where it is: each part lists the
#    prefix and GETs its own images);
#  - bucket-to-bucket: the same parts into s3://bench/parts/pI;
#  - before: bucket-to-local as the parts read a bucket before (each part copied the whole prefix
#    to local disk first), reproduced with --source-cache in a new folder below each part's $TMPDIR.
#
# For each: the sum of the 3 parts' wall times, the ratio local time / this time (target >= 0.8),
# and the local-disk high-water mark below $TMPDIR (allocated bytes, du, sampled every 20 ms while
# a part runs: the view of the listing, any local copy, and for a bucket OUT the part's own
# staged output). The merged parts are checked to be the bytes of the one-machine local build.
#
#   bash scripts/bench_s3_parts.sh [N]     (default 2000 ImageNet-like JPEGs, scripts/make_photos.sh)
#
# Needs bin/packer (go build -o bin/packer ./cmd/packer), python3-boto3, Pillow and the server
# (bash scripts/s3-server.sh install). Results go to docs/bench/ by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}
PY=/usr/bin/python3
PACKER=$PWD/bin/packer
work=$(mktemp -d "${TMPDIR:-/tmp}/packer-bench-s3-parts.XXXXXX")
trap 'bash scripts/s3-server.sh stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
eval "$(bash scripts/s3-server.sh start "$work/root" 2>/dev/null)"
bash scripts/s3-server.sh bucket bench >/dev/null
echo "commit $(git rev-parse --short HEAD); load average $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"

bash scripts/make_photos.sh "$work/photos" "$N" 0 >/dev/null 2>&1
src=$work/photos/imagenet
$PY - "$src" <<'PYEOF'
import os, sys, boto3
from botocore.config import Config
from concurrent.futures import ThreadPoolExecutor
root = sys.argv[1]
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))
files = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs]
def put(rel):
    with open(os.path.join(root, rel), "rb") as f:
        s3.put_object(Bucket="bench", Key="photos/" + rel, Body=f.read())
with ThreadPoolExecutor(16) as ex:
    list(ex.map(put, files))
PYEOF
echo "source: $N JPEGs, $(du -sb "$src" | cut -f1) bytes, at s3://bench/photos and in a local folder"
ARGS=(--resize 128 --crop 112 --shard-size 8MiB)
echo "build options: ${ARGS[*]}; 3 parts, built one after another"

# watch DIR FILE: writes the most bytes allocated below DIR to FILE, until FILE.stop exists.
watch() {
  local most=0 now
  while [ ! -e "$2.stop" ]; do
    now=$( (du -s -B1 "$1" 2>/dev/null || true) | cut -f1 | tail -n 1)
    if [ "${now:-0}" -gt "$most" ]; then most=$now; fi
    sleep 0.02
  done
  echo "$most" >"$2"
}

# parts NAME SRC OUTPREFIX [FLAGS...]: builds parts 0..2; prints the seconds and the high-water mark.
parts() {
  local name=$1 from=$2 to=$3; shift 3
  local total=0 most=0 t0 t1 hw i tmp a
  for i in 0 1 2; do
    tmp=$work/tmp-$name-$i
    mkdir -p "$tmp"
    local extra=()
    for a in "$@"; do extra+=("${a//@TMP@/$tmp}"); done
    watch "$tmp" "$work/hw" &
    t0=$(date +%s.%N)
    TMPDIR=$tmp "$PACKER" build "$from" -o "$to$i" --part "$i/3" "${ARGS[@]}" "${extra[@]}" >/dev/null 2>"$work/err" || { cat "$work/err"; exit 1; }
    t1=$(date +%s.%N)
    touch "$work/hw.stop"; wait
    hw=$(cat "$work/hw"); rm -f "$work/hw" "$work/hw.stop"
    total=$($PY -c "print($total + $t1 - $t0)")
    if [ "$hw" -gt "$most" ]; then most=$hw; fi
    rm -rf "$tmp"
  done
  echo "$total $most"
}

report() { # NAME SECONDS HW LOCALSECONDS
  $PY -c "print(f'{\"$1\":<18} {$2:7.2f} s   ratio local/this {$4/$2:5.3f}   local-disk high-water below \$TMPDIR {$3/1e6:9.3f} MB')"
}

# The floor the store sets: a plain client GETting every object once (boto3, 16 at a time), the
# bytes kept in memory; the parts together GET each object once too.
gets() {
  $PY - <<'PYEOF'
import os, time, boto3
from botocore.config import Config
from concurrent.futures import ThreadPoolExecutor
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))
keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix="photos/") for o in page.get("Contents", [])]
t = time.perf_counter()
with ThreadPoolExecutor(16) as ex:
    n = sum(ex.map(lambda k: len(s3.get_object(Bucket="bench", Key=k)["Body"].read()), keys))
print(f"plain GETs of the {len(keys)} objects (boto3, 16 at a time): {time.perf_counter() - t:.2f} s for {n} bytes")
PYEOF
}

for run in 1 2; do
  echo "== run $run"
  rm -rf "$work"/o-*
  gets
  read -r tl hl < <(parts local "$src" "$work/o-local/p")
  read -r tb hb < <(parts bucket "s3://bench/photos" "$work/o-bucket/p")
  read -r tbb hbb < <(parts b2b "s3://bench/photos" "s3://bench/parts$run/p")
  read -r tc hc < <(parts before "s3://bench/photos" "$work/o-before/p" --source-cache "@TMP@/copy")
  report "local-to-local" "$tl" "$hl" "$tl"
  report "bucket-to-local" "$tb" "$hb" "$tl"
  report "bucket-to-bucket" "$tbb" "$hbb" "$tl"
  report "before (copy)" "$tc" "$hc" "$tl"
done
echo "part output sizes (bytes; a bucket OUT stages its part below \$TMPDIR): $(du -sb "$work"/o-local/p0 "$work"/o-local/p1 "$work"/o-local/p2 | cut -f1 | tr '\n' ' ')"
"$PACKER" build "$src" -o "$work/whole" "${ARGS[@]}" >/dev/null 2>&1
"$PACKER" merge -o "$work/m-bucket" "$work"/o-bucket/p0 "$work"/o-bucket/p1 "$work"/o-bucket/p2 >/dev/null 2>&1
"$PACKER" merge -o "$work/m-b2b" s3://bench/parts1/p0 s3://bench/parts1/p1 s3://bench/parts1/p2 >/dev/null 2>&1
for m in m-bucket m-b2b; do
  if diff -r "$work/whole" "$work/$m" >/dev/null; then echo "$m: merged parts are the bytes of the one-machine local build"; else echo "$m: DIFFERS from the local build"; exit 1; fi
done
