#!/usr/bin/env bash
# Runs the whole packer test suite on a fresh Debian bookworm machine: installs what it needs
# (scripts/setup.sh), checks formatting, vet and lint, runs the Go tests with the race detector,
# runs every fuzz target briefly, and runs the Python reader's tests with Debian's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

PY=/usr/bin/python3
export PACKER_PYTHON=$PY
# The object-storage tests start their own S3 server (versitygw, pinned in scripts/s3-server.sh,
# built from its Go module into the cache folder once: a test tool, so here and not in setup.sh,
# which the demo runs too) and stop it when they end; here they fail rather than skip if it is
# missing.
bash scripts/s3-server.sh install
export PACKER_REQUIRE_S3=1
ptxas="${XDG_CACHE_HOME:-$HOME/.cache}/packer/ptxas-12.9.86/ptxas"
[ -x "$ptxas" ] && export PACKER_PTXAS="$ptxas"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted"; exit 1; fi

# The embeddable reader is its own module (shard/go.mod, joined by go.work): ./... does not
# reach into it, so every go command below names both.
pkgs=(./... ./shard/...)

echo "== go vet"
go vet "${pkgs[@]}"

echo "== staticcheck"
STATICCHECK_VERSION=v0.8.2
if ! command -v staticcheck >/dev/null 2>&1 && [ ! -x "$(go env GOPATH)/bin/staticcheck" ]; then
  go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
PATH="$(go env GOPATH)/bin:$PATH" staticcheck "${pkgs[@]}"

echo "== duplicate code (scripts/dupcheck.sh)"
bash scripts/dupcheck.sh

echo "== the embeddable reader (package shard) builds for every platform a trainer may run on"
for target in darwin/arm64 darwin/amd64 freebsd/amd64 openbsd/amd64 windows/amd64 linux/arm64; do
  GOOS=${target%/*} GOARCH=${target#*/} CGO_ENABLED=0 go build ./shard
done

echo "== the embeddable reader with the oldest Go it supports (the go line of shard/go.mod)"
# Its own module, so a trainer importing it needs only that Go, not this module's. The go
# command fetches that toolchain through the module proxy once (into the module cache, about
# 70 MB) and runs the reader's tests with it: a newer library call or language feature fails
# here. About a minute (compiling the old toolchain's standard library the first time).
shard_go=$(sed -n 's/^go \([0-9]*\.[0-9]*\)$/\1/p' shard/go.mod)
[ -n "$shard_go" ] || { echo "shard/go.mod: no go line of the form go 1.N"; exit 1; }
(cd shard && GOWORK=off GOTOOLCHAIN="go$shard_go.0" go vet . && GOWORK=off GOTOOLCHAIN="go$shard_go.0" go test -count=1 .)

echo "== the command builds without cgo (it then refuses JPEG and HDF5, with a message saying why)"
CGO_ENABLED=0 go build -o /dev/null ./cmd/packer

echo "== go test -race"
go test -race -count=1 -timeout 40m "${pkgs[@]}"

echo "== the transforms again with the portable Go loops forced (-tags purego: the AVX2 resize passes left out, cgo still on)"
# The Go loops are what CPUs without AVX2 and builds without cgo run; on this machine the AVX2
# passes would take over, so the tag is how they are tested against the golden files here
# (TestPuregoTag fails if the tag stops removing the AVX2 passes). About 30 s of CPU.
go test -count=1 -tags purego ./transforms/

echo "== the video package again with the ffmpeg pipe decoder (the default decodes in process; the pipe is the fallback)"
PACKER_VIDEO_DECODER=ffmpeg go test -race -count=1 ./source/video/

