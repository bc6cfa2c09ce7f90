"""open(path, direct=True): shuffled batches are read with O_DIRECT, several reads in flight,
and give the same bytes as reads through the page cache, with the same CRC and file checks.
Reads straight into batch slots go through packer's C library (native asynchronous I/O, one
call per batch) where it is built, else through a thread pool: both paths are tested."""

import ctypes
import fcntl
import os
import shutil

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES, make_images, make_labels
from packer_reader import CorruptionError, FormatError, PackerError
from packer_reader import _buffers, _segment, _shards
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


def _aio_or_skip():
    """packer_pread_batch of packer's C library; scripts/test.sh (PACKER_REQUIRE_CRC_HW=1) builds
    the library, so there a missing function fails instead of testing the threads twice."""
    aio = _segment._aio_batch()
    if aio is None:
        if os.environ.get("PACKER_REQUIRE_CRC_HW") == "1":
            pytest.fail("packer's C library without packer_pread_batch (bash scripts/build-crc.sh)")
        pytest.skip("packer's C library with packer_pread_batch not built (scripts/build-crc.sh)")
    return aio


@pytest.fixture(params=["aio", "threads"])
def read_path(request, monkeypatch):
    """Which way aligned O_DIRECT reads go: the C library's one call per batch, or the threads."""
    if request.param == "threads":
        monkeypatch.setattr(_segment, "_AIO", None)
    else:
        _aio_or_skip()
    return request.param


def _all(ds, **kw):
    return [(x.copy(), y.copy()) for x, y in ds.batches(**kw)]


@pytest.mark.parametrize("crc", [True, False])
@pytest.mark.parametrize("batch,rank,world", [(1, 0, 1), (7, 0, 1), (32, 1, 2), (64, 2, 3), (256, 0, 1)])
def test_shuffled_direct_equals_page_cache(big_dir, read_path, crc, batch, rank, world):
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


def _is_direct(fd):
    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)


def _watch_reads(monkeypatch):
    """Every os.preadv, and every read handed to the C library's packer_pread_batch, from now
    on, as (descriptor opened with O_DIRECT, bytes asked)."""
    seen = []
    real = os.preadv

    def preadv(fd, bufs, offset, *a):
        seen.append((_is_direct(fd), sum(len(memoryview(b)) for b in bufs)))
        return real(fd, bufs, offset, *a)

    monkeypatch.setattr(os, "preadv", preadv)
    aio = _segment._aio_batch()
    if aio is not None:
        def batch(n, fds, offs, niov, iov, depth, status):
            fdl = list((ctypes.c_int32 * n).from_address(fds))
            nv = list((ctypes.c_int32 * n).from_address(niov))
            lens = list((ctypes.c_uint64 * (2 * sum(nv))).from_address(iov))[1::2]
            at = 0
            for fd, k in zip(fdl, nv):
                seen.append((_is_direct(fd), sum(lens[at:at + k])))
                at += k
            return aio(n, fds, offs, niov, iov, depth, status)

        monkeypatch.setattr(_segment, "_AIO", batch)
    return seen


@pytest.mark.parametrize("crc", [True, False])
def test_shuffled_direct_reads_are_o_direct(big_dir, read_path, monkeypatch, crc):
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
    # the reads of one batch are issued from several threads at once (the C library not used)
    import threading

    d, _ = big_dir
    _needs_direct(d)
    monkeypatch.setattr(_segment, "_AIO", None)
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


