#!/usr/bin/env bash
# bench_video.sh: frames per second of `packer build --from video` against the practical limit,
# ffmpeg alone decoding the same files to raw rgb24 frames that are thrown away, with the same
# parallelism (one single-threaded ffmpeg per worker, as packer runs them).
#
# usage: scripts/bench_video.sh [-n videos] [-f frames] [-s WxH] [-w workers] [-c codec]
#                               [-b "packer build flags"] [-k]
#   -n  number of generated videos (default 16)
#   -f  frames per video (default 150)
#   -s  frame size (default 640x360)
#   -w  workers / parallel ffmpeg processes (default: nproc)
#   -c  encoder: libx264 (default), mpeg4, libvpx-vp9, ffv1, mjpeg
#   -b  extra build flags (default "--resize 128 --crop 112 --clip-len 8")
#   -k  keep the generated videos and the output (printed paths)
#
# Prints frames/s of each and the ratio packer/ffmpeg (target: at least 0.8), by wall-clock
# time and by CPU time (user+sys of all processes: steadier on a shared machine).
set -euo pipefail

n=16 frames=150 size=640x360 workers=$(nproc) codec=libx264 keep=0
bflags="--resize 128 --crop 112 --clip-len 8"
while getopts "n:f:s:w:c:b:k" o; do
	case $o in
	n) n=$OPTARG ;;
	f) frames=$OPTARG ;;
	s) size=$OPTARG ;;
	w) workers=$OPTARG ;;
	c) codec=$OPTARG ;;
	b) bflags=$OPTARG ;;
	k) keep=1 ;;
	*) sed -n '2,16p' "$0"; exit 2 ;;
	esac
done

for tool in ffmpeg ffprobe go; do
	command -v "$tool" >/dev/null || { echo "bench_video: $tool not found" >&2; exit 1; }
done
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/bench_video.XXXXXX")
if [ "$keep" = 0 ]; then trap 'rm -rf "$work"' EXIT; fi

echo "building packer..."
(cd "$root" && go build -o "$work/packer" ./cmd/packer)

case $codec in
libx264) cargs=(-c:v libx264 -preset veryfast -pix_fmt yuv420p) ext=mp4 ;;
mpeg4) cargs=(-c:v mpeg4 -q:v 4) ext=mov ;;
libvpx-vp9) cargs=(-c:v libvpx-vp9 -deadline realtime -cpu-used 8 -b:v 1M) ext=webm ;;
ffv1) cargs=(-c:v ffv1) ext=mkv ;;
mjpeg) cargs=(-c:v mjpeg -q:v 4) ext=avi ;;
*) echo "bench_video: unknown codec $codec" >&2; exit 2 ;;
esac

echo "generating $n videos of $frames frames, $size, $codec..."
for i in $(seq 0 $((n - 1))); do
	cls=$work/src/class$((i % 2))
	mkdir -p "$cls"
	ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi \
		-i "testsrc2=size=$size:rate=30,noise=alls=12:allf=t+u,hue=h=$((i * 23))" \
		-frames:v "$frames" "${cargs[@]}" "$cls/v$(printf %03d "$i").$ext"
done
files=$(find "$work/src" -type f | sort)
total=$((n * frames))

# Warm the page cache so both runs read from memory.
cat $files >/dev/null

# run NAME CMD...: wall, user and sys seconds (children included) into $work/NAME.time.
TIMEFORMAT='%R %U %S'
run() {
	local name=$1
	shift
	{ time "$@" >"$work/$name.log" 2>"$work/$name.err"; } 2>"$work/$name.time" ||
		{ cat "$work/$name.err" >&2; exit 1; }
}

echo "ffmpeg alone: $workers parallel single-threaded processes, rgb24 to /dev/null..."
run ffmpeg sh -c "printf '%s\n' \"\$@\" | xargs -P $workers -I{} ffmpeg -nostdin -hide_banner -loglevel error \
	-threads 1 -filter_threads 1 -i {} -f rawvideo -pix_fmt rgb24 -y /dev/null" sh $files

echo "packer build --from video --workers $workers $bflags..."
# shellcheck disable=SC2086
run packer "$work/packer" build "$work/src" --from video --workers "$workers" $bflags -o "$work/out" --force
cat "$work/packer.log"

read -r fw fu fs <"$work/ffmpeg.time"
read -r pw pu ps <"$work/packer.time"
awk -v f="$total" -v fw="$fw" -v fc="$(echo "$fu $fs" | awk '{print $1 + $2}')" \
	-v pw="$pw" -v pc="$(echo "$pu $ps" | awk '{print $1 + $2}')" \
	-v w="$workers" -v s="$size" -v k="$codec" -v b="$bflags" 'BEGIN {
	printf "\n%d frames (%s, %s), %d workers, packer flags: %s\n", f, s, k, w, b
	printf "                 frames/s (wall)    frames per CPU-second (user+sys, children included)\n"
	printf "ffmpeg alone : %10.1f  (%6.2fs)  %10.1f  (%6.2fs)\n", f / fw, fw, f / fc, fc
	printf "packer build : %10.1f  (%6.2fs)  %10.1f  (%6.2fs)\n", f / pw, pw, f / pc, pc
	printf "ratio        : %10.2f             %10.2f            (target >= 0.80)\n", fw / pw, fc / pc
}'
if [ "$keep" = 1 ]; then echo "kept: $work"; fi
