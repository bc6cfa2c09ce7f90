"""open(path, direct=True): shuffled batches are read with O_DIRECT, several reads in flight,
and give the same bytes as reads through the page cache, with the same CRC and file checks."""

import fcntl
import os
import shutil

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES, make_images, make_labels
from packer_reader import CorruptionError, PackerError
from packer_reader import _shards
from packer_reader._io import open_direct

# 3000-byte records (not a multiple of the 512-byte sector nor of 4096), 3 per checksum block,
# shards of 40 records: records and blocks start at every alignment
SHAPE = (20, 50, 3)
SPEC3K = {"shape": list(SHAPE), "dtype": "uint8", "layout": "hwc"}
N = 230


def _write(d, seed=7, n=N, shape=SHAPE):
    imgs = make_images(n, shape=shape, seed=seed)
    spec = dict(SPEC3K, shape=list(shape))
    shardwriter.write_dataset(d, list(imgs), make_labels(n), CLASSES, spec, shard_size=40 * imgs[0].size,
                              block_records=3)
    return imgs


# 1536-byte records (3 sectors): a run of records whose blocks are checked is read straight
# into its batch slots
SHAPE_SECTORS = (16, 32, 3)


@pytest.fixture(scope="module", params=[SHAPE, SHAPE_SECTORS], ids=["3000B", "1536B"])
def big_dir(tmp_path_factory, request):
    d = str(tmp_path_factory.mktemp("direct"))
    return d, _write(d, shape=request.param)


def _needs_direct(d):
    fd = open_direct(os.path.join(d, "manifest.json"))
    if fd is None:
        pytest.skip("O_DIRECT not offered by the file system of %s" % d)
    os.close(fd)


def _all(ds, **kw):
    return [(x.copy(), y.copy()) for x, y in ds.batches(**kw)]


@pytest.mark.parametrize("crc", [True, False])
@pytest.mark.parametrize("batch,rank,world", [(1, 0, 1), (7, 0, 1), (32, 1, 2), (64, 2, 3), (256, 0, 1)])
def test_shuffled_direct_equals_page_cache(big_dir, crc, batch, rank, world):
    d, imgs = big_dir
    _needs_direct(d)
    kw = dict(batch_size=batch, shuffle=True, seed=5, epoch=1, rank=rank, world_size=world, prefetch=0)
    with packer_reader.open(d, verify_crc=crc) as ds:
        want = _all(ds, **kw)
        order = ds.order(shuffle=True, seed=5, epoch=1, rank=rank, world_size=world, batch_size=batch)
    with packer_reader.open(d, verify_crc=crc, direct=True) as ds:
        for epoch in (0, 1):  # the first pass checks the blocks, the second reads records only
            got = _all(ds, **kw)
            assert len(got) == len(want)
            for (x, y), (wx, wy) in zip(got, want):
                assert np.array_equal(x, wx) and np.array_equal(y, wy)
    assert np.array_equal(np.concatenate([x for x, _ in want]), imgs[order])


def _watch_reads(monkeypatch):
    """Every os.preadv from now on, as (descriptor opened with O_DIRECT, bytes asked)."""
    seen = []
    real = os.preadv

    def preadv(fd, bufs, offset, *a):
        seen.append((bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT), sum(len(memoryview(b)) for b in bufs)))
        return real(fd, bufs, offset, *a)

    monkeypatch.setattr(os, "preadv", preadv)
    return seen


@pytest.mark.parametrize("crc", [True, False])
def test_shuffled_direct_reads_are_o_direct(big_dir, monkeypatch, crc):
    d, imgs = big_dir
    _needs_direct(d)
    with packer_reader.open(d, verify_crc=crc, direct=True) as ds:
        seen = _watch_reads(monkeypatch)
        for epoch in (0, 1):
            del seen[:]
            got = np.concatenate([x.copy() for x, _ in ds.batches(16, shuffle=True, seed=2, epoch=epoch, prefetch=0)])
            assert np.array_equal(got, imgs[ds.order(shuffle=True, seed=2, epoch=epoch)])
            buffered = [n for direct, n in seen if not direct]
            assert seen and not buffered, "epoch %d: %d of %d reads went through the page cache (%d bytes)" % (
                epoch, len(buffered), len(seen), sum(buffered))


def test_shuffled_direct_reads_in_flight(big_dir, monkeypatch):
    # the reads of one batch are issued from several threads at once
    import threading

    d, _ = big_dir
    _needs_direct(d)
    threads = set()
    real = os.preadv

    def preadv(fd, bufs, offset, *a):
        threads.add(threading.get_ident())
        return real(fd, bufs, offset, *a)

    with packer_reader.open(d, direct=True) as ds:
        monkeypatch.setattr(os, "preadv", preadv)
        for _ in ds.batches(64, shuffle=True, seed=2, prefetch=0):
            pass
    assert len(threads) > 1


