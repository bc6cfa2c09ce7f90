"""Datasets over packer output directories (shards, npy, hdf5) and their batch iterators."""

import bisect
import concurrent.futures
import contextlib
import errno
import hashlib
import io
import json
import mmap
import operator
import os
import queue
import re
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from . import _crc32c, _order, _s3
from ._errors import FormatError, PackerError
from ._io import open_direct, open_ro, pread_into, preadv_into
from ._shard import check_unchanged, ALIGN, ShardFile, align_up, parse_sample_spec, take_tail
from ._verify import _h5_json_attr, dataset_meta_diff

MANIFEST = "manifest.json"
# Datasets with more shards than this keep no descriptor open between reads (each read opens,
# checks the file identity, reads and closes), so huge datasets stay within RLIMIT_NOFILE.
MAX_OPEN_SHARDS = 256
MAX_MANIFEST = 1 << 30
FORMATS = ("shards", "npy", "hdf5")


_warned_slow_crc = False

# Overlapping a batch's CRC check with its read: a big batch of a local shard is read in pieces
# of about _CHECK_PIECE bytes of whole checksum blocks, and each piece is checked on one checker
# thread while the caller reads the next (packer's ctypes CRC releases the GIL, so the two run
# on two cores). The batch is handed out only after every piece's check has passed.
_CHECK_PIECE = 4 << 20  # measured on 224x224x3 batches: 1-8 MiB all help; 4 MiB best here
_CHECKER = None
_CHECKER_LOCK = threading.Lock()


# Shuffled (and other index) batches of a dataset opened with direct=True: each run of
# neighbouring records, or each checksum block not yet checked, is one O_DIRECT read into a
# thread's aligned scratch buffer, _DIRECT_DEPTH of them in flight on a small thread pool
# (os.preadv releases the GIL), and is copied into its batch slots from there.
_DIRECT_DEPTH = 8
_DIRECT_RUN_MAX = 4 << 20  # bytes of one read of neighbouring records
_DIRECT_POOL = None
_DIO_ALIGN = [512]  # offset and length alignment of O_DIRECT reads; 4096 where 512 is refused


def _reset_checker():  # a forked child (a DataLoader worker) inherits the executor, not its thread
    global _CHECKER, _CHECKER_LOCK, _DIRECT_POOL
    _CHECKER, _CHECKER_LOCK = None, threading.Lock()
    _DIRECT_POOL = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_checker)


def _checker():
    global _CHECKER
    with _CHECKER_LOCK:
        if _CHECKER is None:
            _CHECKER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="packer_reader-crc")
        return _CHECKER


def _direct_pool():
    global _DIRECT_POOL
    with _CHECKER_LOCK:
        if _DIRECT_POOL is None:
            _DIRECT_POOL = concurrent.futures.ThreadPoolExecutor(_DIRECT_DEPTH, thread_name_prefix="packer_reader-direct")
        return _DIRECT_POOL


_DSCRATCH = threading.local()


def _direct_scratch(n):
    """n bytes of this thread's reusable ALIGN-aligned scratch buffer (O_DIRECT reads land there)."""
    buf = getattr(_DSCRATCH, "buf", None)
    if buf is None or buf.size < n:
        buf = _DSCRATCH.buf = _aligned_empty(max(n, 1 << 20))
    return buf[:n]


def _pread_direct(fd, off, ln):
    """Read file bytes [off, off+ln) through the O_DIRECT descriptor fd, widened to the sector
    alignment, into this thread's scratch; return a memoryview of exactly those bytes, or None
    where the read is refused or short (the caller reads them through the page cache)."""
    while True:
        al = _DIO_ALIGN[0]
        a = off - off % al
        end = off + ln
        end += -end % al
        buf = memoryview(_direct_scratch(end - a))
        got = 0
        try:
            while got < off + ln - a:
                k = os.preadv(fd, [buf[got:]], a + got)
                if k <= 0:
                    return None
                got += k
        except OSError as e:
            if e.errno == errno.EINVAL and al < ALIGN:  # a device with 4 KiB sectors
                _DIO_ALIGN[0] = ALIGN
                continue
            return None
        return buf[off - a:off - a + ln]


def _wait_checks(pending):
    """Wait for every check handed to the checker thread (none may still read the buffer);
    raise the first one's error, as the checks done in order would have."""
    concurrent.futures.wait(pending)
    for f in pending:
        f.result()


def _warn_if_slow_crc():
    """Record CRCs are checked by default whatever the CRC backend; on the NumPy fallback that
    costs real time, so say once per process how to get the fast one or how to opt out."""
    global _warned_slow_crc
    if _crc32c.BACKEND == "numpy" and not _warned_slow_crc:
        _warned_slow_crc = True
        warnings.warn("packer_reader: record CRC-32C checks run on the slow NumPy fallback (a few hundred "
                      "MiB/s, below disk speed); install the packer wheel (it carries a hardware CRC-32C), "
                      "build it in a source tree with scripts/build-crc.sh, or install python3-crc32c (apt) "
                      "or 'pip install crc32c', or open the dataset with verify_crc=False to skip the checks",
                      RuntimeWarning, stacklevel=4)


# -- manifest -------------------------------------------------------------------------------

# The manifest's last member is its own checksum (shard/FORMAT.md, "Dataset"): the file ends with
# _SUM_OPEN + 64 lower-case hex digits + _SUM_CLOSE, the SHA-256 of the file with that member
# replaced by "\n}\n". Checked on the bytes, so no JSON re-encoding is involved.
_SUM_OPEN = b',\n  "manifest_sha256": "'
_SUM_CLOSE = b'"\n}\n'
_HEX = frozenset(b"0123456789abcdef")


def _check_seal(path, raw):
    n = len(_SUM_OPEN) + 64 + len(_SUM_CLOSE)
    tail = raw[-n:]
    if len(raw) < n or not tail.startswith(_SUM_OPEN) or not tail.endswith(_SUM_CLOSE):
        raise FormatError(path, "has no manifest_sha256: written by packer < 0.2 or edited; rebuild")
    want = tail[len(_SUM_OPEN):len(_SUM_OPEN) + 64]
    got = hashlib.sha256(raw[:-n] + b"\n}\n").hexdigest().encode()
    if not set(want) <= _HEX or want != got:
        raise FormatError(path, "checksum mismatch: the manifest was edited or damaged")

# A replacing build to a bucket (packer build -o s3://... --force) writes its files under a
# generation sub-prefix, and its manifest names them so: ".packer-gen-<16 hex>/shard-00000.pks".
_GENERATION = re.compile(r"^\.packer-gen-[0-9a-fA-F]{16}$")


_HEX64 = re.compile(r"[0-9a-f]{64}")


def valid_file_path(p):
    """A manifest file path: one name (no '.', '..', backslash), or one name under a generation
    sub-prefix .packer-gen-<16 hex digits>/. Nothing else (absolute paths, other folders)."""
    if not isinstance(p, str) or not p or "\\" in p or "\x00" in p:
        return False
    parts = p.split("/")
    if len(parts) == 2 and _GENERATION.match(parts[0]):
        parts = parts[1:]
    return len(parts) == 1 and parts[0] not in ("", ".", "..")


