#!/usr/bin/python3
"""Benchmark photo sets for packer, derived from Debian's wallpapers (see make_photos.sh).

    make_photos.py OUT N [N1080]

OUT/imagenet/cNN/*.jpg: N JPEGs with ImageNet-like sizes, in 10 class folders.
OUT/1080p/cNN/*.jpg:    N1080 (default N // 5) JPEGs of exactly 1920x1080, in 10 class folders.

Every file is a random crop (random.Random(SEED), so the sets are the same on every run with the
same Pillow) of one of the wallpapers in /usr/share/backgrounds, resized with Pillow's LANCZOS
filter and re-encoded as baseline JPEG, quality 90, 4:2:0 chroma subsampling.

GRAIN=S (environment) adds film grain before encoding: Gaussian noise of standard deviation
0.7*S shared by the three channels plus 0.5*S per channel, seeded per file. The wallpapers are
smooth, so their JPEGs are 5-7 times smaller than camera photos of the same size; grain brings
the entropy (the Huffman decoding's share of the work) closer to a camera's: S=16 gives about
78 KB for a 500x333 file, against about 17 KB without grain and about 110 KB for an average
ImageNet file. The default is no grain.
"""
import glob
import os
import random
import sys

from PIL import Image

SEED = 20261122
GRAIN = float(os.environ.get("GRAIN", "0"))
SRC_DIR = "/usr/share/backgrounds"
CLASSES = 10

# ImageNet's most common shapes (longer side 500 for most files), as (long, short) ratios.
ASPECTS = [(4, 3)] * 6 + [(3, 2)] * 3 + [(1, 1)] + [(16, 9)] + [(5, 4)]


def sources():
    paths = sorted(glob.glob(os.path.join(SRC_DIR, "*.jpg")) + glob.glob(os.path.join(SRC_DIR, "*.png")))
    if not paths:
        sys.exit(f"no wallpapers in {SRC_DIR}: apt-get install ukui-wallpapers")
    out = []
    for p in paths:
        with Image.open(p) as im:
            out.append((os.path.basename(p).rsplit(".", 1)[0], im.convert("RGB")))
    return out


def crop_box(rng, W, H, aspect):
    """A random box of aspect w/h inside W x H covering 15-90 % of the shorter side."""
    frac = rng.uniform(0.15, 0.9)
    if aspect >= W / H:
        w = int(W * frac)
        h = int(round(w / aspect))
    else:
        h = int(H * frac)
        w = int(round(h * aspect))
    w, h = max(1, min(w, W)), max(1, min(h, H))
    x = rng.randrange(0, W - w + 1)
    y = rng.randrange(0, H - h + 1)
    return (x, y, x + w, y + h)


def save(im, path, i):
    if GRAIN > 0:
        import numpy as np

        g = np.random.default_rng((SEED, i))
        a = np.asarray(im.convert("RGB"), dtype=np.float32)
        a = a + g.normal(0, 0.7 * GRAIN, a.shape[:2] + (1,)) + g.normal(0, 0.5 * GRAIN, a.shape)
        im = Image.fromarray(np.clip(a + 0.5, 0, 255).astype(np.uint8))
    im.save(path, "JPEG", quality=90, subsampling=2, optimize=False, progressive=False)


def make_imagenet(srcs, out, n, rng):
    for i in range(n):
        name, src = srcs[rng.randrange(len(srcs))]
        a, b = rng.choice(ASPECTS)
        portrait = rng.random() < 0.25
        longer = 500 if rng.random() < 0.8 else rng.randint(300, 600)
        shorter = max(1, int(round(longer * b / a)))
        w, h = (shorter, longer) if portrait else (longer, shorter)
        box = crop_box(rng, src.width, src.height, w / h)
        im = src.resize((w, h), Image.LANCZOS, box=box)
        d = os.path.join(out, f"c{i % CLASSES:02d}")
        os.makedirs(d, exist_ok=True)
        save(im, os.path.join(d, f"{name}_{i:06d}.jpg"), i)


def make_1080p(srcs, out, n, rng):
    for i in range(n):
        name, src = srcs[rng.randrange(len(srcs))]
        # a 16:9 box of at least 1920 px wide (up to the full width), resized to 1920x1080
        w = rng.randint(1920, src.width)
        h = int(round(w * 9 / 16))
        if h > src.height:
            h = src.height
            w = int(round(h * 16 / 9))
        x = rng.randrange(0, src.width - w + 1)
        y = rng.randrange(0, src.height - h + 1)
        im = src.resize((1920, 1080), Image.LANCZOS, box=(x, y, x + w, y + h))
        d = os.path.join(out, f"c{i % CLASSES:02d}")
        os.makedirs(d, exist_ok=True)
        save(im, os.path.join(d, f"{name}_{i:06d}.jpg"), i)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    out, n = sys.argv[1], int(sys.argv[2])
    n1080 = int(sys.argv[3]) if len(sys.argv) == 4 else max(1, n // 5)
    srcs = sources()
    make_imagenet(srcs, os.path.join(out, "imagenet"), n, random.Random(SEED))
    make_1080p(srcs, os.path.join(out, "1080p"), n1080, random.Random(SEED + 1))


if __name__ == "__main__":
    main()
