"""Batch buffers: writable uint8 memory for batches, aligned for O_DIRECT, backed by huge pages
from a size on, and pooled so fresh batches reuse the memory of batches already dropped."""

import mmap
import threading

import numpy as np

from ._shard import ALIGN


_HUGE = 2 << 20  # x86-64 transparent huge page
_HUGE_MIN = 4 << 20  # buffers from this size on are asked to be backed by huge pages


def _empty(nbytes):
    """A writable uint8 array of nbytes. From _HUGE_MIN on, an anonymous mapping aligned to
    2 MiB and advised MADV_HUGEPAGE: reading a batch of large records from the page cache into
    it costs fewer TLB misses and page faults (a 38 MB batch of 224x224 records is read about a
    third faster than into malloc's 4 KiB pages). The mapping is unmapped when the last array
    viewing it is gone."""
    advise = getattr(mmap, "MADV_HUGEPAGE", None)
    if nbytes < _HUGE_MIN or advise is None:
        return np.empty(nbytes, dtype=np.uint8)
    m = mmap.mmap(-1, nbytes + _HUGE, flags=mmap.MAP_PRIVATE)  # anonymous, private: THP-able
    try:
        m.madvise(advise)
    except OSError:  # huge pages not offered by this kernel: plain pages, same bytes
        pass
    raw = np.frombuffer(m, dtype=np.uint8)
    off = (-raw.ctypes.data) % _HUGE
    return raw[off:off + nbytes]


def _aligned_empty(nbytes, alloc=None):
    raw = _empty(nbytes + ALIGN) if alloc is None else alloc(nbytes + ALIGN)
    if raw.dtype != np.uint8 or raw.ndim != 1 or raw.size < nbytes + ALIGN or not raw.flags.writeable:
        raise ValueError("alloc must return a writable 1-D uint8 array of at least %d bytes" % (nbytes + ALIGN))
    off = (-raw.ctypes.data) % ALIGN
    return raw[off:off + nbytes]


RECORD_ALIGN = 64  # alignment of a record read on its own: jax.device_put on the CPU aliases such memory


def _record_empty(nbytes):
    """A writable uint8 array of nbytes whose data is RECORD_ALIGN-aligned (a record read on its
    own: a bytearray is only 16-byte aligned, and jax.device_put on the CPU copies that)."""
    raw = np.empty(nbytes + RECORD_ALIGN, dtype=np.uint8)
    off = (-raw.ctypes.data) % RECORD_ALIGN
    return raw[off:off + nbytes]


class _Buf:
    """One reusable batch buffer: raw bytes (aligned, with slack for O_DIRECT) and labels."""

    def __init__(self, nbytes, batch_size, alloc=None, pool=None):
        self.raw = pool.alloc(nbytes) if pool is not None else _aligned_empty(nbytes, alloc)
        self.labels = np.empty(batch_size, dtype=np.int64)


class _Lease:
    """Hands a pooled block to NumPy (through the array interface); when the last array viewing
    it is gone, the block goes back to the pool. Fresh batches (copy=True) thus reuse memory that
    the caller has dropped, instead of faulting in new pages for every batch."""

    def __init__(self, entry, pool):
        self.entry = entry
        self.pool = pool
        self.__array_interface__ = entry[1]

    def __del__(self):
        self.pool.put(self.entry)


_POOL_LOCK = threading.Lock()


class _Pool:
    """Blocks whose last array is gone (returned by _Lease), handed out again by size. Each
    entry is (block, its array interface), the block aligned to ALIGN."""

    def __init__(self, keep):
        self.keep = keep
        self.free = []
        self.lock = threading.Lock()

    def alloc(self, nbytes):
        """A fresh array of nbytes (ALIGN-aligned) over a pooled block."""
        entry = None
        with self.lock:  # the most recently returned block of that size (likeliest in cache)
            for k in range(len(self.free) - 1, -1, -1):
                if self.free[k][0].size == nbytes:
                    entry = self.free.pop(k)
                    break
        if entry is None:
            block = _aligned_empty(nbytes)
            entry = (block, {"shape": block.shape, "typestr": "|u1", "version": 3,
                             "data": (block.ctypes.data, False)})
        return np.asarray(_Lease(entry, self))

    def put(self, entry):
        with self.lock:
            self.free.append(entry)
            if len(self.free) > self.keep:  # the oldest goes (its memory is unmapped or freed)
                del self.free[0]
