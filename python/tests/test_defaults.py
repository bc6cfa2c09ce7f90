"""The default batch path: prefetch=None (a thread only where the loop gives it work to overlap),
batch memory recycled across epochs, huge-page batch buffers."""

import gc
import threading
import time

import numpy as np
import pytest

import packer_reader
from packer_reader import _buffers, _dataset


def prefetch_threads():
    return sum(t.name == "packer_reader-prefetch" for t in threading.enumerate())


def test_bare_loop_reads_in_callers_thread(shards_dir, data, monkeypatch):
    imgs, labels = data[0], data[1]
    monkeypatch.setattr(_dataset, "_OVERLAP_MIN", 3600.0)  # no step ever long enough
    with packer_reader.open(shards_dir) as ds:
        xs, ys = [], []
        for x, y in ds.batches(16):
            assert prefetch_threads() == 0
            xs.append(x)
            ys.append(y)
        assert np.array_equal(np.concatenate(xs), imgs) and np.array_equal(np.concatenate(ys), labels)


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("copy", [True, False])
def test_slow_loop_switches_to_thread_same_batches(shards_dir, data, monkeypatch, shuffle, copy):
    monkeypatch.setattr(_dataset, "_OVERLAP_MIN", 0.0)  # every read and step counts as long
    with packer_reader.open(shards_dir) as ds:
        want = [(x.copy(), y.copy()) for x, y in ds.batches(9, shuffle=shuffle, seed=3, prefetch=0)]
        got, seen = [], []
        for x, y in ds.batches(9, shuffle=shuffle, seed=3, copy=copy):
            seen.append(prefetch_threads())
            got.append((x if copy else x.copy(), y if copy else y.copy()))
            time.sleep(0.001)
        # caller's thread for the first _OVERLAP_RUN batches, then the background thread
        assert seen[:_dataset._OVERLAP_RUN] == [0] * _dataset._OVERLAP_RUN
        assert any(seen[_dataset._OVERLAP_RUN:])  # (it ends once it has read the last batch)
        assert len(got) == len(want)
        for (a, b), (c, d) in zip(got, want):  # kept copy=True batches are all still intact
            assert np.array_equal(a, c) and np.array_equal(b, d)
    assert prefetch_threads() == 0


def test_pool_never_hands_out_memory_still_referenced(shards_dir, data, monkeypatch):
    monkeypatch.setattr(_buffers, "_HUGE_MIN", 0)  # every batch buffer from the huge-page path
    imgs = data[0]
    B = 10
    with packer_reader.open(shards_dir) as ds:
        kept = {}
        for epoch in range(3):  # the pool outlives each epoch
            for k, (x, _) in enumerate(ds.batches(B)):
                assert x.ctypes.data not in {v.ctypes.data for v in kept.values()}
                if k % 3 == epoch:  # keep some batches, drop the rest
                    kept[(epoch, k)] = x
                del x
                gc.collect()
        for (epoch, k), x in kept.items():  # none was overwritten by a later batch
            assert np.array_equal(x, imgs[k * B:(k + 1) * B])
        ptrs = set()
        for x, _ in ds.batches(B):  # each dropped at once: a few blocks reused
            ptrs.add(x.ctypes.data)
            del x
            gc.collect()
        assert len(ptrs) <= ds._pool.keep  # bounded by the blocks the pool keeps


def test_huge_buffers_hold_the_same_bytes(shards_dir, data, monkeypatch):
    monkeypatch.setattr(_buffers, "_HUGE_MIN", 0)
    imgs, labels = data[0], data[1]
    with packer_reader.open(shards_dir) as ds:
        for copy in (True, False):
            for pf in (None, 0, 2):
                xs, ys = [], []
                for x, y in ds.batches(16, shuffle=True, seed=1, copy=copy, prefetch=pf):
                    xs.append(x.copy())
                    ys.append(y.copy())
                want = list(ds.order(shuffle=True, seed=1))
                assert np.array_equal(np.concatenate(xs), imgs[want])
                assert np.array_equal(np.concatenate(ys), labels[want])


def test_empty_is_writable_and_sized():
    a = _buffers._empty(_buffers._HUGE_MIN + 12345)
    assert a.size == _buffers._HUGE_MIN + 12345 and a.flags.writeable and a.dtype == np.uint8
    assert a.ctypes.data % _buffers._HUGE == 0 or not hasattr(__import__("mmap"), "MADV_HUGEPAGE")
    a[:] = 7
    assert int(a[-1]) == 7
