"""Reference for packer's fidelity test: torchvision's ImageFolder order and its
Resize(N) + CenterCrop(M) pipeline on PIL images, the pipeline packer must reproduce byte for byte.

usage: torchvision_ref.py ROOT RESIZE CROP OUT
CROP 0 means Resize(N) alone (every image keeps its aspect ratio).
Writes OUT as lines of JSON: {"path", "label", "ok", "error", "shape"} and, for every image Pillow
opens, the raw HWC uint8 bytes of the result to OUT.bin in the same order.
"""
import json
import sys

import torchvision.datasets as datasets
import torchvision.transforms as T
from PIL import Image

root, resize, crop, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
folder = datasets.ImageFolder(root, loader=lambda p: p)  # order and labels only
steps = [T.Resize(resize)]
if crop > 0:
    steps.append(T.CenterCrop(crop))
pipeline = T.Compose(steps)
with open(out, "w") as meta, open(out + ".bin", "wb") as data:
    for path, label in folder.samples:
        try:
            with open(path, "rb") as f:
                img = Image.open(f).convert("RGB")  # torchvision's pil_loader
            res = pipeline(img)
            data.write(res.tobytes())
            shape = [res.height, res.width, 3]
            meta.write(json.dumps({"path": path, "label": label, "ok": True, "shape": shape}) + "\n")
        except Exception as e:  # what Pillow cannot open, packer must skip
            meta.write(json.dumps({"path": path, "label": label, "ok": False, "error": repr(e)}) + "\n")
