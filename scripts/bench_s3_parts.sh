#!/usr/bin/env bash
# A build in 3 parts from a bucket (real S3 server on loopback: versitygw, scripts/s3-server.sh)
# against the same build from the same files on local disk:
#
#  - local-to-local: the 3 parts built one after another from the local folder into local folders;
#  - bucket-to-local: the same parts from s3://bench/photos (read where it is: each part lists the
#    prefix and GETs its own images);
#  - bucket-to-bucket: the same parts into s3://bench/partsR/pI (each shard uploaded as it is
#    finished; its SHA-256 verified by the store, or read back where the store does not verify);
#  - planned bucket-to-bucket: the same, each part built from a plan of the bucket (packer plan,
#    made once, not timed), which names its objects: the part lists nothing and makes no view
#    (without a plan each part lists the prefix into one empty file per object in $TMPDIR);
#  - with PACKER_BEFORE=BINARY set, bucket-to-bucket again with that (older) packer binary, side
#    by side with this one.
#
# For each: the sum of the 3 parts' wall times, the ratio local time / this time (target >= 0.8),
# the CPU seconds (user + sys) of packer (the 3 parts) and of the server process over the same
# time, and the local-disk high-water mark below $TMPDIR (allocated bytes, du, sampled every
# 20 ms while a part runs: the view of the listing, and for a bucket OUT the shards not uploaded
# yet). The load average is printed with each run. The floors the store sets, in the same run: a
# plain client (boto3, 16 at a time) GETting every source object once, and PUTting the bytes of
# the 3 local parts' files; each with its own and the server's CPU. The merged parts are checked
# to be the bytes of the one-machine local build.
#
#   bash scripts/bench_s3_parts.sh [N] [SET]          (PACKER_BEFORE=BINARY, PACKER_BENCH_PHOTOS=DIR)
#
#   SET imagenet (default): N ImageNet-like JPEGs (default 2000; scripts/make_photos.sh: mostly
#       500 px on the longer side, about 16 KB each), built with --resize 128 --crop 112: the
#       store's cost per object is large against the decoding's.
#   PACKER_BENCH_PIN=1 pins the server (all its threads) to CPU 1 and every packer run and plain
#       client to CPU 0 (taskset), local-to-local included: the store then does its work on a core
#       of its own, as a real store does on machines of its own, and each mode's client side gets
#       one core. Without it everything shares the machine's cores, the store included.
#
#   SET 1080p: N 1920x1080 JPEGs (default 300) with film grain (GRAIN=16, entropy nearer a camera
#       photo's), built with --resize 224 --crop 224 as a training set would be.
#
# Needs bin/packer (go build -o bin/packer ./cmd/packer), python3-boto3, Pillow and the server
# (bash scripts/s3-server.sh install). Results go to docs/bench/ by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
SET=${2:-imagenet}
case "$SET" in
  imagenet) N=${1:-2000}; ARGS=(--resize 128 --crop 112 --shard-size 8MiB) ;;
  1080p) N=${1:-300}; ARGS=(--resize 224 --crop 224 --shard-size 8MiB) ;;
  *) echo "usage: $0 [N] [imagenet|1080p]" >&2; exit 2 ;;
