#!/usr/bin/env bash
# Every row of the performance table (issue 15) in one run: packer against the physical limit
# or the fastest common alternative, side by side, contenders alternating inside each round,
# best of REPS rounds (a shared machine only ever adds time), as throughput ratios.
#
#   bash scripts/bench_vs_limits.sh [WORKDIR]     (default /tmp/packer-limits; ~4 GB free)
#   env: REPS (default 3), GB (default 2: size of the generated dataset for rows 4 and 5),
#        PHOTOS (default WORKDIR/photos, made by scripts/make_photos.sh: 1000 ImageNet-sized),
#        CPU (default 1: the core rows 1-3 are pinned to).
#
#  1. exact: `packer build --resize 256 --crop 224 --workers 1` with GOMAXPROCS=1, pinned to one
#     core, against Pillow's full decode alone of the same files in one process on the same core
#     (`Image.open(p).load()`): what libjpeg-turbo costs with nothing else done.
#  2. fast: `packer build --fast` (same flags) against OpenCV `imread` + `resize(INTER_LINEAR)` to
#     Resize(256)'s size + centre crop 224, `cv2.setNumThreads(1)`, same core.
#  3. video: `packer build --from video --clip-len 8 --resize 128 --crop 112 --workers 1` against
#     `ffmpeg -threads 1 -i f -f rawvideo -pix_fmt rgb24 /dev/null` over the same mp4 files, one
#     after another, same core; frames per second.
#  4. verify, cold: `packer verify` against `dd bs=4M iflag=direct` over the same shards, each
#     after evicting the files from the page cache.
#  5. Python reader, warm, default settings (`batches(256)`), CIFAR-sized (32x32x3) and
#     224x224x3 records, against `dd bs=4M` from the page cache; first and second epoch in one
#     process (the first checks every record's CRC; later ones remember the checked blocks).
#  1b, 2b. rows 1 and 2 again on photos with film grain (GRAIN=16: entropy nearer a camera's) and
#     on 1920x1080 photos.
#  6. the writer stage alone (go test -bench WriterStage, WriterSerial) against one worker's rate
#     (row 1), and `--workers 2` against two independent one-worker builds running at once.
# The Python contenders time their own loop (interpreter start and imports not counted, which
# favours them); packer, ffmpeg and dd are timed as whole processes.
# Needs: bin/packer's build deps, /usr/bin/python3 with Pillow and NumPy, python3-opencv
# (apt-get install python3-opencv), ffmpeg.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
W=${1:-/tmp/packer-limits}
REPS=${REPS:-3}
GB=${GB:-2}
CPU=${CPU:-1}
PHOTOS=${PHOTOS:-$W/photos}
PY=/usr/bin/python3
PIN=(taskset -c "$CPU" env GOMAXPROCS=1)
mkdir -p "$W"
go build -o bin/packer ./cmd/packer
P=$ROOT/bin/packer

