#!/usr/bin/python3
"""Reference outputs for packer's transform fidelity tests, computed by Pillow itself.

Usage: pillow_ref.py JOBS.jsonl  -> one JSON result line per job on stdout.

Every job is a JSON object with "op":

  load      {"path", "mode", "out"}: Image.open(path).convert(mode), raw bytes to out.
  resize    {"in", "w", "h", "mode", "size": [w, h], "filter", "out"}: raw input bytes of
            mode/w/h, Image.resize(size, filter) (no box, no reducing_gap), raw bytes to out.
  pipeline  {"in", "w", "h", "mode", "resize", "max_size", "size", "crop": [w, h], "filter",
             "out"}: torchvision's Resize then CenterCrop on a PIL image, written with PIL
            operations exactly as torchvision's functional code does them.
  tensor    {"in", "w", "h", "mode", "mean", "std", "dtype", "layout", "out"}: torchvision
            ToTensor (+ Normalize) with torch when importable, else numpy float32 arithmetic;
            the result is written little-endian in the asked layout and dtype.

Results: {"w", "h"} of the output image, or {"error": "..."}.
"""
import json
import sys

from PIL import Image


def load_raw(job):
    with open(job["in"], "rb") as f:
        data = f.read()
    return Image.frombytes(job["mode"], (job["w"], job["h"]), data)


def compute_resized_output_size(w, h, size, max_size):
    # torchvision.transforms.functional._compute_resized_output_size, for an int size.
    short, long = (w, h) if w <= h else (h, w)
    requested_new_short = size
    new_short, new_long = requested_new_short, int(requested_new_short * long / short)
    if max_size is not None:
        if max_size <= requested_new_short:
            raise ValueError("max_size must be larger than size")
        if new_long > max_size:
            new_short, new_long = int(max_size * new_short / new_long), max_size
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    return new_h, new_w


def tv_resize(img, size, max_size, filt):
    # torchvision.transforms.functional.resize for PIL images.
    w, h = img.size
    if isinstance(size, int):
        oh, ow = compute_resized_output_size(w, h, size, max_size)
    else:
        oh, ow = size
    if (oh, ow) == (h, w):
        return img
    return img.resize((ow, oh), filt)


def tv_center_crop(img, crop_h, crop_w):
    # torchvision.transforms.functional.center_crop for PIL images (pad with 0, then crop).
    image_width, image_height = img.size
    if crop_w > image_width or crop_h > image_height:
        padding_ltrb = [
            (crop_w - image_width) // 2 if crop_w > image_width else 0,
            (crop_h - image_height) // 2 if crop_h > image_height else 0,
            (crop_w - image_width + 1) // 2 if crop_w > image_width else 0,
            (crop_h - image_height + 1) // 2 if crop_h > image_height else 0,
        ]
        # functional_pil.pad, constant mode: ImageOps.expand with fill 0.
        from PIL import ImageOps

        img = ImageOps.expand(img, border=tuple(padding_ltrb), fill=0)
        image_width, image_height = img.size
        if crop_w == image_width and crop_h == image_height:
            return img
    crop_top = int(round((image_height - crop_h) / 2.0))
    crop_left = int(round((image_width - crop_w) / 2.0))
    # functional_pil.crop: img.crop((left, top, left + width, top + height))
    return img.crop((crop_left, crop_top, crop_left + crop_w, crop_top + crop_h))


def to_tensor_bytes(img, mean, std, dtype, layout):
    import numpy as np

    arr = np.asarray(img, dtype=np.uint8)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    chw = np.ascontiguousarray(arr.transpose(2, 0, 1))
    try:
        import torch

        t = torch.from_numpy(chw).to(dtype=torch.float32).div(255)  # ToTensor
        if mean is not None:
            m = torch.as_tensor(mean, dtype=torch.float32)
            s = torch.as_tensor(std, dtype=torch.float32)
            if m.ndim == 1:
                m = m.view(-1, 1, 1)
            if s.ndim == 1:
                s = s.view(-1, 1, 1)
            t = t.sub(m).div(s)  # Normalize
        if dtype == "float16":
            t = t.half()
        out = t.numpy()
    except ImportError:
        out = chw.astype(np.float32) / np.float32(255)
        if mean is not None:
            m = np.asarray(mean, dtype=np.float32).reshape(-1, 1, 1)
            s = np.asarray(std, dtype=np.float32).reshape(-1, 1, 1)
            out = (out - m) / s
        if dtype == "float16":
            out = out.astype(np.float16)
    if layout == "hwc":
        out = out.transpose(1, 2, 0)
    return np.ascontiguousarray(out).astype(out.dtype.newbyteorder("<")).tobytes()


def run(job):
    op = job["op"]
    if op == "load":
        img = Image.open(job["path"]).convert(job["mode"])
    elif op == "resize":
        img = load_raw(job).resize(tuple(job["size"]), job["filter"])
    elif op == "pipeline":
        img = load_raw(job)
        if job.get("resize"):
            img = tv_resize(img, job["resize"], job.get("max_size"), job["filter"])
        elif job.get("size"):
            w, h = job["size"]
            img = tv_resize(img, [h, w], None, job["filter"])
        if job.get("crop"):
            cw, ch = job["crop"]
            img = tv_center_crop(img, ch, cw)
    elif op == "tensor":
        img = load_raw(job)
        data = to_tensor_bytes(img, job.get("mean"), job.get("std"), job["dtype"], job["layout"])
        with open(job["out"], "wb") as f:
            f.write(data)
        return {"w": img.size[0], "h": img.size[1]}
    else:
        raise ValueError("unknown op " + op)
    with open(job["out"], "wb") as f:
        f.write(img.tobytes())
    return {"w": img.size[0], "h": img.size[1]}


def main():
    with open(sys.argv[1]) as f:
        jobs = [json.loads(line) for line in f if line.strip()]
    for job in jobs:
        try:
            res = run(job)
        except Exception as e:  # reported per job; the Go test decides
            res = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