esac
PY=/usr/bin/python3
PACKER=$PWD/bin/packer
BEFORE=${PACKER_BEFORE:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/packer-bench-s3-parts.XXXXXX")
trap 'bash scripts/s3-server.sh stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
eval "$(bash scripts/s3-server.sh start "$work/root" 2>/dev/null)"
bash scripts/s3-server.sh bucket bench >/dev/null
SERVER_PID=$(cat "$PACKER_S3_SERVER/pid")
PIN=()
if [ "${PACKER_BENCH_PIN:-0}" = 1 ]; then
  taskset -a -p -c 1 "$SERVER_PID" >/dev/null
  PIN=(taskset -c 0)
fi
TCK=$(getconf CLK_TCK)
echo "commit $(git rev-parse --short HEAD); load average $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; server: $(basename "$(dirname "$(bash scripts/s3-server.sh path)")") (keep-alive ${VGW_KEEP_ALIVE:-true}), same machine$([ ${#PIN[@]} -gt 0 ] && echo ', pinned to CPU 1; packer and the plain clients pinned to CPU 0')"

# PACKER_BENCH_PHOTOS=DIR takes the photos from DIR/$SET (made before by make_photos.sh with the
# same N and grain) instead of making them again.
photos=${PACKER_BENCH_PHOTOS:-$work/photos}
if [ ! -d "$photos/$SET" ]; then
  if [ "$SET" = imagenet ]; then
    bash scripts/make_photos.sh "$photos" "$N" 0 >/dev/null 2>&1
  else
    GRAIN=16 bash scripts/make_photos.sh "$photos" 0 "$N" >/dev/null 2>&1
  fi
fi
src=$photos/$SET
N=$(find "$src" -name '*.jpg' | wc -l)
# s3py SCRIPT ARGS...: runs a boto3 client of the server.
s3py() {
  local code=$1; shift
  "${PIN[@]}" $PY - "$@" <<PYEOF
import os, sys, time, boto3
from botocore.config import Config
from concurrent.futures import ThreadPoolExecutor
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))
def files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
def put_tree(root, prefix):
    def put(rel):
        with open(os.path.join(root, rel), "rb") as f:
            s3.put_object(Bucket="bench", Key=prefix + rel, Body=f.read())
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(put, files(root)))
$code
PYEOF
}
s3py 'put_tree(sys.argv[1], "photos/")' "$src"
echo "source: $N JPEGs ($SET), $(du -sb "$src" | cut -f1) bytes, at s3://bench/photos and in a local folder"
echo "build options: ${ARGS[*]}; 3 parts, built one after another"
"$PACKER" plan s3://bench/photos -o "$work/plan.jsonl" >/dev/null 2>&1

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

server_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }

# parts NAME BINARY SRC OUTPREFIX: builds parts 0..2; prints the seconds, the high-water mark,
# packer's CPU seconds and the server's.
parts() {
  local name=$1 bin=$2 from=$3 to=$4
  local total=0 most=0 cpu=0 t0 t1 hw i tmp s0 s1 u s
  s0=$(server_ticks)
  for i in 0 1 2; do
    tmp=$work/tmp-$name-$i
    mkdir -p "$tmp"
    watch "$tmp" "$work/hw" &
    t0=$(date +%s.%N)
    TMPDIR=$tmp /usr/bin/time -f "%U %S" -o "$work/cpu" "${PIN[@]}" "$bin" build "$from" -o "$to$i" --part "$i/3" "${ARGS[@]}" >/dev/null 2>"$work/err" || { cat "$work/err"; exit 1; }
    t1=$(date +%s.%N)
    touch "$work/hw.stop"; wait
    hw=$(cat "$work/hw"); rm -f "$work/hw" "$work/hw.stop"
    read -r u s <"$work/cpu"
    total=$($PY -c "print($total + $t1 - $t0)")
    cpu=$($PY -c "print($cpu + $u + $s)")
    if [ "$hw" -gt "$most" ]; then most=$hw; fi
    rm -rf "$tmp"
  done
  s1=$(server_ticks)
  echo "$total $most $cpu $($PY -c "print(($s1 - $s0) / $TCK)")"
}

# report NAME SECONDS HW CPU SERVERCPU LOCALSECONDS LOCALCPU: the line of a mode. "cpu ratio" is
# local-to-local's CPU seconds over this mode's, packer's and the server's together: on a machine
# shared with other work the wall times swing with the load, the CPU seconds much less.
report() {
  $PY -c "print(f'{\"$1\":<26} {$2:7.2f} s   ratio local/this {$6/$2:5.3f}   cpu packer {$4:6.2f} s, server {$5:6.2f} s, cpu ratio {$7/($4+$5):5.3f}   local-disk high-water below \$TMPDIR {$3/1e6:8.3f} MB')"
}

