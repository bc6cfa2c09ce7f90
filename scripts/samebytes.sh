#!/usr/bin/env bash
# samebytes.sh: proves that a change to packer's code left its output bytes alone. It builds the
# `packer` command at two git revisions, packs the same corpora with both (every source kind,
# every output format, several option sets) and compares every output file byte for byte.
#
#   scripts/samebytes.sh BASE [HEAD]
#
#   BASE  the revision to compare against (a commit, tag or branch)
#   HEAD  the revision to check (default: the working tree, uncommitted changes included)
#   Either may instead be the path of a packer binary, used as it is (two builds of one revision
#   by two toolchains, for example scripts/build-release.sh's against the host's go build).
#
# Prints one line per case (`same` or `DIFFERENT` with the first differing file) and exits 1 when
# any case differs or fails to build with one binary but not the other. A case that fails with
# both binaries in the same way (same exit code) counts as same: refusing an input is behaviour
# too. The corpora are generated, so the script needs only the tools the test suite installs
# (Pillow for the photos, ffmpeg for the videos, Debian's Fashion-MNIST).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [ $# -lt 1 ]; then sed -n '2,17p' "$0"; exit 2; fi
base=$1 head=${2:-}
py=${PACKER_PYTHON:-/usr/bin/python3}

work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base-src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# Two binaries.
build_at() { # rev dir out
  if [ -f "$1" ] && [ -x "$1" ]; then cp "$1" "$3"; return; fi
  git -C "$root" worktree add --detach --force "$2" "$1" >/dev/null 2>&1
  (cd "$2" && go build -o "$3" ./cmd/packer)
}
build_at "$base" "$work/base-src" "$work/packer-base"
git -C "$root" worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
if [ -n "$head" ]; then
  build_at "$head" "$work/base-src" "$work/packer-head"
  git -C "$root" worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
else
  go build -o "$work/packer-head" ./cmd/packer
fi
echo "samebytes: base $( [ -f "$base" ] && echo "$base" || git -C "$root" rev-parse --short "$base"), head ${head:-working tree}"

# Corpora.
c=$work/corpora
mkdir -p "$c"
bash scripts/make_photos.sh "$c/photos" 40 6 >/dev/null
photos=$c/photos/imagenet
# A folder with bad inputs: a truncated JPEG, a text file named .jpg, an empty file, an odd name.
mkdir -p "$c/bad/a" "$c/bad/b"
i=0
for f in $(find "$photos" -name '*.jpg' | sort | head -12); do
  cp "$f" "$c/bad/$([ $((i % 2)) -eq 0 ] && echo a || echo b)/img$i.jpg"; i=$((i + 1))
done
head -c 3000 "$(find "$photos" -name '*.jpg' | sort | head -1)" >"$c/bad/a/truncated.jpg"
echo "not an image" >"$c/bad/b/text.jpg"
: >"$c/bad/b/empty.png"
cp "$(find "$photos" -name '*.jpg' | sort | tail -1)" "$c/bad/a/odd name é.jpg"
# A list (CSV of path,label).
{ echo "path,label"; find "$photos" -name '*.jpg' | sort | head -20 | awk '{print $0 "," (NR % 3)}'; } >"$c/list.csv"
# Frames: class/video/frame images.
for cls in run walk; do
  for v in 1 2 3; do
    mkdir -p "$c/frames/$cls/v$v"
    j=0
    for f in $(find "$photos" -name '*.jpg' | sort | head -$((4 + v * 2))); do
      cp "$f" "$c/frames/$cls/v$v/$(printf '%04d' $j).jpg"; j=$((j + 1))
    done
  done
done
# Videos: class/video files made by ffmpeg.
for cls in red blue; do
  mkdir -p "$c/video/$cls"
  for v in 1 2; do
    ffmpeg -nostdin -loglevel error -y -f lavfi -i "testsrc=size=160x120:rate=10:duration=$((v + 1))" \
      -pix_fmt yuv420p -c:v libx264 "$c/video/$cls/v$v.mp4"
  done
done
# CIFAR-10 and CIFAR-100 (synthetic, official layouts), IDX (Fashion-MNIST test split).
(go run ./internal/tools/mkcifar -kind cifar10 -per-file 300 -tgz "$c/cifar-10-binary.tar.gz") >/dev/null
(go run ./internal/tools/mkcifar -kind cifar100 -per-file 300 -dir "$c/c100") >/dev/null
cifar100=$(find "$c/c100" -name 'train.bin' -printf '%h\n' | head -1)
idx=/usr/share/datasets/fashion-mnist