@pytest.mark.parametrize("batch", [1, 16, 230])
def test_damaged_record_direct_shuffled(tmp_path, batch):
    d = str(tmp_path / "d")
    imgs = _write(d)
    _needs_direct(d)
    # one byte of local record 10 of shard 2 (dataset record 90; block 3: records 9..11)
    sp = os.path.join(d, "shard-00002.pks")
    with packer_reader.open(d) as ds:
        off, _ = ds._segs[2].range_span(10, 10)
    with open(sp, "r+b") as f:
        f.seek(off + 1234)
        b = f.read(1)[0]
        f.seek(off + 1234)
        f.write(bytes([b ^ 0x10]))
    with packer_reader.open(d, direct=True) as ds:
        order = ds.order(shuffle=True, seed=4)
        served = []
        with pytest.raises(CorruptionError) as ei:
            for x, _ in ds.batches(batch, shuffle=True, seed=4, prefetch=0):
                served.extend(x.copy())
    assert "shard-00002.pks" in str(ei.value) and "records 9..11" in str(ei.value)
    assert not {89, 90, 91} & set(order[:len(served)].tolist())
    assert all(np.array_equal(x, imgs[i]) for x, i in zip(served, order.tolist()))


@pytest.mark.parametrize("many", [False, True])
def test_replaced_while_reading_direct_shuffled(tmp_path, monkeypatch, many):
    if many:
        monkeypatch.setattr(_shards, "MAX_OPEN_SHARDS", 2)
    live, stage = str(tmp_path / "live"), str(tmp_path / "live.partial")
    old = _write(live, seed=5)
    _write(stage, seed=6)
    _needs_direct(live)
    served, err = [], None
    with packer_reader.open(live, verify_crc=False, direct=True) as ds:
        order = ds.order(shuffle=True, seed=1).tolist()
        try:
            for x, _ in ds.batches(16, shuffle=True, seed=1, prefetch=0):
                if not served:
                    os.rename(live, live + ".old")
                    os.rename(stage, live)
                    shutil.rmtree(live + ".old")
                served.extend(x.copy())
        except (PackerError, OSError) as e:
            err = e
    bad = [i for x, i in zip(served, order) if not np.array_equal(x, old[i])]
    assert not bad, "%d of %d records served came from the new build (error: %s)" % (len(bad), len(served), err)


def test_shuffled_direct_npy(tmp_path):
    d = str(tmp_path / "npy")
    imgs = make_images(N, shape=SHAPE, seed=9)
    shardwriter.write_npy_dataset(d, imgs, make_labels(N), CLASSES, SPEC3K)
    _needs_direct(d)
    with packer_reader.open(d, direct=True) as ds:
        got = np.concatenate([x.copy() for x, _ in ds.batches(13, shuffle=True, seed=3, prefetch=0)])
        assert np.array_equal(got, imgs[ds.order(shuffle=True, seed=3)])


@pytest.mark.parametrize("batch", [16, 64, 100])
def test_sequential_direct_batches_across_shards_are_o_direct(big_dir, monkeypatch, batch):
    # a batch of consecutive records that spans shards (40 records each) reads every shard's
    # part with O_DIRECT, not only the first one's (no CRC check: no checksum-block edges read)
    d, imgs = big_dir
    _needs_direct(d)
    with packer_reader.open(d, verify_crc=False, direct=True) as ds:
        seen = _watch_reads(monkeypatch)
        got = np.concatenate([x.copy() for x, _ in ds.batches(batch, prefetch=0)])
    assert np.array_equal(got, imgs)
    buffered = [n for direct, n in seen if not direct]
    assert seen and not buffered, "%d of %d reads went through the page cache (%d bytes)" % (
        len(buffered), len(seen), sum(buffered))


def test_direct_shuffled_in_forked_workers(big_dir):
    # the parent has used its read threads; DataLoader workers forked from it (threads are not
    # inherited) read with threads of their own
    from conftest import require_torch

    require_torch()
    import multiprocessing

    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    d, imgs = big_dir
    _needs_direct(d)
    with packer_reader.open(d, direct=True) as ds:
        for _ in ds.batches(32, shuffle=True, seed=8, prefetch=0):
            pass  # the parent's read pool is started
        want = np.concatenate([x.copy() for x, _ in ds.batches(16, shuffle=True, seed=8, epoch=0, prefetch=0)])
    pds = PackerIterableDataset(d, batch_size=16, shuffle=True, seed=8, direct=True)
    dl = DataLoader(pds, batch_size=None, num_workers=2, multiprocessing_context=multiprocessing.get_context("fork"),
                    timeout=60)
    got = np.concatenate([x.numpy() for x, _ in dl])
    assert np.array_equal(got, want)