@pytest.mark.parametrize("many", [False, True])
def test_shuffled_direct_reads_in_flight_aio(big_dir, monkeypatch, many):
    # with the C library, a batch (of sector-sized records, its blocks checked) is one call that
    # keeps _DIRECT_DEPTH reads in flight; a dataset of many shards (no descriptor kept) too
    d, imgs = big_dir
    _needs_direct(d)
    if many:
        monkeypatch.setattr(_shards, "MAX_OPEN_SHARDS", 2)
    aio = _aio_or_skip()
    calls = []

    def batch(n, fds, offs, niov, iov, depth, status):
        calls.append((n, depth))
        return aio(n, fds, offs, niov, iov, depth, status)

    monkeypatch.setattr(_segment, "_AIO", batch)
    with packer_reader.open(d, direct=True, verify_crc=False) as ds:
        assert all(seg.fd < 0 for seg in ds._segs) == many
        nfd = len(os.listdir("/proc/self/fd"))
        got = np.concatenate([x.copy() for x, _ in ds.batches(64, shuffle=True, seed=2, prefetch=0)])
        assert np.array_equal(got, imgs[ds.order(shuffle=True, seed=2)])
        if many:  # the descriptors opened for a batch were closed after it
            assert not ds._dfds and len(os.listdir("/proc/self/fd")) == nfd
    if imgs[0].nbytes % 512:
        assert not calls  # records off the sector alignment: through the threads' scratch
    else:
        assert len(calls) == -(-N // 64) and all(n > 1 and depth == _segment._DIRECT_DEPTH for n, depth in calls)


def test_pread_batch(tmp_path):
    # the C function itself: scattered buffers, a read past the end (short), a bad descriptor;
    # the failed jobs are reported, the others read
    aio = _aio_or_skip()
    p = str(tmp_path / "f")
    data = np.random.default_rng(3).integers(0, 256, 64 << 10, dtype=np.uint8)
    data.tofile(p)
    fd = open_direct(p)
    if fd is None:
        pytest.skip("O_DIRECT not offered by the file system of %s" % p)
    try:
        buf = _buffers._aligned_empty(8 << 12)
        buf[:] = 0
        base = buf.ctypes.data
        fds = np.array([fd, fd, -1, fd], dtype=np.int32)
        offs = np.array([4096, 60 << 10, 0, 0], dtype=np.int64)
        niov = np.array([2, 1, 1, 1], dtype=np.int32)
        iov = np.array([[base + 4096, 4096], [base, 4096],  # job 0: file [4096, 12288) into slots 1, 0
                        [base + 2 * 4096, 8192],  # job 1: 8192 bytes from 60 KiB: 4096 short
                        [base + 4 * 4096, 4096],  # job 2: no descriptor
                        [base + 5 * 4096, 512]], dtype=np.uint64)  # job 3: file [0, 512)
        status = np.full(4, 7, dtype=np.int8)
        for depth in (1, 2, 8):
            assert aio(4, fds.ctypes.data, offs.ctypes.data, niov.ctypes.data, iov.ctypes.data, depth,
                       status.ctypes.data) == 2
            assert status.tolist() == [0, 1, 1, 0]
            assert np.array_equal(buf[4096:8192], data[4096:8192])
            assert np.array_equal(buf[:4096], data[8192:12288])
            assert np.array_equal(buf[5 * 4096:5 * 4096 + 512], data[:512])
            assert not buf[4 * 4096:5 * 4096].any()
    finally:
        os.close(fd)


def test_truncated_while_reading_direct_shuffled(tmp_path, read_path):
    # a shard cut short after the dataset opened it: the reads past its new end come back short
    # and are read again through the page cache, which names the file
    d = str(tmp_path / "d")
    _write(d, shape=SHAPE_SECTORS)
    _needs_direct(d)
    with packer_reader.open(d, direct=True, verify_crc=False) as ds:
        it = ds.batches(64, shuffle=True, seed=1, prefetch=0)
        next(it)  # the O_DIRECT descriptors are open
        sp = os.path.join(d, "shard-00003.pks")
        off, _ = ds._segs[3].range_span(1, 1)
        os.truncate(sp, off)
        with pytest.raises(FormatError) as ei:
            for _ in it:
                pass
    # the short read itself is reported (not only the file's changed size, found after the reads)
    assert "shard-00003.pks" in str(ei.value) and "file ends at" in str(ei.value), ei.value


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