echo "== fuzz (each target briefly)"
# An execution count, not a duration: with a duration, Go 1.26's fuzz coordinator can report a
# spurious "context deadline exceeded" failure when the deadline lands while a worker is
# mid-input (go.dev/issue/75804, fixed in Go 1.27). A count has no deadline to race.
# -fuzzminimizetime 0 turns minimization off: Go's coordinator can stall for minutes at
# "0/sec" while it minimizes a new interesting input on a loaded machine, and then report the
# worker as hung (go.dev/issue/48820, go.dev/issue/51484); a crasher is still written, whole.
FUZZTIME=${FUZZTIME:-20000x}
# A worker the coordinator thinks hung (no answer for a while, which happens on a loaded 2-core
# machine) is interrupted and reported as "hung or terminated unexpectedly" with the input it
# was running. Such a report counts as a failure unless that input, run alone, passes: then it
# was the machine, not the input, and the target is fuzzed once more (a second report fails).
# A crash or a failing input always fails, and its input stays in testdata for a regression test.
fuzz_once() {
  local pkg=$1 dir=$2 target=$3 log input
  log=$(mktemp)
  for attempt in 1 2; do
    if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 0 "$pkg" 2>&1 | tee "$log"; then
      rm -f "$log"
      return 0
    fi
    input=$(sed -n "s|.*Failing input written to testdata/fuzz/${target}/\([0-9a-f]*\).*|\1|p" "$log" | tail -1)
    if [ "$attempt" = 1 ] && [ -n "$input" ] && grep -q "fuzzing process hung or terminated unexpectedly" "$log" &&
      go test -count=1 -run "^${target}/${input}\$" "$pkg" >/dev/null 2>&1; then
      echo "fuzz: $target: the input a worker was reported hung on passes alone; a loaded machine, not the input: fuzzing it again"
      rm -f "$dir/testdata/fuzz/$target/$input"
      continue
    fi
    rm -f "$log"
    return 1
  done
}
for pkg in $(go list "${pkgs[@]}"); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "-- $pkg $target"
    fuzz_once "$pkg" "$dir" "$target"
  done
done

echo "== same bytes as before the architecture change (scripts/samebytes.sh)"
# docs/samebytes-base names the commit whose outputs are the reference: first the last commit
# before the architecture issue's refactor, then the commit that added image records' source
# path as per-record metadata, then the commit that pinned each shard's index_sha256 in the
# manifest of shards datasets (the intended changes of bytes, each the only one of its commit;
# see their messages). Every output of the generated corpora must still be byte-identical to
# what that commit wrote.
base=$(cat docs/samebytes-base)
if git cat-file -e "$base^{commit}" 2>/dev/null; then
  bash scripts/samebytes.sh "$base"
else
  echo "samebytes: FAILED: revision $base is not in this clone (a shallow clone?); fetch full history"
  exit 1
fi

echo "== builds in parts on a real single-node Slurm cluster (scripts/test-slurm.sh)"
timeout 600 bash scripts/test-slurm.sh

echo "== the container image (reproducible) and the Kubernetes manifests (schemas; their pods in podman) (scripts/test-k8s.sh)"
timeout 600 bash scripts/test-k8s.sh

echo "== python reader (pytest)"
bash scripts/build-crc.sh  # the reader's hardware CRC-32C; the tests fail without it
# Grain and JAX (CPU), pinned, in a venv of their own for tests/test_grain.py (about a minute to
# install the first time, about 45 s of tests)
PACKER_GRAIN_PYTHON=$(bash scripts/grain-venv.sh)
export PACKER_GRAIN_PYTHON PACKER_REQUIRE_GRAIN=1
(cd python && PACKER_REQUIRE_CRC_HW=1 $PY -m pytest -q tests)

echo "== wheel: a clean venv, pip install, packer --version, a build, read back (scripts/test-wheel.sh)"
bash scripts/test-wheel.sh

echo "== a bare machine: the release binary in a debootstrap minbase root, build and verify (scripts/test-bare.sh)"
bash scripts/test-bare.sh

echo "== the glibc 2.17 floor: both wheels' files checked; Debian 11 and Ubuntu 20.04 (binary, the root's pip install, read-back) and aarch64 under qemu (its own pip; the arm64 image) (scripts/test-glibc.sh)"
bash scripts/test-glibc.sh

echo "== all tests passed"