# floor NAME CODE ARGS...: a plain client's run, timed, with its CPU and the server's.
floor() {
  local name=$1 s0 s1 secs cpu rest; shift
  s0=$(server_ticks)
  read -r secs cpu rest < <(s3py "$@")
  s1=$(server_ticks)
  $PY -c "print(f'{\"$name\":<26} {$secs:7.2f} s   cpu client {$cpu:6.2f} s, server {($s1 - $s0) / $TCK:6.2f} s   ($rest)')"
}
GETS='
keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix="photos/") for o in page.get("Contents", [])]
t, c = time.perf_counter(), time.process_time()
with ThreadPoolExecutor(16) as ex:
    n = sum(ex.map(lambda k: len(s3.get_object(Bucket="bench", Key=k)["Body"].read()), keys))
print(f"{time.perf_counter() - t:.3f} {time.process_time() - c:.3f} GETs of {len(keys)} objects, {n} bytes")'
PUTS='
names = [os.path.join(d, f) for d in sys.argv[1:] for f in sorted(os.listdir(d))]
t, c = time.perf_counter(), time.process_time()
def put(p):
    with open(p, "rb") as f:
        data = f.read()
    s3.put_object(Bucket="bench", Key="floor/" + p.replace("/", "_"), Body=data)
    return len(data)
with ThreadPoolExecutor(16) as ex:
    n = sum(ex.map(put, names))
print(f"{time.perf_counter() - t:.3f} {time.process_time() - c:.3f} PUTs of {len(names)} files, {n} bytes")'

for run in 1 2; do
  echo "== run $run (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  rm -rf "$work"/o-*
  read -r tl hl cl sl < <(parts local "$PACKER" "$src" "$work/o-local/p")
  read -r tb hb cb sb < <(parts bucket "$PACKER" "s3://bench/photos" "$work/o-bucket/p")
  read -r tbb hbb cbb sbb < <(parts b2b "$PACKER" "s3://bench/photos" "s3://bench/parts$run/p")
  read -r tpl hpl cpl spl < <(parts planned "$PACKER" "$work/plan.jsonl" "s3://bench/planned$run/p")
  if [ -n "$BEFORE" ]; then
    read -r to ho co so < <(parts before "$BEFORE" "s3://bench/photos" "s3://bench/before$run/p")
  fi
  floor "plain GETs (floor)" "$GETS"
  floor "plain PUTs (floor)" "$PUTS" "$work"/o-local/p0 "$work"/o-local/p1 "$work"/o-local/p2
  report "local-to-local" "$tl" "$hl" "$cl" "$sl" "$tl" "$cl"
  report "bucket-to-local" "$tb" "$hb" "$cb" "$sb" "$tl" "$cl"
  report "bucket-to-bucket" "$tbb" "$hbb" "$cbb" "$sbb" "$tl" "$cl"
  report "planned bucket-to-bucket" "$tpl" "$hpl" "$cpl" "$spl" "$tl" "$cl"
  if [ -n "$BEFORE" ]; then
    report "bucket-to-bucket before" "$to" "$ho" "$co" "$so" "$tl" "$cl"
  fi
  echo "   (load average after the run $(cut -d' ' -f1-3 /proc/loadavg))"
done
echo "part output sizes (bytes): $(du -sb "$work"/o-local/p0 "$work"/o-local/p1 "$work"/o-local/p2 | cut -f1 | tr '\n' ' ')"
"$PACKER" build "$src" -o "$work/whole" "${ARGS[@]}" >/dev/null 2>&1
"$PACKER" merge -o "$work/m-bucket" "$work"/o-bucket/p0 "$work"/o-bucket/p1 "$work"/o-bucket/p2 >/dev/null 2>&1
"$PACKER" merge -o "$work/m-b2b" s3://bench/parts1/p0 s3://bench/parts1/p1 s3://bench/parts1/p2 >/dev/null 2>&1
"$PACKER" merge -o "$work/m-planned" s3://bench/planned1/p0 s3://bench/planned1/p1 s3://bench/planned1/p2 >/dev/null 2>&1
for m in m-bucket m-b2b m-planned; do
  if diff -r "$work/whole" "$work/$m" >/dev/null; then echo "$m: merged parts are the bytes of the one-machine local build"; else echo "$m: DIFFERS from the local build"; exit 1; fi
done
