"""A dataset opened serves its own records or fails: never those of a dataset that replaced it
(packer build --force moves a new folder to OUT while a reader reads), nor those of a file
renamed over one of its shards."""

import os
import shutil

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES, SPEC, make_images, make_labels
from packer_reader import PackerError
from packer_reader import _shards

N = 200  # shards of 30 records: 7 shards


def _write(d, seed):
    imgs = make_images(N, seed=seed)
    shardwriter.write_dataset(d, list(imgs), make_labels(N), CLASSES, SPEC, shard_size=30 * 60, block_records=7)
    return imgs


def _replace(live, stage):
    """What packer build --force does where it cannot exchange the two names atomically: the
    old folder aside, the new one in place, the old one removed (the reader's view is the same
    after an exchange)."""
    os.rename(live, live + ".old")
    os.rename(stage, live)
    shutil.rmtree(live + ".old")


def _read_all(ds, after_first):
    """Every record the batches serve, as (index, image); calls after_first() after the first
    batch; stops at the first error and returns it."""
    out, err = [], None
    pos = 0
    try:
        for x, _ in ds.batches(8, prefetch=0):
            out.extend((pos + k, x[k].copy()) for k in range(len(x)))
            pos += len(x)
            if after_first:
                after_first()
                after_first = None
    except (PackerError, OSError) as e:
        err = e
    return out, err


@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize("crc", [True, False])
@pytest.mark.parametrize("many", [False, True])  # more shards than MAX_OPEN_SHARDS: reopened per read
def test_replaced_while_reading(tmp_path, monkeypatch, direct, crc, many):
    if many:
        monkeypatch.setattr(_shards, "MAX_OPEN_SHARDS", 2)
    live, stage = str(tmp_path / "live"), str(tmp_path / "live.partial")
    old = _write(live, 5)
    _write(stage, 6)
    with packer_reader.open(live, verify_crc=crc, direct=direct) as ds:
        served, err = _read_all(ds, lambda: _replace(live, stage))
    bad = [i for i, x in served if not np.array_equal(x, old[i])]
    assert not bad, "%d of %d records served came from the new build (error: %s)" % (len(bad), len(served), err)


@pytest.mark.parametrize("direct", [False, True])
def test_shard_renamed_over(tmp_path, direct):
    # a sibling's shard renamed over shard 3 after the open (as rsync does), CRC check off:
    # nothing but the file's identity tells the two apart
    live, sib = str(tmp_path / "live"), str(tmp_path / "sib")
    old = _write(live, 5)
    _write(sib, 6)
    with packer_reader.open(live, verify_crc=False, direct=direct) as ds:
        name = "shard-00003.pks"
        served, err = _read_all(ds, lambda: os.rename(os.path.join(sib, name), os.path.join(live, name)))
    bad = [i for i, x in served if not np.array_equal(x, old[i])]
    assert not bad, "%d of %d records served came from the file renamed over (error: %s)" % (len(bad), len(served), err)


@pytest.mark.parametrize("direct", [False, True])
def test_npy_replaced_while_reading(tmp_path, direct):
    # npy files carry no checksums: the descriptors' identity is all that keeps the new
    # images.npy out (the O_DIRECT one is opened on first use)
    live, stage = str(tmp_path / "live"), str(tmp_path / "live.partial")
    old = make_images(N, seed=5)
    shardwriter.write_npy_dataset(live, old, make_labels(N), CLASSES, SPEC)
    shardwriter.write_npy_dataset(stage, make_images(N, seed=6), make_labels(N), CLASSES, SPEC)
    with packer_reader.open(live, direct=direct) as ds:
        _replace(live, stage)  # before the first read: no descriptor but the one open at open
        served, err = _read_all(ds, None)
    bad = [i for i, x in served if not np.array_equal(x, old[i])]
    assert not bad, "%d of %d records served came from the new build (error: %s)" % (len(bad), len(served), err)


def _read_each(ds, how):
    """Every record read one way, as (index, image); stops at the first error and returns it."""
    out, err = [], None
    try:
        if how == "getitem":
            for i in range(len(ds)):
                out.append((i, np.asarray(ds[i][0]).copy()))
        else:
            shuffle = how == "shuffle"
            order = ds.order(shuffle=shuffle, seed=3) if shuffle else np.arange(len(ds))
            pos = 0
            for x, _ in ds.batches(8, shuffle=shuffle, seed=3, prefetch=0):
                out.extend((int(order[pos + k]), x[k].copy()) for k in range(len(x)))
                pos += len(x)
    except (PackerError, OSError) as e:
        err = e
    return out, err


@pytest.mark.parametrize("how", ["getitem", "batches", "shuffle"])
@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize("many", [False, True])
def test_shard_written_in_place(tmp_path, monkeypatch, how, direct, many):
    # a sibling's shard written over shard 3 in place (cp, rsync --inplace: same inode, same
    # size) after every block was read and checked: no CRC check runs again on those blocks
    if many:
        monkeypatch.setattr(_shards, "MAX_OPEN_SHARDS", 2)
    live, sib = str(tmp_path / "live"), str(tmp_path / "sib")
    old = _write(live, 5)
    _write(sib, 6)
    p = os.path.join(live, "shard-00003.pks")
    with packer_reader.open(live, direct=direct) as ds:
        served, err = _read_each(ds, how)
        assert err is None and len(served) == N
        st = os.stat(p)
        with open(os.path.join(sib, "shard-00003.pks"), "rb") as f:
            data = f.read()
        with open(p, "r+b") as f:
            f.write(data)
        # a modification time of its own: file times have a coarse clock
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        served, err = _read_each(ds, how)
    bad = [i for i, x in served if not np.array_equal(x, old[i])]
    assert not bad and err is not None and "shard-00003.pks" in str(err), \
        "%d of %d records served were the bytes written in place (error: %s)" % (len(bad), len(served), err)


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_dataset_replaced_before_workers_open(tmp_path, workers):
    # PackerIterableDataset reads the count and classes when it is made, and every worker (and
    # each epoch of non-persistent workers) opens the dataset again by path: a dataset replaced
    # in between must not be served under the first one's count, nor mixed across workers
    from conftest import require_torch

    require_torch()
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    live, stage = str(tmp_path / "live"), str(tmp_path / "live.partial")
    old = _write(live, 5)
    _write(stage, 6)
    ds = PackerIterableDataset(live, batch_size=8)
    _replace(live, stage)
    served, err = [], None
    try:
        for x, _ in DataLoader(ds, batch_size=None, num_workers=workers):
            served.extend(x.numpy().copy())
    except (PackerError, RuntimeError) as e:  # a worker's error comes as a RuntimeError naming it
        err = e
    bad = [x for x in served if not any(np.array_equal(x, o) for o in old)]
    assert not bad and err is not None and "replaced" in str(err), \
        "%d of %d records served came from the dataset that replaced it (error: %s)" % (len(bad), len(served), err)