echo "# scripts/bench_vs_limits.sh $*   (REPS=$REPS GB=$GB CPU=$CPU)"
echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')   commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (local changes)')"
echo "# host: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))   load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# Wall seconds of a command (nanosecond clock: /usr/bin/time's 10 ms steps are too coarse for dd
# from the page cache); the command's output is dropped, a failure stops the script.
secs() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}
evict() { for f in "$@"; do dd if="$f" iflag=nocache count=0 status=none; done; }
best() { sort -g | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

[ -d "$PHOTOS/imagenet" ] || bash scripts/make_photos.sh "$PHOTOS" 1000 0 >/dev/null
set_dir=$PHOTOS/imagenet
n_img=$(find "$set_dir" -type f | wc -l)

# A Python contender prints the seconds of its own loop.
pillow_decode='
import sys, time
from PIL import Image
files = open(sys.argv[1]).read().split()
t = time.perf_counter()
for p in files:
    with Image.open(p) as im:
        im.load()
print(time.perf_counter() - t)'
opencv_linear='
import sys, time
import cv2
cv2.setNumThreads(1)
files = open(sys.argv[1]).read().split()
t = time.perf_counter()
for p in files:
    a = cv2.imread(p, cv2.IMREAD_COLOR)
    h, w = a.shape[:2]
    if w <= h:
        nw, nh = 256, int(256 * h / w)
    else:
        nw, nh = int(256 * w / h), 256
    a = cv2.resize(a, (nw, nh), interpolation=cv2.INTER_LINEAR)
    y, x = (nh - 224) // 2, (nw - 224) // 2
    a = cv2.cvtColor(a[y:y + 224, x:x + 224], cv2.COLOR_BGR2RGB)
print(time.perf_counter() - t)'

echo
echo "== 1-2. --resize 256 --crop 224, one core (cpu $CPU): $n_img ImageNet-sized photos, then the same"
echo "   with film grain (GRAIN=16, see make_photos.py: entropy nearer a camera photo's, so the Huffman"
echo "   decoding weighs as on real photos), then 1920x1080 photos (region decoding and --fast's DCT"
echo "   scaling matter most)"
# photo_rows SET [TAG]: rows 1 and 2 on the photos of SET, alternating the four contenders each
# round; TAG, when given, names the set in the ROW lines. The exact build's times stay in t_exact.
photo_rows() {
  local set=$1 tag=${2:-} n te tp tf tc sfx=""
  [ -n "$tag" ] && sfx=" ($tag)"
  n=$(find "$set" -type f | wc -l)
  find "$set" -type f | sort >"$W/files2.txt"
  find "$set" -type f -print0 | xargs -0 cat >/dev/null
  : >"$W/t_exact" >"$W/t_pil" >"$W/t_fast" >"$W/t_cv"
  for r in $(seq "$REPS"); do
    secs "${PIN[@]}" "$P" build "$set" -o "$W/o1" --resize 256 --crop 224 --workers 1 --force >>"$W/t_exact"
    "${PIN[@]}" $PY -c "$pillow_decode" "$W/files2.txt" >>"$W/t_pil"
    secs "${PIN[@]}" "$P" build "$set" -o "$W/o2" --resize 256 --crop 224 --workers 1 --fast --force >>"$W/t_fast"
    if $PY -c 'import cv2' 2>/dev/null; then "${PIN[@]}" $PY -c "$opencv_linear" "$W/files2.txt" >>"$W/t_cv"; fi
  done
  te=$(best <"$W/t_exact") tp=$(best <"$W/t_pil") tf=$(best <"$W/t_fast")
  echo "$set: $n files, $(du -sb "$set" | awk -v n="$n" '{ printf "%.0f", $1 / n / 1000 }') KB each"
  echo "exact build $te s ($(ratio "$n" "$te") img/s)   Pillow decode alone $tp s ($(ratio "$n" "$tp") img/s)"
  echo "ROW exact/decode-alone$sfx: $(ratio "$tp" "$te")   (target >= 0.85)"
  if [ -s "$W/t_cv" ]; then
    tc=$(best <"$W/t_cv")
    echo "fast build $tf s ($(ratio "$n" "$tf") img/s)   OpenCV imread+INTER_LINEAR+crop $tc s ($(ratio "$n" "$tc") img/s)"
    echo "ROW fast/OpenCV$sfx: $(ratio "$tc" "$tf")   (target >= 1.0)"
  else
    echo "ROW fast/OpenCV$sfx: not measured: python3-opencv is not installed (apt-get install python3-opencv)"
  fi
}
photo_rows "$set_dir"
cp "$W/t_exact" "$W/t_exact1"
GRAINED=${GRAINED:-$W/grain}
[ -d "$GRAINED/imagenet" ] || GRAIN=16 bash scripts/make_photos.sh "$GRAINED" 1000 0 >/dev/null
photo_rows "$GRAINED/imagenet" grain/imagenet
[ -d "$PHOTOS/1080p" ] || bash scripts/make_photos.sh "$PHOTOS" 1000 200 >/dev/null
photo_rows "$PHOTOS/1080p" photos/1080p

echo
echo "== 3. video: 8 mp4 files of 150 frames, 640x360, H.264; clips of 8, --resize 128 --crop 112, one core"
vdir=$W/videos/c
if [ ! -d "$vdir" ]; then
  mkdir -p "$vdir"
  for i in $(seq 0 7); do
    ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi \
      -i "testsrc2=size=640x360:rate=30,noise=alls=12:allf=t+u,hue=h=$((i * 23))" \
      -frames:v 150 -c:v libx264 -preset veryfast -pix_fmt yuv420p "$vdir/v$i.mp4"
  done
fi
cat "$vdir"/*.mp4 >/dev/null
frames=$((8 * 150))
: >"$W/t_vp" >"$W/t_ff"
for r in $(seq "$REPS"); do
  secs "${PIN[@]}" "$P" build "$W/videos" --from video -o "$W/o3" --clip-len 8 --resize 128 --crop 112 --workers 1 --force >>"$W/t_vp"
  secs "${PIN[@]}" sh -c 'for f in "$@"; do ffmpeg -nostdin -hide_banner -loglevel error -threads 1 -i "$f" -f rawvideo -pix_fmt rgb24 -y /dev/null; done' sh "$vdir"/*.mp4 >>"$W/t_ff"
done
tv=$(best <"$W/t_vp") tff=$(best <"$W/t_ff")
echo "packer $tv s ($(ratio "$frames" "$tv") frames/s)   ffmpeg alone $tff s ($(ratio "$frames" "$tff") frames/s)"
echo "ROW video/ffmpeg: $(ratio "$tff" "$tv")   (target >= 0.8)"

echo
per_file=$(awk -v g="$GB" 'BEGIN { printf "%d", g * 1e9 / 3072 / 5 }')
if [ ! -f "$W/cifar/cifar-10-batches-bin/data_batch_5.bin" ]; then
  go run ./internal/tools/mkcifar -kind cifar10 -per-file "$per_file" -dir "$W/cifar" >/dev/null
fi
[ -f "$W/big/manifest.json" ] || "$P" build "$W/cifar/cifar-10-batches-bin" -o "$W/big" --force >/dev/null
shards=("$W"/big/*.pks)
bytes=$(du -cb "${shards[@]}" | tail -1 | cut -f1)
echo "== 4. verify, cold: $(ratio "$bytes" 1e9) GB in ${#shards[@]} shards"
: >"$W/t_dd" >"$W/t_v"
for r in $(seq "$REPS"); do
  evict "${shards[@]}"
  secs sh -c 'for f in "$@"; do dd if="$f" of=/dev/null bs=4M iflag=direct status=none; done' sh "${shards[@]}" >>"$W/t_dd"
  evict "${shards[@]}"
  secs "$P" verify "$W/big" >>"$W/t_v"
done
td=$(best <"$W/t_dd") tvf=$(best <"$W/t_v")
echo "packer verify $tvf s ($(ratio "$bytes" "${tvf}e9") GB/s)   dd iflag=direct $td s ($(ratio "$bytes" "${td}e9") GB/s)"
echo "ROW verify/dd cold: $(ratio "$td" "$tvf")   (target >= 0.9)"

echo
echo "== 5. Python reader, warm, default settings, against dd from the page cache"
reader_pass='
import sys, time
sys.path.insert(0, sys.argv[2])
import packer_reader
ds = packer_reader.open(sys.argv[1])
ts = []
for epoch in range(2):
    t = time.perf_counter()
    for x, y in ds.batches(256):
        pass
    ts.append(time.perf_counter() - t)
print(ts[0], ts[1])'
big224=$W/big224
if [ ! -f "$big224/manifest.json" ]; then
  $PY scripts/bench_python_reader.py --gb "$GB" --bench-dir "$big224" --repeat 1 --prefetch 1 >/dev/null
fi
for d in "$W/big" "$big224"; do
  fs=("$d"/*.pks)
  b=$(du -cb "${fs[@]}" | tail -1 | cut -f1)
  cat "${fs[@]}" >/dev/null
  : >"$W/t_pd" >"$W/t_pr"
  for r in $(seq "$REPS"); do
    secs sh -c 'for f in "$@"; do dd if="$f" of=/dev/null bs=4M status=none; done' sh "${fs[@]}" >>"$W/t_pd"
    $PY -c "$reader_pass" "$d" "$ROOT/python" >>"$W/t_pr"
  done
  tpd=$(best <"$W/t_pd") tp1=$(cut -d' ' -f1 "$W/t_pr" | best) tp2=$(cut -d' ' -f2 "$W/t_pr" | best)
  echo "$(basename "$d"): reader first epoch (record CRCs checked) $(ratio "$b" "${tp1}e9") GB/s, second epoch $(ratio "$b" "${tp2}e9") GB/s   dd warm $(ratio "$b" "${tpd}e9") GB/s"
  echo "ROW python warm/dd ($(basename "$d")), first epoch: $(ratio "$tpd" "$tp1"), later epochs: $(ratio "$tpd" "$tp2")   (target >= 0.9)"
done
echo
echo "== 6. the writer stage (item 4): alone, against one worker's rate, and 2-worker scaling"
# One worker's rate: the exact build of row 1, on one core. The writer stage alone: ImageNet-sized
# records through the shard output with no decoding (BenchmarkWriterStage: CRC-32C, SHA-256,
# writes, commits, on this machine's cores), and the part of it that stays on the build writer's
# goroutine once shards hash on goroutines of their own (BenchmarkWriterSerial): the stage's
# ceiling with enough cores for the hashing.
one=$(ratio "$n_img" "$(best <"$W/t_exact1")")
go test -run '^$' -bench 'WriterStage|WriterSerial' -benchtime 6000x -count "$REPS" ./output/shards/ >"$W/wbench"
for b in WriterStage WriterSerial; do
  rps=$(grep "^Benchmark$b" "$W/wbench" | awk '{ for (i = 1; i < NF; i++) if ($(i+1) == "records/s") print $i }' | sort -g | tail -1)
  echo "$b: $rps records/s (best of $REPS), one worker $one records/s"
  echo "ROW writer ($b)/one worker: $(ratio "$rps" "$one")   (target >= 64)"
done
# 2-worker scaling: one build with --workers 2 against the machine's own ceiling, two
# independent one-worker builds of the same files running at once; on the 1000 photos (runs of
# about half a second, where a build's serial start and end weigh) and on three copies of them.
x3=$W/photos3x
if [ ! -d "$x3" ]; then
  for k in a b c; do
    for d in "$set_dir"/*/; do mkdir -p "$x3/$k$(basename "$d")" && cp "$d"* "$x3/$k$(basename "$d")/"; done
  done
fi
for set in "$set_dir" "$x3"; do
  n=$(find "$set" -type f | wc -l)
  : >"$W/t_w2" >"$W/t_pair"
  for r in $(seq "$REPS"); do
    secs "$P" build "$set" -o "$W/o6" --resize 256 --crop 224 --workers 2 --force >>"$W/t_w2"
    secs sh -c '"$1" build "$2" -o "$3a" --resize 256 --crop 224 --workers 1 --force & "$1" build "$2" -o "$3b" --resize 256 --crop 224 --workers 1 --force & wait %1 && wait %2' \
      sh "$P" "$set" "$W/o6" >>"$W/t_pair"
  done
  t2=$(best <"$W/t_w2") tpair=$(best <"$W/t_pair")
  echo "$n photos: --workers 2: $t2 s ($(ratio "$n" "$t2") img/s)   two one-worker builds at once: $tpair s ($(ratio "$((2 * n))" "$tpair") img/s together)"
  echo "ROW 2-worker scaling/two independent builds ($n photos): $(awk -v a="$tpair" -v b="$t2" 'BEGIN { printf "%.2f", a / (2 * b) }')   (target >= 0.95)"
done

echo
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