def load_manifest(directory, store=None):
    """Read and sanity-check directory/manifest.json (or the manifest.json of a bucket's prefix,
    through store); return the dict. A manifest whose manifest_sha256 is missing or does not
    match its bytes is refused (FormatError)."""
    if store is None and _s3.is_url(str(directory)):
        store = _s3.S3Store(str(directory))
        try:
            return load_manifest(directory, store)
        finally:
            store.close()
    if store is not None:
        path = store.object_url(MANIFEST)
        raw = store.get_small(MANIFEST, MAX_MANIFEST)
    else:
        path = os.path.join(str(directory), MANIFEST)
        try:
            size = os.stat(path).st_size
        except OSError as e:
            raise FormatError(path, "cannot open manifest: %s" % e.strerror)
        if size > MAX_MANIFEST:
            raise FormatError(path, "manifest larger than %d bytes" % MAX_MANIFEST)
        with open(path, "rb") as f:
            raw = f.read()
    _check_seal(path, raw)
    try:
        m = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise FormatError(path, "invalid manifest JSON: %s" % e)
    if not isinstance(m, dict):
        raise FormatError(path, "manifest is not a JSON object")
    if m.get("format") not in FORMATS:
        raise FormatError(path, "unknown format %r" % (m.get("format"),))
    count = m.get("count")
    if not isinstance(count, int) or count < 0:
        raise FormatError(path, "invalid count %r" % (count,))
    parse_sample_spec(m.get("sample"), path)
    classes = m.get("classes") or []
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise FormatError(path, "classes must be a list of names")
    cc = m.get("class_counts") or []
    if not isinstance(cc, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in cc):
        raise FormatError(path, "class_counts must be a list of integers")
    files = m.get("files") or []
    if not isinstance(files, list):
        raise FormatError(path, "files is not a list")
    for fe in files:
        p = fe.get("path") if isinstance(fe, dict) else None
        if not valid_file_path(p):
            raise FormatError(path, "file path %r is not a local relative path (a name, or a name under "
                              ".packer-gen-<16 hex digits>/)" % (p,))
        if not isinstance(fe.get("size", 0), int) or fe.get("size", 0) < 0:
            raise FormatError(path, "file %s: invalid size" % p)
        pin = fe.get("index_sha256")
        if pin is not None and not (isinstance(pin, str) and _HEX64.fullmatch(pin)):
            raise FormatError(path, "file %s: index_sha256 %r is not 64 lower-case hex digits" % (p, pin))
    label = m.get("label") or {}
    aux = (label.get("aux") or []) if isinstance(label, dict) else []
    if not isinstance(aux, list) or not all(isinstance(a, str) and a and "/" not in a for a in aux):
        raise FormatError(path, "label.aux must be a list of column names")
    return m


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


_END = object()
# prefetch=None (the default): a background thread is started once both reading a batch and the
# loop's own step between two batches took longer than _OVERLAP_MIN seconds, _OVERLAP_RUN
# batches in a row (a thread's two hand-offs per batch cost tens of microseconds).
_OVERLAP_MIN = 100e-6
_OVERLAP_RUN = 3


class _Failure:
    def __init__(self, exc):
        self.exc = exc


def _check_order_version(v):
    if v not in (1, 2):
        raise ValueError("order_version=%r: the reading orders are 1 and 2 (shard/ORDER.md)" % (v,))


def _alias(value, alias, default, name, alias_name):
    """The value of a keyword that also goes by the Go API's name (``world`` for ``world_size``,
    ``buffer`` for ``buffer_size``): either one, not two different values."""
    if alias is None:
        return value
    if value != default and value != alias:
        raise TypeError("%s=%r and %s=%r given: they are the same setting, pass one"
                        % (name, value, alias_name, alias))
    return alias


# -- base class -----------------------------------------------------------------------------

