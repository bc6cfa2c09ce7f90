#!/usr/bin/env bash
# Runs the checks of the GPU path that need a real NVIDIA GPU and writes them to one log:
#
#   scripts/gpu-check.sh [LOG]                 # default LOG: docs/bench/gpu.txt
#   scripts/gpu-check.sh --prepare DIR [N]     # on a machine with Go: build what a GPU machine
#                                              # without Go needs into DIR (N photos, default 2000)
#   PACKER_PREBUILT=DIR scripts/gpu-check.sh [LOG]   # on that GPU machine: use DIR's binaries
#
# Without Go on the GPU machine (PACKER_PREBUILT set), the test binaries (gpu.test and, built with
# -race, gpu-race.test), the packer binary (scripts/build-release.sh: it needs only the C library)
# and the photos come from DIR, built by --prepare from the same commit; each step below runs the
# same way through them. The commit line then names the commit DIR was built from.
#
# The log starts with the GPU's name, the driver version and the commit, then holds, in order:
#   1. PACKER_REQUIRE_GPU=1 go test -count=1 -v -run 'Device|PTX|Cubin' ./gpu/
#      (no test may skip for want of a GPU: the variable turns those skips into failures);
#   2. the same package under the race detector, and the driver binding's own tests
#      (gpu/internal/cuda) under it;
#   3. compute-sanitizer --tool memcheck on the device resize test, where a CUDA toolkit
#      provides compute-sanitizer (else a line saying it was not run);
#   4. the device benchmarks (BenchmarkDevice: kernel time against the memory-bandwidth bound);
#   5. packer build of generated test photos (scripts/make_photos.sh) with --device gpu and
#      --device cpu, timed (images/s of each), and the two outputs compared byte for byte;
#   6. build scaling over the machine's cores: the ImageNet-sized photos (eight copies) packed with --device cpu
#      and --workers 1, 2, 4, ... up to nproc (and --device gpu with all of them), each with
#      images/s, the speed-up over one worker and the CPU time per image (user + system).
# On a machine without a usable GPU it says so and exits 1 before running anything. Any
# failed step makes the exit status non-zero; the log keeps going so every step is recorded.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [ "${1:-}" = --prepare ]; then
  dir=${2:?--prepare DIR [N]}
  n=${3:-2000}
  set -e
  mkdir -p "$dir"
  go test -c -o "$dir/gpu.test" ./gpu/
  go test -race -c -o "$dir/gpu-race.test" ./gpu/
  go test -race -c -o "$dir/cuda-race.test" ./gpu/internal/cuda/
  bash scripts/build-release.sh "$dir/packer" >/dev/null
  # The ptxas that made the checked-in cubins, for TestCubinsUpToDate (a CUDA toolkit's own
  # ptxas of another version makes other bytes).
  v=$(sed -n 's/^PTXAS_VERSION=//p' scripts/setup.sh)
  p="${XDG_CACHE_HOME:-$HOME/.cache}/packer/ptxas-$v/ptxas"
  if [ -x "$p" ]; then cp "$p" "$dir/ptxas"; else echo "gpu-check: no $p (run scripts/setup.sh)" >&2; fi
  rm -rf "$dir/photos"
  scripts/make_photos.sh "$dir/photos" "$n" "$((n / 10))" >/dev/null
  git rev-parse HEAD >"$dir/commit"
  git diff --quiet || echo "(with local changes)" >>"$dir/commit"
  du -sh "$dir"
  exit 0
fi
log="${1:-docs/bench/gpu.txt}"
pre=${PACKER_PREBUILT:-}
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
  if [ -n "$pre" ]; then
    echo "commit: $(tr '\n' ' ' <"$pre/commit")(binaries built beforehand with --prepare, no Go on this machine)"
  else
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "go: $(go version)"
  fi
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
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
if [ -n "$pre" ]; then
  pre=$(cd "$pre" && pwd)
  export PACKER_BIN="$pre/packer"
  if [ -x "$pre/ptxas" ]; then export PACKER_PTXAS="$pre/ptxas"; fi
  cp "$pre/packer" "$work/packer"
  gotest() { # gotest [-race] ARGS...: the prebuilt test binary, run in the package's folder as go test does
    local bin=$pre/gpu.test
    if [ "$1" = -race ]; then bin=$pre/gpu-race.test; shift; fi
    (cd gpu && "$bin" "$@")
  }
  cp "$pre/gpu.test" "$work/gpu.test"
