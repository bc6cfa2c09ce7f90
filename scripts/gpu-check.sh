#!/usr/bin/env bash
# Runs the checks of the GPU path that need a real NVIDIA GPU and writes them to one log:
#
#   scripts/gpu-check.sh [LOG]      # default LOG: docs/bench/gpu.txt
#
# The log starts with the GPU's name, the driver version and the commit, then holds, in order:
#   1. PACKER_REQUIRE_GPU=1 go test -count=1 -v -run 'Device|PTX|Cubin' ./gpu/
#      (no test may skip for want of a GPU: the variable turns those skips into failures);
#   2. the same package under the race detector;
#   3. compute-sanitizer --tool memcheck on the device resize test, where a CUDA toolkit
#      provides compute-sanitizer (else a line saying it was not run);
#   4. the device benchmarks (BenchmarkDevice: kernel time against the memory-bandwidth bound);
#   5. packer build of generated test photos (scripts/make_photos.sh) with --device gpu and
#      --device cpu, timed (images/s of each), and the two outputs compared byte for byte.
# On a machine without a usable GPU it says so and exits 1 before running anything. Any
# failed step makes the exit status non-zero; the log keeps going so every step is recorded.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
log="${1:-docs/bench/gpu.txt}"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU on this machine (nvidia-smi missing or lists no GPU); nothing run" >&2
  exit 1
fi
mkdir -p "$(dirname "$log")"
work="$(mktemp -d "${TMPDIR:-/tmp}/packer-gpu-check.XXXXXX")"
trap 'rm -rf "$work"' EXIT
status=0
{
  echo "# packer GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv,noheader | head -n 1)"
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "go: $(go version)"
} >"$log"

step() { # step NAME COMMAND...: runs the command, appends its output, records failure
  local name=$1; shift
  echo "== $name" >>"$log"
  echo "\$ $*" >>"$log"
  local t0=$SECONDS
  if "$@" >>"$log" 2>&1; then
    echo "-- $name: ok ($((SECONDS - t0)) s)" >>"$log"
  else
    echo "-- $name: FAILED (exit $?, $((SECONDS - t0)) s)" >>"$log"
    status=1
  fi
  echo >>"$log"
}

export PACKER_REQUIRE_GPU=1
step "device tests" go test -count=1 -v -run 'Device|PTX|Cubin' ./gpu/
step "race" go test -count=1 -race ./gpu/
if command -v compute-sanitizer >/dev/null 2>&1; then
  step "compile device test" go test -c -o "$work/gpu.test" ./gpu/
  step "memcheck" sh -c "cd gpu && compute-sanitizer --tool memcheck --error-exitcode 1 '$work/gpu.test' -test.run '^TestDeviceResize' -test.count=1"
else
  echo "== memcheck: not run (no compute-sanitizer: install a CUDA toolkit)" >>"$log"
  echo >>"$log"
fi
step "benchmarks" go test -count=1 -run '^$' -bench 'Device' -benchtime 20x ./gpu/

# End to end: the same photos built on the GPU and on the CPU give the same files.
timed_build() { # timed_build SET DEVICE: builds SET on DEVICE, prints images/s (wall clock)
  local s e n
  s=$(date +%s.%N)
  "$work/packer" build "$work/photos/$1" -o "$work/out-$1-$2" --resize 256 --crop 224 --device "$2" || return
  e=$(date +%s.%N)
  n=$(find "$work/photos/$1" -name '*.jpg' | wc -l)
  awk -v n="$n" -v s="$s" -v e="$e" -v set="$1" -v dev="$2" \
    'BEGIN { printf "%s --device %s: %d images in %.2f s, %.0f images/s (wall, decoding included)\n", set, dev, n, e - s, n / (e - s) }'
}
step "build packer" go build -o "$work/packer" ./cmd/packer
step "make photos" scripts/make_photos.sh "$work/photos" 2000 200
for set in imagenet 1080p; do
  for dev in gpu cpu; do
    step "build $set --device $dev" timed_build "$set" "$dev"
  done
  step "compare $set gpu vs cpu" diff -r "$work/out-$set-gpu" "$work/out-$set-cpu"
done
echo "# exit status $status" >>"$log"
echo "gpu-check: log in $log (status $status)"
exit $status
