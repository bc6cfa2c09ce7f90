#!/usr/bin/env bash
# Builds the benchmark photo folders used by scripts/bench_images.sh and scripts/bench_loader.sh.
#
#   scripts/make_photos.sh OUT N [N1080]
#
#   OUT/imagenet/c00..c09/*.jpg  N JPEGs with ImageNet-like sizes: mostly 500 px on the longer
#                                side (20 % between 300 and 600), shapes 4:3, 3:2, 1:1, 16:9, 5:4,
#                                a quarter portrait; 10 class folders.
#   OUT/1080p/c00..c09/*.jpg     N1080 (default N/5) JPEGs of 1920x1080.
#   env GRAIN=S adds film grain (make_photos.py says how), for entropy closer to camera photos.
#
# Where the pixels come from: Debian ships no photo dataset, and the only large real images in
# its archive are desktop wallpapers. Every file here is a random crop of one of the 12
# wallpapers of Debian's `ukui-wallpapers` package (/usr/share/backgrounds/*.jpg|png,
# 3640-3840 x 2400): real published images, but digital illustrations and 3D renders (a calla
# lily, a goldfish, flowing ribbons, geometric landscapes, a robot head), not camera photographs.
# Each crop is resized with Pillow's LANCZOS filter (a downscale, as ImageNet's own files are
# downscaled camera images) and re-encoded as baseline JPEG, quality 90, 4:2:0 chroma
# subsampling (typical of ImageNet's files). The crops are drawn from a fixed seed, so the same
# Pillow produces the same files on every run.
#
# Caveat for every benchmark on these sets: the wallpapers are smooth (gradients, flat areas, no
# sensor noise), so the JPEGs are much smaller than real photos of the same size: about 18 KB
# for a 500 x 375 file here against about 110 KB for an average ImageNet file, and about 120 KB
# for 1920 x 1080 against roughly 300-600 KB for a camera photo. Huffman (entropy) decoding, a
# cost that every JPEG decoder pays the same way, is therefore a smaller share of the work than
# on real photos, and the transform (resize) a larger one. Only 12 distinct scenes underlie the
# sets, so content statistics are less varied than a real dataset's.
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '2,10p' "$0"; exit 2; fi
OUT=$1; N=$2; N1080=${3:-$(( N / 5 > 0 ? N / 5 : 1 ))}
if ! ls /usr/share/backgrounds/*.jpg >/dev/null 2>&1; then
  echo "installing ukui-wallpapers (Debian's wallpaper package)" >&2
  apt-get install -y ukui-wallpapers >&2
fi
mkdir -p "$OUT"
/usr/bin/python3 "$(dirname "$0")/make_photos.py" "$OUT" "$N" "$N1080"
for s in imagenet 1080p; do
  printf '%s: %s files, %s\n' "$OUT/$s" "$(find "$OUT/$s" -name '*.jpg' | wc -l)" "$(du -sh "$OUT/$s" | cut -f1)"
done
