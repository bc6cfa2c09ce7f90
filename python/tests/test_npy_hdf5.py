import os

import numpy as np
import pytest

import packer_reader
from conftest import CLASSES, SPEC


def collect(it):
    xs, ys = [], []
    for x, y in it:
        xs.append(x.copy())
        ys.append(y.copy())
    return np.concatenate(xs), np.concatenate(ys)


@pytest.fixture(params=["npy", "hdf5"])
def fdir(request, npy_dir, h5_dir):
    return npy_dir if request.param == "npy" else h5_dir


def test_random_access(fdir, data):
    imgs, labels, coarse, metas = data
    with packer_reader.open(fdir) as ds:
        assert ds.format in ("npy", "hdf5") and len(ds) == len(imgs)
        assert ds.classes == CLASSES and ds.sample_spec == SPEC
        for i in [0, 1, 100, 202, -3]:
            x, y = ds[i]
            assert np.array_equal(x, imgs[i]) and y == labels[i]
            assert ds.aux(i) == {"coarse": int(coarse[i])}
        if ds.format == "npy":
            assert ds.meta(5) == metas[5]
        else:
            assert ds.meta(5) is None


@pytest.mark.parametrize("B", [1, 16, 300])
def test_batches(fdir, data, B):
    imgs, labels = data[0], data[1]
    with packer_reader.open(fdir) as ds:
        x, y = collect(ds.batches(B))
        assert np.array_equal(x, imgs) and np.array_equal(y, labels)
        x, y = collect(ds.batches(B, shuffle=True, seed=8, epoch=2, buffer_size=50))
        order = ds.order(shuffle=True, seed=8, epoch=2, buffer_size=50)
        assert np.array_equal(x, imgs[order]) and np.array_equal(y, labels[order])
        assert sorted(order.tolist()) == list(range(len(imgs)))


def test_rank_split(fdir, data):
    imgs = data[0]
    seen = []
    with packer_reader.open(fdir) as ds:
        for r in range(3):
            x, _ = collect(ds.batches(10, shuffle=True, seed=1, rank=r, world_size=3, start=4, order_version=1))
            order = ds.order(shuffle=True, seed=1, rank=r, world_size=3, order_version=1)
            assert np.array_equal(x, imgs[order[4:]])
            seen += order.tolist()
    assert sorted(seen) == list(range(len(imgs)))


def test_verify_ok(fdir):
    rep = packer_reader.verify(fdir)
    assert rep.ok, rep


def test_npy_shape_mismatch(npy_dir, tmp_path):
    import shutil

    d = str(tmp_path / "bad")
    shutil.copytree(npy_dir, d)
    np.save(os.path.join(d, "labels.npy"), np.zeros(5, dtype=np.int64))
    with pytest.raises(packer_reader.FormatError, match="labels"):
        packer_reader.open(d)
    rep = packer_reader.verify(d)
    assert sorted(f.kind for f in rep.faults) == ["sha256", "shape", "size"], rep
    with open(os.path.join(d, "images.npy"), "r+b") as f:
        f.seek(-1, 2)
        f.write(b"\xff")  # flip the last pixel: only SHA-256 can see it in npy
    assert any(f.kind == "sha256" and f.path.endswith("images.npy") for f in packer_reader.verify(d).faults)


def test_npy_truncated(npy_dir, tmp_path):
    import shutil

    d = str(tmp_path / "trunc")
    shutil.copytree(npy_dir, d)
    p = os.path.join(d, "images.npy")
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 10)
    with pytest.raises(packer_reader.FormatError, match="images.npy"):
        packer_reader.open(d)
    kinds = sorted(f.kind for f in packer_reader.verify(d).faults)
    assert kinds == ["sha256", "size", "size"], kinds  # manifest size and hash, header-implied size


@pytest.mark.parametrize("name", ["images.npy", "labels.npy"])
@pytest.mark.parametrize("damage", [(10, b"X"), (10, b"\xff"), (11, b"("), (30, b"]")])
def test_npy_damaged_header(npy_dir, tmp_path, name, damage):
    # A byte of the header dict damaged: numpy's parser raises tokenize.TokenError or
    # SyntaxError, not ValueError; open and verify must still name the file (a FormatError).
    import shutil

    d = str(tmp_path / "hdr")
    shutil.copytree(npy_dir, d)
    at, byte = damage
    with open(os.path.join(d, name), "r+b") as f:
        f.seek(at)
        f.write(byte)
    with pytest.raises(packer_reader.FormatError, match=name):
        packer_reader.open(d)
    rep = packer_reader.verify(d)
    assert not rep.ok and any(f.path.endswith(name) for f in rep.faults), rep


def test_hdf5_damaged(h5_dir, tmp_path):
    import shutil

    d = str(tmp_path / "h5bad")
    shutil.copytree(h5_dir, d)
    p = os.path.join(d, "data.h5")
    with open(p, "r+b") as f:
        f.write(b"\0" * 64)  # destroy the superblock
    with pytest.raises(packer_reader.FormatError):
        packer_reader.open(d)
    rep = packer_reader.verify(d)
    assert [f.kind for f in rep.faults] == ["sha256"] and "not parsed" in rep.notes[0], rep


def test_hdf5_structure_mismatch(h5_dir, tmp_path):
    """A well-formed data.h5 whose datasets do not match the manifest (hashes updated)."""
    import hashlib
    import json
    import shutil

    h5py = pytest.importorskip("h5py")
    d = str(tmp_path / "h5shape")
    shutil.copytree(h5_dir, d)
    p = os.path.join(d, "data.h5")
    with h5py.File(p, "a") as f:
        del f["labels"]
        f.create_dataset("labels", data=np.zeros(7, dtype=np.int32))
    mp = os.path.join(d, "manifest.json")
    with open(mp) as f:
        m = json.load(f)
    with open(p, "rb") as f:
        m["files"][0].update(size=os.path.getsize(p), sha256=hashlib.sha256(f.read()).hexdigest())
    import shardwriter

    shardwriter.write_manifest(mp, m)  # resealed: the cross-check is under test, not the checksum
    rep = packer_reader.verify(d)
    assert [f.kind for f in rep.faults] == ["shape"] and "/labels" in rep.faults[0].reason, rep
    with pytest.raises(packer_reader.FormatError, match="labels"):
        packer_reader.open(d)


def test_hdf5_direct_h5py(h5_dir, data):
    h5py = pytest.importorskip("h5py")
    with h5py.File(os.path.join(h5_dir, "data.h5"), "r") as f:
        assert np.array_equal(f["images"][...], data[0])
        assert f["labels"].dtype == np.int64