class Dataset:
    """A packed dataset. ``len(ds)``, ``ds[i] -> (image, label)``; see the package docs.

    Attributes: ``path``, ``format`` ("shards", "npy" or "hdf5"), ``manifest`` (dict),
    ``classes`` (list of names indexed by label), ``class_counts``, ``sample_spec`` (dict with
    shape, dtype, layout), ``shape`` (tuple), ``dtype`` (numpy dtype), ``record_size`` (bytes, or
    None for variable-size records), ``labels`` (int64 array of every label), ``aux_names``.

    A Dataset may be read from several threads; a batch iterator must be used by one thread."""

    format = None

    def __init__(self, path, manifest, verify_crc=True, direct=False, store=None):
        self.path = str(path)
        self._store = store  # _s3.S3Store of a dataset in a bucket, else None
        if store is not None:
            direct = False  # O_DIRECT is a local file's
        self.manifest = manifest or {}
        m = self.manifest
        self.classes = list(m.get("classes") or [])
        self.class_counts = list(m.get("class_counts") or [])
        self.verify_crc = bool(verify_crc)
        self.direct = bool(direct)
        self._closed = False

    def _init_spec(self, spec, where):
        self.sample_spec = dict(spec)
        self.shape, self.dtype, self.record_size = parse_sample_spec(spec, where)
        self.fixed = self.record_size is not None

    # -- random access -----------------------------------------------------------------
    def __len__(self):
        return self.count

    def _index(self, i):
        # Integers only, as NumPy indexes: int(1.5) or int("1") would serve another record.
        if isinstance(i, (bool, np.bool_)) or not hasattr(i, "__index__"):
            raise TypeError("record index %r is not an integer" % (i,))
        i = operator.index(i)
        if i < 0:
            i += self.count
        if not 0 <= i < self.count:
            raise IndexError("record %d out of range [0, %d)" % (i, self.count))
        return i

    def __getitem__(self, i):
        """``ds[i] -> (image, label)``; ``ds[a:b]`` or ``ds[[i, j, ...]]`` -> ``(images [n, ...],
        labels [n])`` in fresh arrays (a slice with step 1 is one contiguous read)."""
        if isinstance(i, slice) or (not isinstance(i, (int, np.integer, str, bytes)) and np.ndim(i) == 1):
            return self._read_many(i)
        i = self._index(i)
        return self._read_one(i), int(self.labels[i])

    def _read_many(self, key):
        if isinstance(key, slice):
            a, b, step = key.indices(self.count)
            idx = np.arange(a, b, step, dtype=np.int64)
            contiguous = step == 1
        else:
            idx = np.asarray(key)
            if idx.dtype == np.bool_:
                # A boolean array is a mask over the records, as NumPy reads it.
                if idx.shape != (self.count,):
                    raise IndexError("boolean mask of %d entries for %d records" % (idx.size, self.count))
                idx = np.flatnonzero(idx)
            elif idx.size == 0:
                idx = np.zeros(0, np.int64)
            elif idx.dtype.kind not in "iu":
                raise TypeError("record indices of type %s are not integers" % idx.dtype)
            elif idx.dtype.kind == "u" and idx.max() >= self.count:
                raise IndexError("record index %d out of range [0, %d)" % (idx.max(), self.count))
            idx = idx.astype(np.int64)
            idx = np.where(idx < 0, idx + self.count, idx)
            if idx.size and (idx.min() < 0 or idx.max() >= self.count):
                raise IndexError("record index out of range [0, %d)" % self.count)
            contiguous = False
        labels = self.labels[idx]
        if not self.fixed:
            return [self._read_one(int(j)) for j in idx], labels
        n = idx.size
        raw = _aligned_empty(n * self.record_size + 2 * ALIGN)
        if contiguous and n:
            images = self._fill_range(int(idx[0]), n, raw)
        else:
            images = raw[:n * self.record_size].view(self.dtype).reshape((n,) + self.shape)
            if n:
                self._fill_indices(idx, images)
        return images, labels

    def __iter__(self):
        for i in range(self.count):
            yield self[i]

    def image(self, i):
        return self._read_one(self._index(i))

    def label(self, i):
        return int(self.labels[self._index(i)])

    def aux(self, i):
        """Auxiliary integer labels of record i as a dict {name: int} (empty when none)."""
        i = self._index(i)
        return {name: int(self._aux[i, k]) for k, name in enumerate(self.aux_names)}

    def meta(self, i):
        """Per-record metadata (a dict, e.g. clip info for videos), or None when absent."""
        return self._meta(self._index(i))

    def _meta(self, i):
        return None

    def close(self):
        self._closed = True
        store, self._store = getattr(self, "_store", None), None
        if store is not None:
            store.close()
        self.__dict__.pop("_pool", None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<packer_reader %s dataset %s: %d records of %s %s>" % (
            self.format, self.path, self.count, self.dtype.name, list(self.shape))

    # -- order ---------------------------------------------------------------------------
    def _shard_layout(self):
        """(counts, firsts) of the units that ORDER.md shuffles: shards, or one unit."""
        return [self.count], [0]

    def order(self, shuffle=False, seed=0, epoch=0, rank=0, world_size=1, buffer_size=4096, world=None,
              buffer=None, order_version=2, batch_size=None, drop_last=False, start=0):
        """Every record index this rank reads in the epoch, in ORDER.md order (int64 array).

        ``order_version=2`` (the default): ORDER.md version 2, where ranks split global batches,
        so ``batch_size`` is needed when ``world_size > 1``; ``start`` is the global position
        (``state_dict()["position"]``) and the result includes the padding of the last batch
        (without ``drop_last``). ``order_version=1``: version 1 (shard shuffle and
        ``buffer_size`` shuffle buffer, a contiguous slice per rank). ``world``/``buffer`` are
        the Go reader's names for ``world_size``/``buffer_size``."""
        world_size = _alias(world_size, world, 1, "world_size", "world")
        buffer_size = _alias(buffer_size, buffer, 4096, "buffer_size", "buffer")
        if order_version == 1:
            counts, firsts = self._shard_layout()
            return _order.order_indices(counts, firsts, shuffle, seed, epoch, rank, world_size, buffer_size)
        _check_order_version(order_version)
        if batch_size is None:
            if world_size != 1:
                raise ValueError("order(order_version=2, world_size=%d) needs batch_size: ranks split "
                                 "global batches" % world_size)
            batch_size = max(1, self.count)
        return _order.order_indices_v2(self.count, batch_size, shuffle, seed, epoch, rank, world_size,
                                       drop_last, min(int(start), self.count))

    # -- batches -------------------------------------------------------------------------
    def batches(self, batch_size, shuffle=False, seed=0, epoch=0, rank=0, world_size=1,
                drop_last=False, buffer_size=4096, start=0, copy=True, prefetch=None, alloc=None,
                world=None, buffer=None, order_version=2, worker=0, num_workers=1):
        """Yield ``(images, labels)``: arrays ``[B, *shape]`` and ``[B]`` int64, in ORDER.md order.

        ``order_version=2`` (the default): a keyed permutation of all records when
        ``shuffle``; every rank yields the same number of batches (the last, partial global
        batch padded by repeating records, or dropped with ``drop_last``); ``start`` is the
        global position to resume from (``state_dict()["position"]``: records of the epoch
        consumed by all ranks together); ``worker``/``num_workers`` give this reader every
        ``num_workers``-th of the rank's batches, from batch ``worker`` (a batch never depends
        on the worker count). ``order_version=1``: ORDER.md version 1 (shard shuffle plus a
        ``buffer_size`` shuffle buffer; ``start`` is this rank's own position, records already
        consumed by it; combine workers into ``rank``/``world_size``).

        ``world`` and ``buffer`` are accepted as the Go reader's names
        (``LoaderOptions.World``/``Buffer``) for ``world_size``/``buffer_size``.

        Every yielded batch is a fresh array that stays valid for as long as it is kept (the
        default, ``copy=True``; records are read straight into it, and memory of batches already
        dropped is recycled, so this costs no extra copy). ``copy=False`` is the fast path for
        loops that finish with a batch before asking for the next: the arrays are then views of
        a few reusable buffers, overwritten by later batches (keep one with ``.copy()``).
        ``prefetch`` batches are read ahead by a background thread (0: read in the caller's
        thread). The default, ``None``, reads in the caller's thread while the loop gives a
        thread nothing to overlap (a bare pass, or batches read in well under a millisecond),
        and reads one batch ahead on a background thread from the third batch in a row where both
        the read and the loop's own step took over 0.1 ms. Variable-size datasets yield a list of arrays instead of one ``[B, ...]``
        array.

        ``alloc(nbytes)``, when given, provides the memory of every image buffer: it must return a
        writable 1-D uint8 array of at least nbytes (for example the ``.numpy()`` of a pinned or
        shared-memory torch tensor), and records are read straight into it."""
        world_size = _alias(world_size, world, 1, "world_size", "world")
        buffer_size = _alias(buffer_size, buffer, 4096, "buffer_size", "buffer")
        B = int(batch_size)
        if B < 1:
            raise ValueError("batch_size must be >= 1")
        start = int(start)
        if start < 0:
            raise ValueError("start must be >= 0")
        worker, num_workers = int(worker), int(num_workers)
        if num_workers < 1 or not 0 <= worker < num_workers:
            raise ValueError("need num_workers >= 1 and 0 <= worker < num_workers, got worker=%r num_workers=%r"
                             % (worker, num_workers))
        if order_version == 1:
            if num_workers != 1:
                raise ValueError("order_version=1 splits records, not batches, among workers: combine the "
                                 "worker into rank and world_size (ORDER.md version 1)")
            plan = self._plan(B, shuffle, seed, epoch, rank, world_size, drop_last, buffer_size, start)
        else:
            _check_order_version(order_version)
            plan = self._plan_v2(B, shuffle, seed, epoch, rank, world_size, drop_last, start, worker, num_workers)
        if not self.fixed:
            return self._var_batches(plan, copy)
        return self._fixed_batches(plan, B, copy, prefetch, alloc)

    def _plan_v2(self, B, shuffle, seed, epoch, rank, world, drop_last, start, worker=0, num_workers=1):
        """ORDER.md v2: list of this rank's batches worker, worker+num_workers, ..., each
        ("range", first, n) or ("idx", array)."""
        plan = _order.Plan(self.count, min(start, self.count), B, rank, world, drop_last)
        perm = _order.Permutation(self.count, seed, epoch) if shuffle else None
        items = []
        for j in range(worker, plan.batches(), num_workers):
            q = plan.batch_positions(j)
            if not shuffle and q.size and q[-1] < self.count:
                items.append(("range", int(q[0]), int(q.size)))
            else:
                # "spread": drawn from the whole dataset (a bucket dataset may read it sparsely)
                items.append(("idx", _order.v2_batch_indices(plan, perm, shuffle, j), shuffle))
        return items

    def _plan(self, B, shuffle, seed, epoch, rank, world, drop_last, buffer_size, start):
        """ORDER.md v1: list of batches, each ("range", first, n) or ("idx", int64 array)."""
        counts, firsts = self._shard_layout()
        if shuffle:
            idx = _order.order_indices(counts, firsts, True, seed, epoch, rank, world, buffer_size)[start:]
            items = [("idx", idx[p:p + B]) for p in range(0, idx.size, B)]
        else:
            lo, hi = _order.rank_bounds(self.count, rank, world)
            lo = min(hi, lo + start)
            items = [("range", p, min(B, hi - p)) for p in range(lo, hi, B)]
        if drop_last and items:
            last = items[-1]
            n = last[2] if last[0] == "range" else last[1].size
            if n < B:
                items.pop()
        return items

    def _var_batches(self, plan, copy):
        for item in plan:
            idx = range(item[1], item[1] + item[2]) if item[0] == "range" else item[1].tolist()
            imgs = [self._read_one(i) for i in idx]
            labels = self.labels[np.asarray(list(idx), dtype=np.int64)]
            yield imgs, labels

    def _fixed_batches(self, plan, B, copy, prefetch, alloc=None):
        auto = prefetch is None
        depth = 1 if auto else max(0, int(prefetch))
        nbytes = B * self.record_size + 2 * ALIGN
        nbuf = depth + 1
        if copy and alloc is None:
            # One pool per dataset, kept across epochs: the next epoch's batches land in memory
            # already faulted in (and backed by huge pages where the kernel gave them).
            with _POOL_LOCK:
                pool = self.__dict__.get("_pool")
                if pool is None:
                    pool = self._pool = _Pool(nbuf + 2)
                pool.keep = max(pool.keep, nbuf + 2)
        else:
            pool = None

        def fill(item, buf):
            if copy:  # a fresh buffer per batch: read straight into it, no second copy
                buf = _Buf(nbytes, B, alloc, pool)
            if item[0] == "range":
                _, first, n = item
                images = self._fill_range(first, n, buf.raw)
                np.copyto(buf.labels[:n], self.labels[first:first + n])
            else:
                idx = item[1]
                n = idx.size
                images = buf.raw[:n * self.record_size].view(self.dtype).reshape((n,) + self.shape)
                self._fill_indices(idx, images, spread=len(item) > 2 and item[2])
                np.take(self.labels, idx, out=buf.labels[:n])
            return images, buf.labels[:n]

        pos = 0
        if depth == 0 or auto:
            # In the caller's thread. With prefetch=None (auto) only until the loop shows work of
            # its own to overlap: a background thread pays two hand-offs per batch (a queue and
            # the GIL, tens of microseconds), a loss where reading a batch or the loop's step is
            # shorter than that; it is started for the rest of the plan once both the read and
            # the step between two batches took over _OVERLAP_MIN, _OVERLAP_RUN times in a row.
            buf = _Buf(nbytes, B, alloc) if not copy else None
            run = 0
            clock = time.perf_counter
            while pos < len(plan):
                t0 = clock()
                out = fill(plan[pos], buf)
                t1 = clock()
                pos += 1
                yield out
                if auto:
                    t2 = clock()
                    run = run + 1 if min(t1 - t0, t2 - t1) > _OVERLAP_MIN else 0
                    if run >= _OVERLAP_RUN:
                        break
            if pos >= len(plan):
                return
        yield from self._prefetched(plan[pos:], fill, nbuf, nbytes, B, copy, alloc)

    def _prefetched(self, plan, fill, nbuf, nbytes, B, copy, alloc):
        """Batches of plan read ahead by a background thread into a ring of nbuf buffers."""
        free = queue.Queue()
        full = queue.Queue()
        for _ in range(nbuf):
            free.put(_Buf(nbytes, B, alloc) if not copy else _Buf(0, 0))
        stop = threading.Event()

        def producer():
            try:
                for item in plan:
                    buf = free.get()
                    if stop.is_set() or buf is None:
                        return
                    full.put((buf, fill(item, buf)))
                full.put(_END)
            except BaseException as e:  # handed to the consumer
                full.put(_Failure(e))

        t = threading.Thread(target=producer, name="packer_reader-prefetch", daemon=True)
        t.start()
        try:
            while True:
                x = full.get()
                if x is _END:
                    return
                if isinstance(x, _Failure):
                    raise x.exc
                buf, out = x
                yield out
                free.put(buf)
        finally:
            stop.set()
            free.put(None)
            t.join()

    # -- backend hooks -------------------------------------------------------------------
    def _read_one(self, i):
        raise NotImplementedError

    def _fill_range(self, first, n, raw):
        raise NotImplementedError

    def _fill_indices(self, idx, images, spread=False):
        raise NotImplementedError


