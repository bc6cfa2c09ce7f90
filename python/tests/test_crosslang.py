"""Cross-language tests: the Go `packer build` writes shards, npy and HDF5 from the same sources
(CIFAR-10, CIFAR-100, IDX, an image folder); packer_reader reads each and must return exactly the
source bytes; h5py reads data.h5 directly with the same result.

The sources are written here with NumPy and Pillow, independently of the Go code. The packer binary
is $PACKER_BIN, or built with `go build` from the repository.
"""
import gzip
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

import packer_reader

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FORMATS = ["shards", "npy", "hdf5"]


@pytest.fixture(scope="module")
def packer(tmp_path_factory):
    path = os.environ.get("PACKER_BIN")
    if path:
        return path
    if shutil.which("go") is None:
        pytest.fail("Go is needed to build packer for the cross-language tests (or set PACKER_BIN)")
    out = str(tmp_path_factory.mktemp("bin") / "packer")
    subprocess.run(["go", "build", "-o", out, "./cmd/packer"], cwd=REPO, check=True)
    return out


def build(packer, src, out, *args):
    res = subprocess.run([packer, "build", str(src), "-o", str(out), "--force", *args],
                         capture_output=True, text=True)
    assert res.returncode == 0, f"packer build failed:\n{res.stdout}\n{res.stderr}"
    res = subprocess.run([packer, "verify", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, f"packer verify failed:\n{res.stdout}\n{res.stderr}"


def read_all(path):
    """Every record through ds[i] and through batches(), which must agree."""
    ds = packer_reader.open(str(path))
    by_index = [ds[i] for i in range(len(ds))]
    images = [im for im, _ in by_index]
    labels = [lab for _, lab in by_index]
    batched, batched_labels = [], []
    for imgs, labs in ds.batches(7):
        batched.extend(np.array(imgs, copy=True))
        batched_labels.extend(int(x) for x in labs)
    assert len(batched) == len(ds)
    for a, b in zip(images, batched):
        assert np.array_equal(a, b)
    assert labels == batched_labels
    return ds, np.stack(images) if images else np.zeros((0,)), np.array(labels, dtype=np.int64)


def write_cifar(path, kind, n, seed):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
    fine = rng.integers(0, 100 if kind == "cifar100" else 10, size=n, dtype=np.uint8)
    coarse = rng.integers(0, 20, size=n, dtype=np.uint8)
    with open(path, "wb") as f:
        for i in range(n):
            if kind == "cifar100":
                f.write(bytes([coarse[i], fine[i]]))
            else:
                f.write(bytes([fine[i]]))
            f.write(pixels[i].tobytes())
    return pixels, fine.astype(np.int64), coarse.astype(np.int64)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["cifar10", "cifar100"])
def test_cifar(packer, tmp_path, kind, fmt):
    src = tmp_path / "data.bin"
    pixels, fine, coarse = write_cifar(src, kind, 123, seed=1)
    out = tmp_path / "out"
    build(packer, src, out, "--from", kind, "--format", fmt, "--shard-size", "64KiB")
    ds, images, labels = read_all(out)
    assert ds.sample_spec["shape"] == [32, 32, 3]
    assert np.array_equal(images, pixels.transpose(0, 2, 3, 1))  # HWC, what PIL sees
    assert np.array_equal(labels, fine)
    if kind == "cifar100":
        assert [ds.aux(i)["coarse_label"] for i in range(len(ds))] == coarse.tolist()
    # CHW keeps the native planes.
    out_chw = tmp_path / "chw"
    build(packer, src, out_chw, "--from", kind, "--format", fmt, "--layout", "chw")
    _, images, _ = read_all(out_chw)
    assert np.array_equal(images, pixels)


def write_idx(path, arr, typecode):
    dims = arr.shape
    header = struct.pack(">BBBB", 0, 0, typecode, len(dims)) + b"".join(struct.pack(">I", d) for d in dims)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(header + arr.astype(arr.dtype.newbyteorder(">")).tobytes())


@pytest.mark.parametrize("fmt", FORMATS)
def test_idx(packer, tmp_path, fmt):
    rng = np.random.default_rng(2)
    imgs = rng.integers(0, 256, size=(211, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=211).astype(np.int16)
    src = tmp_path / "idx"
    src.mkdir()
    write_idx(src / "train-images-idx3-ubyte.gz", imgs, 0x08)
    write_idx(src / "train-labels-idx1-ubyte.gz", labels, 0x0B)  # 16-bit labels
    out = tmp_path / "out"
    build(packer, src, out, "--from", "idx", "--format", fmt)
    ds, images, got = read_all(out)
    assert images.shape == (211, 28, 28, 1)
    assert np.array_equal(images[..., 0], imgs)
    assert np.array_equal(got, labels.astype(np.int64))


FASHION = "/usr/share/datasets/fashion-mnist"


def test_real_fashion_mnist_npy(packer, tmp_path):
    """The real Fashion-MNIST test split (Debian's dataset-fashion-mnist), via npy."""
    if not os.path.exists(FASHION):
        pytest.fail(f"{FASHION} is missing (scripts/setup.sh installs dataset-fashion-mnist)")
    out = tmp_path / "fm"
    build(packer, FASHION, out, "--split", "test", "--format", "npy")
    with gzip.open(os.path.join(FASHION, "t10k-images-idx3-ubyte.gz")) as f:
        raw = np.frombuffer(f.read()[16:], dtype=np.uint8).reshape(10000, 28, 28)
    ds = packer_reader.open(str(out))
    images = np.concatenate([np.array(b, copy=True) for b, _ in ds.batches(1000)])
    assert np.array_equal(images[..., 0], raw)
    assert ds.classes[9] == "Ankle boot"


@pytest.mark.parametrize("fmt", FORMATS)
def test_image_folder(packer, tmp_path, fmt):
    """PNG and JPEG images of one size: packed pixels equal Pillow's convert("RGB")."""
    from PIL import Image

    rng = np.random.default_rng(3)
    root = tmp_path / "photos"
    want = []
    for cls in ["cat", "dog"]:
        (root / cls).mkdir(parents=True)
        for k in range(5):
            arr = rng.integers(0, 256, size=(20, 30, 3), dtype=np.uint8)
            p = root / cls / f"{k}.png"
            mode = "RGB" if k % 2 else "L"
            img = Image.fromarray(arr if mode == "RGB" else arr[..., 0], mode)
            img.save(p)
            if k == 4:
                p = root / cls / f"{k}.jpg"
                img.save(p, quality=85)
                (root / cls / f"{k}.png").unlink()
            want.append((np.asarray(Image.open(p).convert("RGB")), 0 if cls == "cat" else 1, f"{cls}/{p.name}"))
    out = tmp_path / "out"
    # The images are all 30x20 but a build cannot know that before decoding them: a fixed
    # shape is asked for (a crop to the images' own size changes no pixel).
    build(packer, root, out, "--format", fmt, "--crop", "30x20")
    ds, images, labels = read_all(out)
    assert ds.classes == ["cat", "dog"]
    assert len(ds) == len(want)
    for i, (img, lab, path) in enumerate(want):
        assert np.array_equal(images[i], img), f"record {i}"
        assert labels[i] == lab
        assert ds.meta(i) == {"path": path}, f"record {i}: the source path relative to the folder"


def test_h5py_reads_data_h5_directly(packer, tmp_path):
    h5py = pytest.importorskip("h5py") if os.environ.get("PACKER_NO_H5PY") == "1" else __import__("h5py")
    src = tmp_path / "data.bin"
    pixels, fine, _ = write_cifar(src, "cifar10", 50, seed=4)
    out = tmp_path / "out"
    build(packer, src, out, "--from", "cifar10", "--format", "hdf5")
    with h5py.File(out / "data.h5", "r") as f:
        assert np.array_equal(f["images"][:], pixels.transpose(0, 2, 3, 1))
        assert np.array_equal(f["labels"][:], fine)
    _, images, labels = read_all(out)
    assert np.array_equal(images, pixels.transpose(0, 2, 3, 1))


def test_float_dtypes_agree_across_formats(packer, tmp_path):
    """Normalised float16/float32 records are the same bytes in every format."""
    src = tmp_path / "data.bin"
    write_cifar(src, "cifar10", 20, seed=5)
    for dtype in ["float16", "float32"]:
        arrays = []
        for fmt in FORMATS:
            out = tmp_path / f"{dtype}-{fmt}"
            build(packer, src, out, "--from", "cifar10", "--format", fmt, "--dtype", dtype,
                  "--mean", "0.5,0.4,0.3", "--std", "0.2,0.25,0.3", "--layout", "chw")
            _, images, _ = read_all(out)
            assert images.dtype == np.dtype(dtype)
            arrays.append(images)
        for a in arrays[1:]:
            assert a.tobytes() == arrays[0].tobytes()


def test_variable_size_images(packer, tmp_path):
    """Images of several sizes packed with no crop (format version 2): every record read back
    by the Python reader at its own shape equals Pillow's convert("RGB") of its file, through
    ds[i] and through batches, and a build with --format npy is refused before any work."""
    from PIL import Image

    rng = np.random.default_rng(5)
    root = tmp_path / "photos"
    want = []
    sizes = [(20, 30), (31, 7), (1, 1), (64, 48), (9, 40)]
    for cls in ["a", "b"]:
        (root / cls).mkdir(parents=True)
        for k, (h, w) in enumerate(sizes):
            arr = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            p = root / cls / f"{k}.png"
            Image.fromarray(arr).save(p)
            want.append(np.asarray(Image.open(p).convert("RGB")))
    out = tmp_path / "out"
    build(packer, root, out)
    with packer_reader.open(str(out)) as ds:
        assert ds.manifest["format_version"] == 2 and ds.record_size is None
        assert len(ds) == len(want)
        for i, img in enumerate(want):
            got, _ = ds[i]
            assert got.shape == img.shape and np.array_equal(got, img), f"record {i}"
        seen = 0
        for imgs, labels in ds.batches(3):
            for a in imgs:
                assert np.array_equal(a, want[seen]), f"batch record {seen}"
                seen += 1
        assert seen == len(want)
    res = subprocess.run([packer, "build", str(root), "-o", str(tmp_path / "npy"), "--format", "npy"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "--crop" in res.stderr, res
    assert not (tmp_path / "npy").exists()


def _go_built_v2(packer, tmp_path):
    """A small Go-built version-2 (variable-size) image dataset of classes cat, dog, emu."""
    from PIL import Image

    root = tmp_path / "src"
    for c, cls in enumerate(["cat", "dog", "emu"]):
        (root / cls).mkdir(parents=True)
        for k in range(2):
            Image.new("RGB", (10 + k, 8 + c), (40 * c, 9 * k, 7)).save(root / cls / f"{k}.png")
    out = tmp_path / "out"
    build(packer, root, out)
    return out


def _reseal(out, fn):
    import json

    import shardwriter

    p = os.path.join(str(out), "manifest.json")
    m = json.load(open(p))
    fn(m)
    shardwriter.write_manifest(p, m)


def test_reader_refuses_manifest_classes_unlike_the_shards(packer, tmp_path):
    """A (resealed) manifest naming the classes in another order than the shards' headers would
    serve every record under another class name; the reader refuses it, as verify does."""
    out = _go_built_v2(packer, tmp_path)
    assert packer_reader.open(str(out)).classes == ["cat", "dog", "emu"]
    _reseal(out, lambda m: m.update(classes=["dog", "cat", "emu"]))
    with pytest.raises(packer_reader.FormatError) as ei:
        packer_reader.open(str(out))
    assert "shard-00000.pks" in str(ei.value) and "classes" in str(ei.value)


def test_reader_refuses_shard_newer_than_manifest(packer, tmp_path):
    """Version-2 shards under a manifest that says format_version 1 (the Go reader refuses it)."""
    out = _go_built_v2(packer, tmp_path)
    _reseal(out, lambda m: m.update(format_version=1))
    with pytest.raises(packer_reader.FormatError) as ei:
        packer_reader.open(str(out))
    assert "shard-00000.pks" in str(ei.value) and "version" in str(ei.value)


def test_hdf5_reader_refuses_manifest_classes_unlike_the_file(packer, tmp_path):
    """The same for data.h5: its root attribute "spec" names the classes; a (resealed) manifest
    naming them in another order is refused, as verify refuses it."""
    pytest.importorskip("h5py")
    from PIL import Image

    root = tmp_path / "src"
    for c, cls in enumerate(["cat", "dog"]):
        (root / cls).mkdir(parents=True)
        Image.new("RGB", (9, 9), (90 * c, 3, 7)).save(root / cls / "0.png")
    out = tmp_path / "out"
    build(packer, root, out, "--format", "hdf5", "--crop", "8")
    assert packer_reader.open(str(out)).classes == ["cat", "dog"]
    _reseal(out, lambda m: m.update(classes=["dog", "cat"]))
    with pytest.raises(packer_reader.FormatError) as ei:
        packer_reader.open(str(out))
    assert "data.h5" in str(ei.value) and "classes" in str(ei.value)


@pytest.fixture(scope="module")
def orderdump(tmp_path_factory):
    """internal/tools/orderdump: the Go shard.Loader's batches and states as JSON."""
    if shutil.which("go") is None:
        pytest.fail("Go is needed to build orderdump for the cross-language order tests")
    out = str(tmp_path_factory.mktemp("bin") / "orderdump")
    subprocess.run(["go", "build", "-o", out, "./internal/tools/orderdump"], cwd=REPO, check=True)
    return out


def go_batches(orderdump, path, **opts):
    import json

    res = subprocess.run([orderdump, str(path), json.dumps(opts)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_go_and_python_loaders_same_order(packer, orderdump, tmp_path):
    """The Go Loader and the Python reader yield the same batches (record indices and bytes)
    under ORDER.md v2 (shuffled or not, every rank of 1-3, drop-last or padding, resumed from
    the Go Loader's state) and v1 (explicit), on a dataset packed by the Go packer; the Go
    state after each batch is the Python loader's."""
    src = tmp_path / "data.bin"
    pixels, fine, _ = write_cifar(src, "cifar10", 203, seed=5)
    out = tmp_path / "out"
    build(packer, src, out, "--from", "cifar10", "--format", "shards", "--shard-size", "64KiB")
    ds = packer_reader.open(str(out))
    hwc = pixels.transpose(0, 2, 3, 1)
    rng = np.random.default_rng(24)
    cases = [dict(BatchSize=32, Shuffle=True, Seed=1, World=2, Rank=r) for r in range(2)]
    for _ in range(12):
        w = int(rng.integers(1, 4))
        cases.append(dict(BatchSize=int(rng.integers(1, 40)), Shuffle=bool(rng.integers(0, 4)),
                          Seed=int(rng.integers(0, 1 << 62)), Epoch=int(rng.integers(0, 3)), World=w,
                          Rank=int(rng.integers(0, w)), DropLast=bool(rng.integers(0, 2)),
                          Start=int(rng.integers(0, 204))))
    cases.append(dict(Order=1, BatchSize=16, Shuffle=True, Seed=3, World=3, Rank=1, Buffer=20, Start=5))
    for c in cases:
        go = go_batches(orderdump, out, **c)
        kw = dict(shuffle=c["Shuffle"], seed=c["Seed"], epoch=c.get("Epoch", 0), rank=c["Rank"],
                  world_size=c["World"], drop_last=c.get("DropLast", False), start=c.get("Start", 0),
                  order_version=c.get("Order", 2), buffer_size=c.get("Buffer", 4096))
        got = list(ds.batches(c["BatchSize"], **kw))
        idx = [b for b in go["batches"]]
        assert len(got) == len(idx) == go["num_batches"], c
        for (x, y), i in zip(got, idx):
            assert np.array_equal(x, hwc[i]) and np.array_equal(y, fine[i]), c
        assert sum(len(b) for b in idx) == go["len"]
        if c.get("Order", 2) == 2:
            want = ds.order(batch_size=c["BatchSize"], **{k: v for k, v in kw.items() if k != "buffer_size"})
            assert sum(idx, []) == want.tolist()
            # Go's state after batch k: the global position the Python plan gives
            from packer_reader import _order
            plan = _order.Plan(len(ds), c.get("Start", 0), c["BatchSize"], c["Rank"], c["World"],
                               c.get("DropLast", False))
            for k, st in enumerate(go["states"]):
                assert st == {"version": 1, "order": 2, "seed": c["Seed"], "epoch": c.get("Epoch", 0),
                              "position": plan.position_after(k + 1), "records": len(ds),
                              "shuffle": c["Shuffle"]}, c
    ds.close()