# Cases: name | source | flags.
norm="--dtype float32 --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225"
cases=(
  "folder-crop|$photos|--resize 64 --crop 56"
  "folder-varsize|$photos|--resize 48"
  "folder-size-chw-f32|$photos|--size 40x32 --layout chw $norm"
  "folder-smallshards|$photos|--resize 40 --crop 32 --shard-size 64KiB"
  "folder-fast|$photos|--resize 64 --crop 56 --fast"
  "folder-lanczos-f16|$photos|--resize 50 --crop 48 --filter lanczos --dtype float16"
  "folder-npy|$photos|--resize 64 --crop 56 --format npy"
  "folder-hdf5|$photos|--resize 64 --crop 56 --format hdf5"
  "folder-bad|$c/bad|--resize 40 --crop 32"
  "folder-bad-npy|$c/bad|--resize 40 --crop 32 --format npy"
  "folder-varsize-npy-refused|$photos|--resize 48 --format npy"
  "list|$c/list.csv|--resize 40 --crop 32"
  "list-hdf5|$c/list.csv|--resize 40 --crop 32 --format hdf5"
  "frames-clips|$c/frames|--resize 48 --crop 40 --clip-len 4"
  "frames-pad|$c/frames|--resize 48 --crop 40 --clip-len 8 --short pad"
  "frames-npy|$c/frames|--resize 48 --crop 40 --clip-len 4 --format npy"
  "video-clips|$c/video|--resize 48 --crop 40 --clip-len 5"
  "video-frames-hdf5|$c/video|--resize 48 --crop 40 --format hdf5"
  "cifar10|$c/cifar-10-binary.tar.gz|"
  "cifar10-test-chw-f32|$c/cifar-10-binary.tar.gz|--split test --layout chw $norm"
  "cifar10-npy|$c/cifar-10-binary.tar.gz|--format npy"
  "cifar10-hdf5-resize|$c/cifar-10-binary.tar.gz|--resize 40 --crop 36 --format hdf5"
  "cifar100|$cifar100|--shard-size 100KiB"
  "cifar100-npy|$cifar100|--format npy"
  "idx|$idx|--split test"
  "idx-hdf5|$idx|--split test --format hdf5"
  "idx-resize-npy|$idx|--split test --resize 32 --crop 28 --format npy"
)

# The two builds of a case run one after the other into separate folders; the manifests name
# neither folder, so equal inputs and options give equal bytes.
differ=0
for case in "${cases[@]}"; do
  IFS='|' read -r name src flags <<<"$case"
  rcs=()
  for side in base head; do
    out=$work/out/$side/$name
    mkdir -p "$(dirname "$out")"
    set +e
    # shellcheck disable=SC2086
    "$work/packer-$side" build "$src" -o "$out" --workers 2 --device cpu $flags \
      >"$work/out/$side/$name.log" 2>&1
    rcs+=($?)
    set -e
  done
  if [ "${rcs[0]}" != "${rcs[1]}" ]; then
    echo "DIFFERENT  $name: exit ${rcs[0]} (base) vs ${rcs[1]} (head)"; differ=1; continue
  fi
  a=$work/out/base/$name b=$work/out/head/$name
  if [ ! -e "$a" ] && [ ! -e "$b" ]; then
    echo "same       $name (both refused, exit ${rcs[0]})"; continue
  fi
  la=$(cd "$a" && find . -type f | sort) lb=$(cd "$b" && find . -type f | sort)
  if [ "$la" != "$lb" ]; then
    echo "DIFFERENT  $name: file lists differ"; { diff <(echo "$la") <(echo "$lb") || true; } | head -5; differ=1; continue
  fi
  bad=""
  while read -r f; do
    cmp -s "$a/$f" "$b/$f" || { bad=$f; break; }
  done <<<"$la"
  if [ -n "$bad" ]; then
    echo "DIFFERENT  $name: $bad"; differ=1
  else
    echo "same       $name ($(echo "$la" | wc -l) files, exit ${rcs[0]})"
  fi
done
if [ $differ -ne 0 ]; then
  echo "samebytes: outputs DIFFER"; exit 1
fi
echo "samebytes: all ${#cases[@]} cases byte-identical"
