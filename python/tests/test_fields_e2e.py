"""End to end with fields: COCO detection, a captioned WebDataset and image/mask pairs, each
packed by the real `packer build` from fixtures written by real tools (Pillow, webdataset's
TarWriter), verified, read back in Python and trained on for a step in PyTorch, as the
README's worked examples do. The values are checked against independent computations: the
boxes against NumPy's arithmetic of docs/fidelity.md, the masks against Pillow's
resize(NEAREST) and the crop, the captions against the members written."""

import json
import os
import subprocess

import numpy as np
import pytest

import packer_reader
from test_crosslang import build, packer  # noqa: F401  (the fixture)

PIL = pytest.importorskip("PIL.Image")
torch = pytest.importorskip("torch")


def resized(w, h, size):
    """torchvision Resize(size)'s output size (shorter side)."""
    if w <= h:
        return size, int(size * h / w)
    return int(size * w / h), size


def crop_offset(size, crop):
    return int(round((size - crop) / 2.0))


def write_coco(root, rng):
    images, anns = [], []
    os.makedirs(os.path.join(root, "val"))
    for i in range(8):
        w, h = int(rng.integers(80, 160)), int(rng.integers(80, 160))
        PIL.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(os.path.join(root, "val", "%d.jpg" % i))
        images.append({"id": 10 - i, "file_name": "val/%d.jpg" % i, "width": w, "height": h})
        for k in range(i % 4):
            x, y = float(rng.uniform(-10, w)), float(rng.uniform(-10, h))
            anns.append({"id": len(anns) + 1, "image_id": 10 - i, "bbox": [x, y, float(rng.uniform(1, w / 2)), float(rng.uniform(1, h / 2))],
                         "category_id": int(rng.integers(1, 4)), "iscrowd": int(k == 2), "area": 12.5 * k,
                         "segmentation": [[0, 0, 1, 1, 2, 2]]})
    anns.append({"id": 999, "image_id": 77, "bbox": [0, 0, 1, 1], "category_id": 1, "iscrowd": 0, "area": 1})
    coco = {"info": {}, "licenses": [], "images": images, "annotations": anns,
            "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}, {"id": 3, "name": "eel"}]}
    with open(os.path.join(root, "instances.json"), "w") as f:
        json.dump(coco, f)
    return coco


def expected_boxes(ann, w, h, size, crop):
    rw, rh = resized(w, h, size)
    ox, oy = crop_offset(rw, crop), crop_offset(rh, crop)
    x, y, bw, bh = ann["bbox"]  # COCO's numbers, converted in float64, stored as float32
    box = np.array([x, y, x + bw, y + bh], dtype=np.float32).astype(np.float64)
    box[[0, 2]] = np.clip(box[[0, 2]] * (rw / w) - ox, 0, crop)
    box[[1, 3]] = np.clip(box[[1, 3]] * (rh / h) - oy, 0, crop)
    box = box.astype(np.float32)
    return box if box[2] > box[0] and box[3] > box[1] else None


def test_coco_detection_end_to_end(packer, tmp_path):  # noqa: F811
    rng = np.random.default_rng(26)
    src = tmp_path / "coco"
    coco = write_coco(str(src), rng)
    out = tmp_path / "out"
    build(packer, src / "instances.json", out, "--from", "coco", "--resize", "64", "--crop", "56", "--layout", "chw")
    ds = packer_reader.open(str(out))
    m = json.load(open(out / "manifest.json"))
    assert m["classes"] == ["", "cat", "dog", "eel"]
    assert [s["input"] for s in m["skipped"]] == ["instances.json#image_id=77"]
    by_id = sorted(coco["images"], key=lambda im: im["id"])
    assert len(ds) == len(by_id)
    dropped = 0
    for i, im in enumerate(by_id):
        r = ds[i]
        assert r["label"] == -1 and r["image"].shape == (3, 56, 56)
        want, cats = [], []
        for a in (a for a in coco["annotations"] if a["image_id"] == im["id"]):
            b = expected_boxes(a, im["width"], im["height"], 64, 56)
            if b is None:
                dropped += 1
                continue
            want.append(b)
            cats.append(a["category_id"])
        got = r["boxes"]
        assert got.dtype == np.float32 and got.shape == (len(want), 4)
        if want:
            assert np.array_equal(got, np.stack(want)), (i, got, want)
        assert list(r["category"]) == cats and r["iscrowd"].shape == (len(cats),)
    assert m.get("boxes_dropped", {}).get("boxes", 0) == dropped

    from packer_reader.torch import collate_detection, loader
    import torchvision
    train = loader(str(out), batch_size=4, shuffle=True, seed=0)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(
        weights=None, weights_backbone=None, num_classes=len(m["classes"]), min_size=56, max_size=56)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    seen = 0
    for batch in train:
        images, targets = collate_detection(batch, train.fields)
        images = [im.float() / 255 for im in images]
        loss = sum(model(images, targets).values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert torch.isfinite(loss)
        seen += len(images)
    assert seen == len(ds)


WDS_WRITER = """
import io, json, sys
import numpy as np
from PIL import Image
import webdataset as wds
out, captions = sys.argv[1], json.loads(sys.argv[2])
rng = np.random.default_rng(5)
with wds.TarWriter(out) as sink:
    for i, c in enumerate(captions):
        b = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (40, 50, 3), dtype=np.uint8)).save(b, "JPEG")
        sink.write({"__key__": "s%04d" % i, "jpg": b.getvalue(), "txt": c, "json": {"n": i}})
"""


def write_wds(path, captions):
    """A shard written by webdataset's own TarWriter (the fixtures venv scripts/setup.sh makes)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    py = os.environ.get("PACKER_FIXTURE_PYTHON") or os.path.join(cache, "packer", "fixtures-venv-1", "bin", "python")
    if not os.path.exists(py):
        pytest.fail("the fixtures venv (webdataset) is missing: run scripts/setup.sh or set PACKER_FIXTURE_PYTHON")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    subprocess.run([py, "-c", WDS_WRITER, str(path), json.dumps(captions)], check=True)


def test_captioned_webdataset_end_to_end(packer, tmp_path):  # noqa: F811
    captions = ["a photo of %d cats, café" % i for i in range(12)]
    write_wds(tmp_path / "wds" / "000000.tar", captions)
    out = tmp_path / "out"
    build(packer, tmp_path / "wds", out, "--from", "webdataset", "--fields", "txt,json", "--size", "32x32")
    ds = packer_reader.open(str(out))
    assert [f["name"] for f in ds.fields] == ["txt", "json"]
    assert [ds[i]["txt"] for i in range(len(ds))] == captions
    assert [ds[i]["json"]["n"] for i in range(len(ds))] == list(range(12))

    from packer_reader.torch import loader
    train = loader(str(out), batch_size=4, shuffle=True, seed=1)
    emb = torch.nn.EmbeddingBag(256, 8)
    img = torch.nn.Linear(3 * 32 * 32, 8)
    opt = torch.optim.SGD(list(emb.parameters()) + list(img.parameters()), lr=0.1)
    got = []
    for b in train:
        got.extend(b["txt"])
        toks = [torch.tensor(list(t.encode()), dtype=torch.long) for t in b["txt"]]
        offs = torch.tensor([0] + [len(t) for t in toks[:-1]]).cumsum(0)
        t = emb(torch.cat(toks), offs)
        v = img(b["image"].float().flatten(1) / 255)
        loss = torch.nn.functional.cross_entropy(v @ t.T, torch.arange(len(toks)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert sorted(got) == sorted(captions)


def test_segmentation_pairs_end_to_end(packer, tmp_path):  # noqa: F811
    rng = np.random.default_rng(7)
    os.makedirs(tmp_path / "img")
    os.makedirs(tmp_path / "mask")
    sizes = []
    for i in range(6):
        w, h = int(rng.integers(60, 140)), int(rng.integers(60, 140))
        sizes.append((w, h))
        PIL.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(tmp_path / "img" / ("%d.jpg" % i))
        mk = PIL.fromarray(rng.integers(0, 21, (h, w), dtype=np.uint8), "L").convert("P")
        mk.putpalette([(k * 53) % 256 for k in range(768)])
        mk.save(tmp_path / "mask" / ("%d.png" % i))
    PIL.fromarray(np.zeros((10, 10, 3), np.uint8)).save(tmp_path / "img" / "nomask.jpg")
    out = tmp_path / "out"
    build(packer, tmp_path / "img", out, "--from", "pairs", "--masks", str(tmp_path / "mask"), "--resize", "48", "--crop", "40")
    m = json.load(open(out / "manifest.json"))
    assert [s["input"] for s in m["skipped"]] == ["nomask.jpg"]
    ds = packer_reader.open(str(out))
    for i, (w, h) in enumerate(sizes):
        ref = PIL.open(tmp_path / "mask" / ("%d.png" % i))
        rw, rh = resized(w, h, 48)
        a = np.array(ref.resize((rw, rh), PIL.NEAREST))
        top, left = crop_offset(rh, 40), crop_offset(rw, 40)
        assert np.array_equal(ds[i]["mask"][:, :, 0], a[top:top + 40, left:left + 40]), i

    from packer_reader.torch import loader
    train = loader(str(out), batch_size=3, seed=2)
    net = torch.nn.Conv2d(3, 21, 3, padding=1)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    for b in train:
        x = b["image"].permute(0, 3, 1, 2).float() / 255
        y = b["mask"][..., 0].long()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert torch.isfinite(loss)


def test_fields_refused_by_a_folder(packer, tmp_path):  # noqa: F811
    os.makedirs(tmp_path / "src" / "a")
    PIL.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "src" / "a" / "x.jpg")
    res = subprocess.run([packer, "build", str(tmp_path / "src"), "-o", str(tmp_path / "o"), "--fields", "txt"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "--fields does not apply" in res.stderr