# -- fixed-size byte segments (shards and npy) ----------------------------------------------

class _SegmentDataset(Dataset):
    """Records stored as byte ranges of one or more files (shards, or images.npy)."""

    def _setup_segments(self, segs):
        self._segs = segs
        self._firsts = [s.first for s in segs]
        self._dfds = {}
        self._dlock = threading.Lock()

    def _locate(self, i):
        s = bisect.bisect_right(self._firsts, i) - 1
        return s, i - self._firsts[s]

    def _shard_layout(self):
        return [s.n for s in self._segs], list(self._firsts)

    def _prefetch(self, sidx):
        """Start the GETs of every chunk the records sidx (sorted) of bucket objects touch, all at
        once (in parallel, adjacent chunks in one GET), before the records are copied out."""
        segs = np.searchsorted(np.asarray(self._firsts, dtype=np.int64), sidx, side="right") - 1
        for s in np.unique(segs).tolist():
            seg = self._segs[s]
            if not getattr(seg, "remote", False):
                continue
            li = sidx[segs == s] - self._firsts[s]
            off0, _ = seg.range_span(0, 0)
            rs = self.record_size
            seg.fd.prefetch([(off0 + int(i) * rs, rs) for i in li])

    def _sparse_remote(self, sidx):
        """True when the records sidx (sorted) of a bucket dataset are better read with a ranged
        GET each than through the chunk cache: the dataset does not fit the cache (reading
        order 2 draws from all of it, so chunks are not read again before they are evicted) and
        the chunks these records would fetch hold over 8 times their bytes."""
        store = self._store
        if not all(getattr(seg, "remote", False) and hasattr(seg, "block_bounds") for seg in self._segs):
            return False
        if self.count * self.record_size <= _s3.CACHE_BYTES // 2:
            return False
        chunk = store.chunk
        segs = np.searchsorted(np.asarray(self._firsts, dtype=np.int64), sidx, side="right") - 1
        missing = 0
        with store._lock:
            for s in np.unique(segs).tolist():
                seg = self._segs[s]
                off0, _ = seg.range_span(0, 0)
                offs = off0 + (sidx[segs == s] - self._firsts[s]) * self.record_size
                for c in np.unique(offs // chunk).tolist():
                    k = (seg.fd.key, seg.fd.etag, c)
                    if k not in store._chunks and k not in store._inflight:
                        missing += 1
        return missing * chunk > 8 * sidx.size * self.record_size

    def _fill_remote_sparse(self, sidx, order, out):
        """Read the records sidx (sorted; record sidx[t] goes to slot order[t] of out) of a bucket
        dataset with exact ranged GETs, in parallel: one per run of neighbouring records, or,
        with CRC checks on, one per checksum block not yet checked (the block is checked from
        those bytes and the records are taken out of them)."""
        store, rs = self._store, self.record_size
        firsts = np.asarray(self._firsts, dtype=np.int64)
        segs = (np.searchsorted(firsts, sidx, side="right") - 1).tolist()
        sl = sidx.tolist()
        ol = order.tolist()
        jobs = {}  # (seg, lo, hi, block or None) -> [(local record, slot)]
        t = 0
        while t < len(sl):
            s = segs[t]
            seg = self._segs[s]
            li = sl[t] - self._firsts[s]
            j = li // seg.block_records
            if self.verify_crc and not seg._verified[j]:
                lo, hi = seg.block_bounds(j)
                key = (s, lo, hi, j)
                u = t
                while u < len(sl) and segs[u] == s and lo <= sl[u] - self._firsts[s] < hi:
                    u += 1
            else:
                u = t + 1
                while u < len(sl) and segs[u] == s and sl[u] == sl[u - 1] + 1:
                    u += 1
                key = (s, li, li + (u - t), None)
            jobs.setdefault(key, []).extend((sl[v] - self._firsts[s], ol[v]) for v in range(t, u))
            t = u

        def get(key):
            s, lo, hi, _ = key
            seg = self._segs[s]
            off, ln = seg.range_span(lo, hi)
            return store._get_range(seg.fd, off, off + ln)

        pool = store._executor()
        futs = {key: pool.submit(get, key) for key in jobs}
        for key, recs in jobs.items():
            s, lo, hi, j = key
            data = memoryview(futs[key].result())
            if j is not None:
                self._segs[s].check_block(j, data)
            for li, slot in recs:
                a = (li - lo) * rs
                out[slot * rs:(slot + 1) * rs] = data[a:a + rs]

    @contextlib.contextmanager
    def _direct_fd(self, s):
        """Segment s's O_DIRECT descriptor (kept, or opened for this read and closed after it),
        checked to be the file the dataset opened; None where O_DIRECT is refused."""
        seg = self._segs[s]
        if seg.remote:
            yield None
            return
        if seg.fd >= 0:
            fd = self._dfds.get(s)
            if fd is not None:
                yield fd if fd >= 0 else None
                return
            with self._dlock:
                fd = self._dfds.get(s)
                if fd is None:
                    fd = open_direct(seg.file_path)
                    fd = -1 if fd is None else self._same_file(seg, fd)
                    self._dfds[s] = fd
            yield fd if fd >= 0 else None
            return
        fd = open_direct(seg.file_path)
        if fd is None:
            yield None
            return
        self._same_file(seg, fd)
        try:
            yield fd
        finally:
            os.close(fd)

    def _fill_direct(self, sidx, order, out):
        """Read the records sidx (sorted; record sidx[t] goes to slot order[t] of out) of local
        segments with O_DIRECT, _DIRECT_DEPTH reads in flight: one read per run of neighbouring
        records, or, with CRC checks on, one per checksum block not yet checked (the whole block,
        checked from those bytes before any of its records is copied out). Every read is waited
        for before the first error is raised, so nothing is handed out from a failed batch."""
        rs = self.record_size
        firsts = np.asarray(self._firsts, dtype=np.int64)
        segs = (np.searchsorted(firsts, sidx, side="right") - 1).tolist()
        sl = sidx.tolist()
        ol = order.tolist()
        maxrun = max(1, _DIRECT_RUN_MAX // rs)
        jobs = []
        t = 0
        while t < len(sl):
            s = segs[t]
            seg = self._segs[s]
            f0 = self._firsts[s]
            ver = getattr(seg, "_verified", None) if self.verify_crc else None
            k = seg.block_records if ver is not None else 0
            li = sl[t] - f0
            if ver is not None and not ver[li // k]:
                j = li // k
                lo, hi = seg.block_bounds(j)
                u = t
                while u < len(sl) and segs[u] == s and sl[u] - f0 < hi:
                    u += 1
                key = (s, lo, hi, j)
            else:
                u = t + 1
                while (u < len(sl) and segs[u] == s and sl[u] == sl[u - 1] + 1 and u - t < maxrun
                       and (ver is None or ver[(sl[u] - f0) // k])):
                    u += 1
                key = (s, li, li + (u - t), None)
            jobs.append((key, [(sl[v] - f0, ol[v]) for v in range(t, u)]))
            t = u

        # A run of records not to be checked goes straight into its batch slots (one preadv
        # with a buffer per slot) where the file offset, the record size and the slots are all
        # on the O_DIRECT alignment (224x224x3 records: 150528 bytes, 294 sectors).
        base = np.frombuffer(out, dtype=np.uint8).ctypes.data if len(out) else 0

        def run(key, recs, fd):
            s, lo, hi, j = key
            seg = self._segs[s]
            off, ln = seg.range_span(lo, hi)
            data = None
            if fd is not None:
                al = _DIO_ALIGN[0]
                if j is None and off % al == 0 and rs % al == 0 and base % al == 0:
                    views = [out[slot * rs:(slot + 1) * rs] for _, slot in recs]
                    try:
                        if os.preadv(fd, views, off) == ln:
                            return
                    except OSError:
                        pass
                data = _pread_direct(fd, off, ln)
            if data is None:  # O_DIRECT refused or short: through the page cache
                data = memoryview(_direct_scratch(ln))
                with seg.opened() as fd:
                    pread_into(fd, data, off, seg.path)
            if j is not None:
                seg.check_block(j, data)
            for li, slot in recs:
                a = (li - lo) * rs
                out[slot * rs:(slot + 1) * rs] = data[a:a + rs]

        # The reads that need no more than a preadv (a kept descriptor, aligned, nothing to
        # check) are prepared here, so the read threads hold the GIL for as little as possible.
        al = _DIO_ALIGN[0]
        if rs % al == 0 and base % al == 0:
            fds = {}
            for q, (key, recs) in enumerate(jobs):
                s, lo, hi, j = key
                if j is not None or self._segs[s].fd < 0:
                    continue
                fd = fds.get(s)
                if fd is None:
                    with self._direct_fd(s) as fd:
                        fds[s] = fd = -1 if fd is None else fd
                off, ln = self._segs[s].range_span(lo, hi)
                if fd >= 0 and off % al == 0:
                    jobs[q] = (key, recs, fd, [out[slot * rs:(slot + 1) * rs] for _, slot in recs], off, ln)
        dfds = self._dfds

        def stripe(part):  # one of _DIRECT_DEPTH threads: a read at a time, the next one left
            for job in part:
                if len(job) > 2:
                    try:
                        if os.preadv(job[2], job[3], job[4]) == job[5]:
                            continue
                    except OSError:
                        pass
                key, recs = job[0], job[1]
                s = key[0]
                fd = dfds.get(s)
                if fd is not None and self._segs[s].fd >= 0:  # the kept descriptor (or -1: refused)
                    run(key, recs, fd if fd >= 0 else None)
                    continue
                with self._direct_fd(s) as fd:
                    run(key, recs, fd)

        pool = _direct_pool()
        depth = max(1, _DIRECT_DEPTH)
        shared = iter(jobs)  # each thread takes the next read when it is done with one
        futs = [pool.submit(stripe, shared) for _ in range(min(depth, len(jobs)))]
        _wait_checks(futs)
        for s in sorted(set(segs)):
            self._segs[s].check_unchanged()

    def _direct_copy(self, s, dst, off, ln):
        """Read file bytes [off, off+ln) of segment s with O_DIRECT (through this thread's
        aligned scratch) into dst; False where O_DIRECT is refused or the read is short."""
        with self._direct_fd(s) as fd:
            data = None if fd is None else _pread_direct(fd, off, ln)
            if data is None:
                return False
            dst[:ln] = data
            return True

    def _direct_read(self, s, raw, off, ln):
        """Read file bytes [off, off+ln) of segment s with O_DIRECT into raw, starting at raw
        offset off % ALIGN (so every read is aligned); return that offset, or None where
        O_DIRECT is refused or fails (the caller then reads buffered)."""
        with self._direct_fd(s) as fd:
            if fd is None:  # an object in a bucket, or O_DIRECT refused
                return None
            lead = off % ALIGN
            a = off - lead
            need = lead + ln
            mv = memoryview(raw)[:min(align_up(need), raw.size)]
            got = 0
            while got < need:
                try:
                    k = os.preadv(fd, [mv[got:]], a + got)
                except OSError:
                    return None
                if k <= 0:
                    return None
                got += k
            return lead

    @staticmethod
    def _same_file(seg, fd):
        """fd, opened by path after the dataset was opened (an O_DIRECT descriptor): it must be
        the file the dataset checked then, not one renamed to its path since (a rebuild that
        replaced the folder, an rsync); otherwise close it and raise."""
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != seg._ident:
            os.close(fd)
            raise FormatError(seg.path, "the file was replaced or changed since the dataset was opened; reopen the dataset")
        return fd

    def close(self):
        for s in getattr(self, "_segs", []):
            s.close()
        for fd in getattr(self, "_dfds", {}).values():
            if fd >= 0:
                os.close(fd)
        self._dfds = {}
        super().close()

    def _read_one(self, i):
        s, li = self._locate(i)
        seg = self._segs[s]
        raw = seg.read_record(li)
        if self.verify_crc:
            seg.check_records(li, li + 1, memoryview(raw))
        seg.check_unchanged()
        arr = np.frombuffer(raw, dtype=self.dtype)
        return arr.reshape(self._record_shape(seg, li, arr.size))

    def _record_shape(self, seg, li, size):
        if self.fixed:
            return self.shape
        return seg.record_shape(li)

    def _fill_range(self, first, n, raw):
        pending = []  # checks running on the checker thread
        try:
            out = self._fill_range_checked(first, n, raw, pending)
        except BaseException:
            _wait_checks(pending)
            raise
        _wait_checks(pending)
        for s in range(self._locate(first)[0], self._locate(first + n - 1)[0] + 1):
            self._segs[s].check_unchanged()
        return out

    def _overlap_check(self, seg, li, take, ln):
        """Whether to read seg's local records [li, li + take), ln bytes, in pieces checked
        beside the read: a local shard, a big read, a CRC that releases the GIL, and blocks
        not all checked yet (later epochs read in one piece)."""
        if not (self.verify_crc and ln >= 2 * _CHECK_PIECE and not seg.remote and self.record_size
                and getattr(seg, "block_records", 0) > 0 and _crc32c.BACKEND.startswith("packer")):
            return False
        k = seg.block_records
        return not seg._verified[li // k:(li + take - 1) // k + 1].all()

    def _read_overlapped(self, seg, li, take, mv, pending):
        """Read local records [li, li + take) of seg into mv piece by piece; each piece ends on
        a checksum block boundary (or at the end) and is checked on the checker thread while
        the next is read."""
        k = seg.block_records
        step = max(1, _CHECK_PIECE // (k * self.record_size)) * k  # records per piece
        base, _ = seg.range_span(li, li)
        a, end = li, li + take
        with seg.opened() as fd:
            while a < end:
                b = min(end, a // k * k + step)
                o, ln = seg.range_span(a, b)
                piece = mv[o - base:o - base + ln]
                pread_into(fd, piece, o, seg.path)
                pending.append(_checker().submit(seg.check_records, a, b, piece))
                a = b

    def _fill_range_checked(self, first, n, raw, pending):
        rs = self.record_size
        pos = 0
        lead = 0
        i = first
        end = first + n
        while i < end:
            s, li = self._locate(i)
            seg = self._segs[s]
            take = min(end - i, seg.n - li)
            off, ln = seg.range_span(li, li + take)
            d_lead = self._direct_read(s, raw, off, ln) if (self.direct and pos == 0) else None
            if d_lead is not None:
                lead = d_lead
            elif self.direct and pos == 0:  # O_DIRECT refused or short: read buffered
                lead = 0
                with seg.opened() as fd:
                    pread_into(fd, memoryview(raw)[:ln], off, seg.path)
            elif self.direct and self._direct_copy(s, memoryview(raw)[lead + pos:lead + pos + ln], off, ln):
                pass  # a later shard's part of the batch: O_DIRECT into the scratch, copied
            elif self._overlap_check(seg, li, take, ln):  # read and checked (on the checker thread)
                self._read_overlapped(seg, li, take, memoryview(raw)[lead + pos:lead + pos + ln], pending)
                pos += ln
                i += take
                continue
            else:
                dst = memoryview(raw)[lead + pos:lead + pos + ln]
                got = 0
                if self.verify_crc and not seg.remote and rs:
                    # Records a check of the batch before read past its end already (in order).
                    got = (take_tail(seg, li, li + take, dst) - li) * rs
                if got < ln:
                    if seg.remote or seg.fd >= 0:  # the descriptor (or object) kept open: seg.opened() without its overhead
                        pread_into(seg.fd, dst[got:], off + got, seg.path)
                    else:
                        with seg.opened() as fd:
                            pread_into(fd, dst[got:], off + got, seg.path)
            if self.verify_crc:
                seg.check_records(li, li + take, memoryview(raw)[lead + pos:lead + pos + ln])
            pos += ln
            i += take
        return raw[lead:lead + n * rs].view(self.dtype).reshape((n,) + self.shape)

    def _fill_indices(self, idx, images, spread=False):
        rs = self.record_size
        out = memoryview(images.reshape(-1).view(np.uint8))
        order = np.argsort(idx, kind="stable")
        sidx = idx[order]
        n = sidx.size
        if n == 0:
            return
        if self._store is not None:
            if spread and self._sparse_remote(sidx):
                self._fill_remote_sparse(sidx, order, out)
                return
            self._prefetch(sidx)
        elif self.direct:
            self._fill_direct(sidx, order, out)
            return
        # Runs of consecutive records of one segment (the indices are sorted, so a segment's
        # runs are together): each run is one preadv straight into its batch slots, and a
        # segment's runs share one descriptor.
        firsts = np.asarray(self._firsts, dtype=np.int64)
        segs_of = np.searchsorted(firsts, sidx, side="right") - 1
        brk = np.nonzero((np.diff(sidx) != 1) | (np.diff(segs_of) != 0))[0] + 1
        starts = np.concatenate(([0], brk)).tolist()
        ends = np.concatenate((brk, [n])).tolist()
        segs_l = segs_of[starts].tolist()
        firsts_l = sidx[starts].tolist()
        order_l = order.tolist()
        r = 0
        while r < len(starts):
            s = segs_l[r]
            seg = self._segs[s]
            q = r
            while q < len(starts) and segs_l[q] == s:
                q += 1
            with seg.opened() as fd:
                for t in range(r, q):
                    k, j = starts[t], ends[t]
                    li = firsts_l[t] - self._firsts[s]
                    off, _ = seg.range_span(li, li)
                    views = [out[p * rs:(p + 1) * rs] for p in order_l[k:j]]
                    preadv_into(fd, views, off, seg.path)
                    if self.verify_crc:
                        seg.check_records(li, li + (j - k), views)
            seg.check_unchanged()
            r = q


class ShardDataset(_SegmentDataset):
    """A directory of packer shards (format "shards")."""

    format = "shards"

    def __init__(self, path, manifest, verify_crc=True, direct=False, shard_paths=None, store=None):
        super().__init__(path, manifest, verify_crc, direct, store)
        if self.verify_crc:
            _warn_if_slow_crc()
        entries = [fe for fe in self.manifest.get("files", []) if fe["path"].endswith(".pks")]
        if shard_paths is None:
            shard_paths = [_join(self.path, fe["path"]) for fe in entries]
        else:
            entries = [{} for _ in shard_paths]
        segs = []
        first = 0
        keep_open = len(shard_paths) <= MAX_OPEN_SHARDS
        try:
            for pos, (p, fe) in enumerate(zip(shard_paths, entries)):
                if store is None:
                    sf = ShardFile(p, first, keep_open)
                else:  # HEAD (size against the manifest, ETag), then ranged GETs or a local copy
                    obj = store.head(fe["path"], fe.get("size"))
                    if store.cache_dir:
                        sf = ShardFile(store.local_copy(obj, fe.get("sha256")), first, keep_open, name=obj.url)
                    else:
                        sf = ShardFile(None, first, obj=obj)
                segs.append(sf)
                if fe:
                    self._check_identity(sf, pos, fe, first)
                first += sf.n
        except BaseException:
            for s in segs:
                s.close()
            if store is not None:
                store.close()
            raise
        self._setup_segments(segs)
        self.count = first
        spec = self.manifest.get("sample") or (segs[0].meta.get("sample") if segs else None)
        if spec is None:
            raise FormatError(self.path, "no sample spec (empty dataset without manifest)")
        self._init_spec(spec, self.path)
        m = self.manifest
        if m and m.get("count") != self.count:
            self.close()
            raise FormatError(os.path.join(self.path, MANIFEST),
                              "manifest count %r, the shards hold %d records" % (m.get("count"), self.count))
        for s in segs:
            if (list(s.shape), s.dtype) != (list(self.shape), self.dtype):
                self.close()
                raise FormatError(s.path, "sample spec %s %s differs from the dataset's %s %s"
                                  % (list(s.shape), s.dtype.name, list(self.shape), self.dtype.name))
        label = m.get("label") or (segs[0].meta.get("label") if segs else {}) or {}
        self.aux_names = list(label.get("aux") or [])
        for s in segs:
            if s.aux_names != self.aux_names:
                self.close()
                raise FormatError(s.path, "aux columns %r differ from the dataset's %r" % (s.aux_names, self.aux_names))
        a = len(self.aux_names)
        self.labels = np.concatenate([s.labels for s in segs]) if segs else np.zeros(0, np.int64)
        self._aux = np.concatenate([s.aux for s in segs]) if segs else np.zeros((0, a), np.int64)
        self.shards = segs

    def _check_identity(self, sf, pos, fe, first):
        """Refuse a shard that is not the one the manifest lists at position pos: a swapped,
        renamed or foreign file would otherwise serve other records under these indices."""
        m = self.manifest
        idx = (sf.meta.get("shard") or {}).get("index") if isinstance(sf.meta.get("shard"), dict) else None
        if idx != pos:
            raise FormatError(sf.path, "shard index %s in its header at position %d of the manifest "
                              "(swapped or renamed shard files?)" % (idx, pos))
        want = m.get("sample") or {}
        got = sf.meta.get("sample") or {}
        for key in ("shape", "dtype", "layout"):
            if got.get(key) != want.get(key):
                raise FormatError(sf.path, "sample spec %s %s %s, the manifest says %s %s %s (%s differs)" % (
                    got.get("shape"), got.get("dtype"), got.get("layout"),
                    want.get("shape"), want.get("dtype"), want.get("layout"), key))
        want_aux = list((m.get("label") or {}).get("aux") or [])
        if sf.aux_names != want_aux:
            raise FormatError(sf.path, "aux columns %r, the manifest says %r" % (sf.aux_names, want_aux))
        fv = m.get("format_version")
        if isinstance(fv, int) and not isinstance(fv, bool) and sf.version > fv:
            raise FormatError(sf.path, "shard format version %d, the manifest says format_version %d" % (sf.version, fv))
        if "dataset" in sf.meta:
            diff = dataset_meta_diff(sf.meta["dataset"], m)
            if diff:
                raise FormatError(sf.path, "the shard header's dataset %s differ from the manifest's "
                                  "(a shard of another build, or an edited manifest)" % ", ".join(diff))
        records = fe.get("records", 0)
        if records != sf.n or fe.get("first_record", 0) != first:
            raise FormatError(sf.path, "holds %d records from %d, the manifest says %r records from %r" % (
                sf.n, first, records, fe.get("first_record", 0)))
        if "size" in fe and fe["size"] != sf.file_size:
            raise FormatError(sf.path, "file is %d bytes, the manifest says %d" % (sf.file_size, fe["size"]))
        # A manifest of packer before index_sha256 has none: the checks above only (FORMAT.md).
        pin = fe.get("index_sha256")
        if pin is not None and sf.index_sha256 != pin:
            raise FormatError(sf.path, "index_sha256 %s, the manifest says %s: a shard of another build (same names "
                              "and options, other content: an rsync of a rebuild?) or a changed file; its records "
                              "are not this dataset's" % (sf.index_sha256, pin))

    def _meta(self, i):
        s, li = self._locate(i)
        return self._segs[s].record_meta(li)


class _RawSegment:
    """Fixed-size records stored back to back in a plain file (images.npy)."""

    def __init__(self, path, data_offset, record_size, n, obj=None, name=None):
        self.file_path = path
        self.path = obj.url if obj is not None else (name or path)
        self.data_offset = data_offset
        self.record_size = record_size
        self.n = n
        self.first = 0
        self.fd = -1
        self.remote = obj is not None
        self.fd = obj if self.remote else open_ro(path)
        self._ident = None
        if not self.remote:  # what a later open by path (O_DIRECT) must find: the same file
            st = os.fstat(self.fd)
            self._ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def range_span(self, lo, hi):
        return self.data_offset + lo * self.record_size, (hi - lo) * self.record_size

    def read_record(self, i):
        buf = bytearray(self.record_size)
        pread_into(self.fd, memoryview(buf), self.data_offset + i * self.record_size, self.path)
        return buf

    @contextlib.contextmanager
    def opened(self):
        yield self.fd

    def check_records(self, lo, hi, data=None):
        pass

    def check_unchanged(self):
        check_unchanged(self)

    def close(self):
        if not self.remote and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _join(directory, rel):
    """The file rel (a manifest path, slash-separated) of a local folder or a bucket prefix."""
    if _s3.is_url(directory):
        return directory.rstrip("/") + "/" + rel
    return os.path.join(directory, *rel.split("/"))


def _listed(m, name):
    """The manifest path of the dataset file called name: "name", or ".packer-gen-<hex>/name"
    in a dataset that replaced another one in a bucket."""
    for fe in m.get("files") or []:
        p = fe.get("path")
        if p == name or (isinstance(p, str) and p.endswith("/" + name)):
            return p
    return name


def _entry(m, rel):
    for fe in m.get("files") or []:
        if fe.get("path") == rel:
            return fe
    return {}


_NPY_HEAD = 1 << 16  # bytes of an object read to parse its .npy header


def _parse_npy_header(f):
    """(shape, dtype, fortran_order, data_offset) read from f, positioned at the file's start;
    ValueError when it is not a supported .npy header."""
    fmt = np.lib.format
    major, minor = fmt.read_magic(f)
    if (major, minor) == (1, 0):
        shape, fortran, dtype = fmt.read_array_header_1_0(f)
    elif major in (2, 3):
        shape, fortran, dtype = fmt.read_array_header_2_0(f)
    else:
        raise ValueError("unsupported npy version %d.%d" % (major, minor))
    return tuple(shape), dtype, fortran, f.tell()


def read_npy_header(path, obj=None):
    """(shape, dtype, fortran_order, data_offset) of an .npy file (or of obj, an object in a
    bucket: its first bytes are fetched), with FormatError on failure."""
    if obj is not None:
        head = bytearray(min(obj.size, _NPY_HEAD))
        obj.pread_into(memoryview(head), 0)
        try:
            return _parse_npy_header(io.BytesIO(bytes(head)))
        except ValueError as e:
            raise FormatError(obj.url, "not a valid .npy file (or a header over %d bytes): %s" % (_NPY_HEAD, e))
    try:
        with open(path, "rb") as f:
            return _parse_npy_header(f)
    except OSError as e:
        raise FormatError(path, "cannot read: %s" % (e.strerror or e))
    except ValueError as e:
        raise FormatError(path, "not a valid .npy file: %s" % e)


def load_npy_column(path, n, what, obj=None):
    shape, dtype, fortran, off = read_npy_header(path, obj)
    if obj is not None:
        path = obj.url
    if shape != (n,) or dtype.kind != "i" or dtype.itemsize != 8:
        raise FormatError(path, "%s must be [%d] int64, found %s %s" % (what, n, list(shape), dtype))
    size = obj.size if obj is not None else os.stat(path).st_size
    if size != off + 8 * n:
        raise FormatError(path, "file is %d bytes, expected %d" % (size, off + 8 * n))
    arr = np.empty(n, dtype=dtype)
    if obj is not None:
        obj.pread_into(memoryview(arr).cast("B"), off)
        return arr.astype(np.int64, copy=False)
    fd = open_ro(path)
    try:
        pread_into(fd, memoryview(arr).cast("B"), off, path)
    finally:
        os.close(fd)
    return arr.astype(np.int64, copy=False)


class NpyDataset(_SegmentDataset):
    """A directory with images.npy, labels.npy, aux_<name>.npy and optional meta.jsonl."""

    format = "npy"

    def __init__(self, path, manifest, verify_crc=True, direct=False, store=None):
        super().__init__(path, manifest, verify_crc, direct, store)
        try:
            self._open_npy()
        except BaseException:
            self.close()
            raise

    def _open_npy(self):
        m = self.manifest
        store = self._store
        self._init_spec(m["sample"], _join(self.path, MANIFEST))
        if not self.fixed:
            raise FormatError(self.path, "npy datasets need a fixed sample shape")
        n = m["count"]
        self.count = n
        rel = _listed(m, "images.npy")
        ipath = _join(self.path, rel)
        obj = None
        if store is not None:  # HEAD: size against the manifest, ETag
            obj = store.head(rel, _entry(m, rel).get("size"))
            if store.cache_dir:
                ipath, obj = store.local_copy(obj, _entry(m, rel).get("sha256")), None
        shape, dtype, fortran, off = read_npy_header(ipath, obj)
        where = obj.url if obj is not None else ipath
        if fortran or shape != (n,) + self.shape or dtype.str.lstrip("<|") != self.dtype.str.lstrip("<|"):
            raise FormatError(where, "array is %s %s%s, the manifest says %s %s" % (
                list(shape), dtype, " (Fortran order)" if fortran else "", [n] + list(self.shape), self.dtype))
        size = obj.size if obj is not None else os.stat(ipath).st_size
        if size != off + n * self.record_size:
            raise FormatError(where, "file is %d bytes, expected %d" % (size, off + n * self.record_size))
        if store is None:
            for fe in m.get("files") or []:  # images, labels, aux columns, meta.jsonl
                _check_listed_size(m, self.path, fe["path"])
        name = store.object_url(rel) if store is not None else None
        self._setup_segments([_RawSegment(ipath, off, self.record_size, n, obj=obj, name=name)])

        def column(fname, what):
            r = _listed(m, fname)
            if store is None:
                return load_npy_column(_join(self.path, r), n, what)
            return load_npy_column(None, n, what, store.head(r, _entry(m, r).get("size")))

        self.labels = column("labels.npy", "labels")
        self.aux_names = list((m.get("label") or {}).get("aux") or [])
        cols = [column("aux_%s.npy" % a, "aux column " + a) for a in self.aux_names]
        self._aux = np.stack(cols, axis=1) if cols else np.zeros((n, 0), np.int64)
        self._meta_lines = None
        self._meta_rel = _listed(m, "meta.jsonl")
        self._meta_path = _join(self.path, self._meta_rel)
        if store is not None:  # fetched now: the store is not kept for it after the reads
            self._meta_lines = []
            if any(fe.get("path") == self._meta_rel for fe in m.get("files") or []):
                mo = store.head(self._meta_rel, _entry(m, self._meta_rel).get("size"))
                buf = bytearray(mo.size)
                mo.pread_into(memoryview(buf), 0)
                self._meta_lines = bytes(buf).split(b"\n")

    def _meta(self, i):
        if self._meta_lines is None:
            if not os.path.exists(self._meta_path):
                self._meta_lines = []
            else:
                with open(self._meta_path, "rb") as f:
                    self._meta_lines = f.read().split(b"\n")
        if i >= len(self._meta_lines) or not self._meta_lines[i].strip():
            return None
        return json.loads(self._meta_lines[i].decode("utf-8"))


def _check_listed_size(m, directory, rel):
    """The file rel must have the size the manifest lists for it (when listed)."""
    for fe in m.get("files") or []:
        if fe.get("path") == rel and "size" in fe:
            p = os.path.join(directory, rel)
            try:
                size = os.stat(p).st_size
            except OSError as e:
                raise FormatError(p, "cannot open: %s" % (e.strerror or e))
            if size != fe["size"]:
                raise FormatError(p, "file is %d bytes, the manifest says %d" % (size, fe["size"]))


def _import_h5py():
    try:
        import h5py
    except ImportError:
        raise PackerError("reading hdf5 datasets needs h5py (pip install h5py, or apt install python3-h5py)")
    return h5py


class HDF5Dataset(Dataset):
    """data.h5 with /images [N, ...] and /labels [N] int64, read through h5py."""

    format = "hdf5"

    def __init__(self, path, manifest, verify_crc=True, direct=False, store=None):
        super().__init__(path, manifest, verify_crc, direct, store)
        m = self.manifest
        rel = ([fe["path"] for fe in m.get("files", []) if fe["path"].endswith((".h5", ".hdf5"))] or ["data.h5"])[0]
        if store is not None:
            try:
                if not store.cache_dir:
                    raise PackerError("%s: an HDF5 dataset in a bucket is read through h5py from a local file: "
                                      "open it with cache_dir= (or PACKER_CACHE_DIR) to fetch data.h5 whole "
                                      "into that folder, or copy the dataset to a local folder" % self.path)
                obj = store.head(rel, _entry(m, rel).get("size"))
                local = store.local_copy(obj, _entry(m, rel).get("sha256"))
            finally:
                store.close()
                self._store = None
        h5py = _import_h5py()
        self._init_spec(m["sample"], _join(self.path, MANIFEST))
        self.count = n = m["count"]
        if store is not None:
            self.h5path = local
        else:
            self.h5path = _join(self.path, rel)
            _check_listed_size(m, self.path, rel)
        try:
            self._f = h5py.File(self.h5path, "r")
        except OSError as e:
            raise FormatError(self.h5path, "cannot open HDF5 file: %s" % e)
        try:
            self._check_and_load(n)
        except BaseException:
            self._f.close()
            raise

    def _check_and_load(self, n):
        f = self._f
        for name in ("images", "labels"):
            if name not in f:
                raise FormatError(self.h5path, "missing dataset /%s" % name)
        if "spec" in f.attrs:
            # The dataset description the writer stored (packer, source, transform, classes).
            try:
                spec = _h5_json_attr(f, "spec")
            except ValueError as e:
                raise FormatError(self.h5path, "root attribute 'spec': %s" % e)
            diff = dataset_meta_diff(spec, self.manifest)
            if diff:
                raise FormatError(self.h5path, "root attribute 'spec': dataset %s differ from the manifest's "
                                  "(a file of another build, or an edited manifest)" % ", ".join(diff))
        self._images = f["images"]
        im = self._images
        if tuple(im.shape) != (n,) + self.shape or im.dtype.str.lstrip("<|") != self.dtype.str.lstrip("<|"):
            raise FormatError(self.h5path, "/images is %s %s, the manifest says %s %s" % (
                list(im.shape), im.dtype, [n] + list(self.shape), self.dtype))
        lab = f["labels"]
        if tuple(lab.shape) != (n,) or lab.dtype.kind != "i" or lab.dtype.itemsize != 8:
            raise FormatError(self.h5path, "/labels is %s %s, expected [%d] int64" % (list(lab.shape), lab.dtype, n))
        self.labels = np.asarray(lab[...], dtype=np.int64)
        self.aux_names = list((self.manifest.get("label") or {}).get("aux") or [])
        cols = []
        for a in self.aux_names:
            ds = None
            for key in ("aux/" + a, "aux_" + a, a):
                if key in f:
                    ds = f[key]
                    break
            if ds is None:
                raise FormatError(self.h5path, "missing aux column %r" % a)
            cols.append(np.asarray(ds[...], dtype=np.int64).reshape(n))
        self._aux = np.stack(cols, axis=1) if cols else np.zeros((n, 0), np.int64)
        self._meta_ds = f["meta"] if "meta" in f else None

    def close(self):
        if not self._closed:
            self._f.close()
        super().close()

    def _read_one(self, i):
        out = np.empty(self.shape, dtype=self.dtype)
        self._images.read_direct(out, np.s_[i], np.s_[...])
        return out

    def _fill_range(self, first, n, raw):
        images = raw[:n * self.record_size].view(self.dtype).reshape((n,) + self.shape)
        if n:
            self._images.read_direct(images, np.s_[first:first + n], np.s_[0:n])
        return images

    def _fill_indices(self, idx, images, spread=False):
        order = np.argsort(idx, kind="stable")
        sidx = idx[order]
        k, n = 0, sidx.size
        while k < n:
            j = k + 1
            while j < n and sidx[j] == sidx[j - 1] + 1:
                j += 1
            a = int(sidx[k])
            slots = order[k:j]
            s0 = int(slots[0])
            if j - k == 1 or np.all(np.diff(slots) == 1):  # straight into the batch
                self._images.read_direct(images, np.s_[a:a + j - k], np.s_[s0:s0 + j - k])
            else:
                tmp = np.empty((j - k,) + self.shape, dtype=self.dtype)
                self._images.read_direct(tmp, np.s_[a:a + j - k], np.s_[0:j - k])
                images[slots] = tmp
            k = j

    def _meta(self, i):
        if self._meta_ds is None:
            return None
        v = self._meta_ds[i]
        if isinstance(v, bytes):
            v = v.decode("utf-8")
        return json.loads(v) if v else None


def open_dataset(path, verify_crc=True, direct=False, cache_dir=None):
    """Open a packer output directory (or its manifest.json, or a single .pks shard file), or
    the dataset below s3://bucket/prefix. ``cache_dir`` (default: $PACKER_CACHE_DIR) applies
    to bucket datasets only: the folder keeps whole local copies of their objects."""
    if _s3.is_url(str(path)):
        url = str(path)
        if url.endswith("/" + MANIFEST):
            url = url[:-len(MANIFEST) - 1]
        if cache_dir is None:
            cache_dir = os.environ.get("PACKER_CACHE_DIR") or None
        store = _s3.S3Store(url, cache_dir=cache_dir)
        try:
            m = load_manifest(url, store)
            cls = {"shards": ShardDataset, "npy": NpyDataset, "hdf5": HDF5Dataset}[m["format"]]
        except BaseException:
            store.close()
            raise
        return cls(store.url, m, verify_crc, False, store=store)
    p = Path(path)
    if p.is_file() and p.suffix == ".pks":
        return ShardDataset(str(p.parent), {}, verify_crc, direct, shard_paths=[str(p)])
    if p.is_file() and p.name == MANIFEST:
        p = p.parent
    if not p.is_dir():
        raise FormatError(str(p), "not a packer output directory")
    m = load_manifest(p)
    cls = {"shards": ShardDataset, "npy": NpyDataset, "hdf5": HDF5Dataset}[m["format"]]
    return cls(str(p), m, verify_crc, direct)
