"""Format version 2: variable-size image records with per-record shapes (FlagShapes). ds[i] is
the record at its own shape; batches are a list of arrays (torch: a list of tensors) plus the
labels; malformed shape tables are format errors naming the shard and record."""

import os

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES, make_labels, require_torch
from packer_reader import FormatError

N = 41


def _images(layout, seed=2):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(N):
        h, w = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        shape = (h, w, 3) if layout == "hwc" else (3, h, w)
        out.append(rng.integers(0, 256, shape, dtype=np.uint8))
    return out


def _spec(layout):
    return {"shape": [-1, -1, 3] if layout == "hwc" else [3, -1, -1], "dtype": "uint8", "layout": layout}


@pytest.fixture(params=["hwc", "chw"])
def v2(request, tmp_path):
    imgs = _images(request.param)
    d = str(tmp_path)
    shardwriter.write_dataset(d, imgs, make_labels(N), CLASSES, _spec(request.param), shard_size=1500,
                              block_records=5, shapes=True)
    return d, imgs


def test_records_at_their_own_shape(v2):
    d, imgs = v2
    with packer_reader.open(d) as ds:
        assert len(ds) == N and len(ds.shards) > 2 and not ds.fixed
        for i in range(N):
            x, y = ds[i]
            assert x.shape == imgs[i].shape and np.array_equal(x, imgs[i]) and y == make_labels(N)[i]
        xs, ys = ds[3:9]
        assert [x.shape for x in xs] == [im.shape for im in imgs[3:9]]
    rep = packer_reader.verify(d)
    assert rep.ok, [str(f) for f in rep.faults]


@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_are_lists(v2, shuffle):
    d, imgs = v2
    labels = make_labels(N)
    with packer_reader.open(d) as ds:
        idx = ds.order(shuffle=shuffle, seed=4, buffer_size=7)
        got = []
        for xs, ys in ds.batches(8, shuffle=shuffle, seed=4, buffer_size=7):
            assert isinstance(xs, list) and len(xs) == len(ys) and ys.dtype == np.int64
            got += list(zip(xs, ys.tolist()))
        assert len(got) == N
        for (x, y), i in zip(got, idx):
            assert np.array_equal(x, imgs[i]) and x.shape == imgs[i].shape and y == labels[i]


def test_torch_list_of_tensors(v2):
    torch = require_torch()
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    d, imgs = v2
    ds = PackerIterableDataset(d, batch_size=8, num_workers=2)
    seen = []
    for xs, ys in DataLoader(ds, batch_size=None, num_workers=2):
        assert isinstance(xs, list) and all(isinstance(t, torch.Tensor) for t in xs)
        seen += [t.numpy().tobytes() + bytes(t.shape) for t in xs]
    assert sorted(seen) == sorted(im.tobytes() + bytes(im.shape) for im in imgs)


def _one_shard(tmp_path, recs, spec, **kw):
    p = str(tmp_path / "s.pks")
    shardwriter.write_shard(p, recs, list(range(len(recs))), spec, block_records=4, **kw)
    return p


def test_shape_table_mismatch_is_format_error(tmp_path):
    imgs = _images("hwc")[:10]
    shapes = [im.shape for im in imgs]
    h, w, c = shapes[6]
    shapes[6] = (w + 1, h, c)  # the table says another size than the record's bytes
    p = _one_shard(tmp_path, imgs, _spec("hwc"), shapes=shapes)
    with pytest.raises(FormatError) as ei:
        packer_reader.open(p)
    assert "s.pks" in str(ei.value) and "record 6" in str(ei.value)


def test_zero_dimension_is_format_error(tmp_path):
    imgs = _images("hwc")[:10]
    imgs[3] = np.zeros((0, 4, 3), np.uint8)
    p = _one_shard(tmp_path, imgs, _spec("hwc"), shapes=True)
    with pytest.raises(FormatError) as ei:
        packer_reader.open(p)
    assert "record 3" in str(ei.value)


def test_versions_and_flags(tmp_path):
    imgs = _images("hwc")[:6]
    spec = _spec("hwc")
    # FlagShapes in a version-1 shard: unknown flag in that version
    with pytest.raises(FormatError) as ei:
        packer_reader.open(_one_shard(tmp_path, imgs, spec, shapes=True, version=1))
    assert "flag" in str(ei.value)
    with pytest.raises(FormatError) as ei:
        packer_reader.open(_one_shard(tmp_path, imgs, spec, shapes=True, version=3))
    assert "version 3" in str(ei.value)
    # a version-2 header on a shard without FlagShapes is readable (no part needs more)
    fixed = [np.full((2, 2, 3), i, np.uint8) for i in range(6)]
    with packer_reader.open(_one_shard(tmp_path, fixed, {"shape": [2, 2, 3], "dtype": "uint8"}, version=2)) as ds:
        assert np.array_equal(ds[5][0], fixed[5])
    # FlagShapes without FlagVarSize
    with pytest.raises(FormatError):
        packer_reader.open(_one_shard(tmp_path, fixed, {"shape": [2, 2, 3], "dtype": "uint8"}, shapes=True))


def test_version1_two_varying_dims_shape_unknown(tmp_path):
    imgs = _images("hwc")[:6]
    p = _one_shard(tmp_path, imgs, _spec("hwc"))  # version 1: offsets, no shapes
    with packer_reader.open(p) as ds:
        with pytest.raises(FormatError) as ei:
            ds[2]
        assert "shape unknown: version-1 shard" in str(ei.value) and "s.pks" in str(ei.value)