else
  gotest() {
    local race=()
    if [ "$1" = -race ]; then race=(-race); shift; fi
    go test "${race[@]}" -c -o "$work/t.test" ./gpu/ && (cd gpu && "$work/t.test" "$@")
  }
fi
step "device tests" gotest -test.count=1 -test.v -test.run 'Device|PTX|Cubin'
step "race" gotest -race -test.count=1
if [ -n "$pre" ]; then
  step "driver binding (race)" sh -c "cd gpu/internal/cuda && '$pre/cuda-race.test' -test.count=1 -test.v"
else
  step "driver binding (race)" go test -race -count=1 -v ./gpu/internal/cuda/
fi
if command -v compute-sanitizer >/dev/null 2>&1; then
  [ -n "$pre" ] || step "compile device test" go test -c -o "$work/gpu.test" ./gpu/
  step "memcheck" sh -c "cd gpu && compute-sanitizer --tool memcheck --error-exitcode 1 '$work/gpu.test' -test.run '^TestDeviceResize' -test.count=1"
else
  echo "== memcheck: not run (no compute-sanitizer: install a CUDA toolkit)" >>"$log"
  echo >>"$log"
fi
step "benchmarks" gotest -test.count=1 -test.run '^$' -test.bench 'Device' -test.benchtime 20x

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
if [ -n "$pre" ]; then
  ln -s "$pre/photos" "$work/photos"
else
  step "build packer" go build -o "$work/packer" ./cmd/packer
  step "make photos" scripts/make_photos.sh "$work/photos" 2000 200
fi
for set in imagenet 1080p; do
  cat "$work"/photos/$set/*/*.jpg >/dev/null # in the page cache for every timed build
  for dev in gpu cpu; do
    step "build $set --device $dev" timed_build "$set" "$dev"
  done
  step "compare $set gpu vs cpu" diff -r "$work/out-$set-gpu" "$work/out-$set-cpu"
done

# Build scaling: one worker, then doubling up to every core; the last row uses the GPU.
scaling() {
  local cores w ws=() t1="" n s e u line k
  cores=$(nproc)
  # Eight copies of the set (as 8 x 10 classes), so that a build on every core runs long
  # enough for its start (listing, the GPU's self-check) not to dominate.
  mkdir -p "$work/scale"
  for k in 0 1 2 3 4 5 6 7; do
    for c in "$work"/photos/imagenet/*/; do cp -r "$c" "$work/scale/k$k-$(basename "$c")"; done
  done
  n=$(find "$work/scale" -name '*.jpg' | wc -l)
  for ((w = 1; w < cores; w *= 2)); do ws+=("$w cpu"); done
  ws+=("$cores cpu" "$cores gpu")
  printf '%-8s %-6s %10s %9s %12s %14s\n' workers device images/s speed-up "CPU s" "CPU ms/image"
  for line in "${ws[@]}"; do
    set -- $line
    rm -rf "$work/out-scale"
    { TIMEFORMAT='%R %U %S'; time "$work/packer" build "$work/scale" -o "$work/out-scale" \
      --resize 256 --crop 224 --device "$2" --workers "$1" >/dev/null || return; } 2>"$work/time"
    read -r e s u < <(tail -n 1 "$work/time")
    [ -n "$t1" ] || t1=$e
    awk -v w="$1" -v d="$2" -v n="$n" -v e="$e" -v c="$s" -v c2="$u" -v t1="$t1" \
      'BEGIN { c += c2; printf "%-8d %-6s %10.0f %8.2fx %12.2f %14.2f\n", w, d, n / e, t1 / e, c, 1000 * c / n }'
  done
}
step "build scaling over $(nproc) cores (imagenet set x 8, --resize 256 --crop 224, page cache warm)" scaling
echo "# exit status $status" >>"$log"
echo "gpu-check: log in $log (status $status)"
exit $status
