"""The Dataset base class: random access, the reading orders of shard/ORDER.md and the batch
iterators (plans, buffers, prefetch), over the hooks each format implements."""

import operator
import queue
import threading
import time

import numpy as np

from . import _order
from ._buffers import _POOL_LOCK, _Buf, _Pool, _aligned_empty
from ._fields import Schema
from ._shard import ALIGN, parse_sample_spec


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
    """A packed dataset. ``len(ds)``, ``ds[i] -> (image, label)``; see the package docs. A dataset
    with fields (``ds.fields``, shard/FORMAT.md "Fields") gives dicts instead: ``ds[i] ->
    {"image", "label", NAME: value, ...}`` and batches as dicts (see ``batches``).

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
        self.schema = Schema(None, self.path)  # the formats set the dataset's own

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
        labels [n])`` in fresh arrays, as :meth:`read_many` reads them (a slice with step 1 is one
        contiguous read). With fields: ``ds[i]`` is :meth:`record`'s dict, ``ds[a:b]`` a batch dict
        as ``batches`` yields."""
        many = isinstance(i, slice) or (not isinstance(i, (int, np.integer, str, bytes)) and np.ndim(i) == 1)
        if self.schema:
            if many:
                return self._field_batch(self._indices(i), False)
            return self.record(i)
        if many:
            return self._read_batch(*self._index_array(i))
        i = self._index(i)
        return self._read_one(i), int(self.labels[i])

    # -- batched random access -------------------------------------------------------------
    def read_many(self, indices):
        """The records ``indices`` (a sequence or 1-D array of integers, negative ones counting
        from the end, repeats allowed; or a slice or boolean mask) read as one batch, in the
        caller's order: ``(images, labels)``, images one fresh C-contiguous ``[n, *shape]`` array
        (its memory 4096-byte aligned) and labels int64 ``[n]``; a list of arrays instead of
        images for variable-size records; a batch dict as ``batches`` yields for a dataset with
        fields.

        The reads are sorted by file and offset, each run of neighbouring records is one read
        (``preadv`` straight into the batch slots, which releases the GIL), a record asked for
        more than once is read once, and the bytes are checked as the batch iterators check
        them: the CRC-32C of every checksum block the batch touches, the first time a read
        touches it (``verify_crc``), a damaged block raising :class:`CorruptionError` naming the
        file and the records. Safe to call from several threads at once."""
        idx, contiguous = self._index_array(indices)
        if self.schema:
            return self._field_batch(idx, False)
        return self._read_batch(idx, contiguous)

    def __getitems__(self, indices):
        """The records ``indices`` as a list of what ``ds[i]`` gives for each one (the batched
        read PyTorch's DataLoader and Grain's sources call with a batch of indices), read with
        :meth:`read_many`: the records' arrays are views of one batch buffer."""
        batch = self.read_many(indices)
        if self.schema:
            keys = list(batch)
            return [dict({k: batch[k][j] for k in keys}, label=int(batch["label"][j]))
                    for j in range(len(batch["label"]))]
        images, labels = batch
        return [(images[j], int(labels[j])) for j in range(len(labels))]

    # -- fields ----------------------------------------------------------------------------
    @property
    def fields(self):
        """The schema of the fields each record carries besides its image and labels (a list of
        dicts: name, kind, dtype, shape, encoding, geometry, rows_of; shard/FORMAT.md
        "Fields"), ``[]`` for a dataset without fields."""
        return self.schema.specs()

    def record(self, i):
        """Record i as a dict: ``{"image": ndarray, "label": int, NAME: value, ...}``, a value per
        field in schema order: text -> str, json -> the parsed value, bytes -> bytes, ndarray and
        image (mask) -> ndarray. Text that is not UTF-8 or json that is not one JSON value is a
        FormatError naming the file and the record."""
        i = self._index(i)
        d = {"image": None, "label": int(self.labels[i])}
        if not self.schema:
            d["image"] = self._read_one(i)
            return d
        self.schema.check_keys(self.path)
        img, raws, where = self._read_record(i)
        d["image"] = img
        d.update(self.schema.decode(raws, img.shape, where, i))
        return d

    def field(self, i, name):
        """The value of field ``name`` of record i (as in :meth:`record`)."""
        i = self._index(i)
        f = self.schema.by_name.get(name) if self.schema else None
        if f is None:
            raise KeyError("no field %r (the fields are %s)" % (name, self.schema.names()))
        img, raws, where = self._read_record(i)
        k = self.schema.fields.index(f)
        return self.schema.decode_one(f, raws[k], img.shape, where[k] if isinstance(where, list) else where, i)

    def _field_batch(self, idx, pad):
        idx = [int(j) for j in idx]
        # Each record once, in runs of consecutive records (one read a shard where the format
        # reads runs: see _read_run), then decoded in the caller's order.
        got = {}
        uniq = sorted(set(idx))
        k = 0
        while k < len(uniq):
            m = k + 1
            while m < len(uniq) and uniq[m] == uniq[m - 1] + 1:
                m += 1
            run = self._read_run(uniq[k], m - k)
            if run is None:  # this format reads record by record
                break
            got.update(zip(uniq[k:m], run))
            k = m
        recs = []
        for j in idx:
            if j not in got:
                recs.append(self.record(j))
                continue
            img, raws, where = got[j]
            d = {"image": img, "label": int(self.labels[j])}
            d.update(self.schema.decode(raws, img.shape, where, j))
            recs.append(d)
        return self.schema.collate([r["image"] for r in recs], self.labels[np.asarray(idx, dtype=np.int64)],
                                   recs, self.fixed, pad, self.dtype)

    def _field_batches(self, plan, pad):
        self.schema.check_keys(self.path, pad)
        for item in plan:
            idx = list(range(item[1], item[1] + item[2])) if item[0] == "range" else item[1].tolist()
            yield self._field_batch(idx, pad)

    def _read_record(self, i):
        """(sample array, each field's raw bytes in schema order, the file(s) they are in)."""
        return self._read_one(i), self._field_raws(i), self._field_paths()

    def _field_raws(self, i):
        raise NotImplementedError

    def _read_run(self, first, n):
        """Records first..first+n-1 read together (see _SegmentDataset), or None: one by one."""
        return None

    def _field_paths(self):
        return self.path

    def _indices(self, key):
        """The record indices a slice, integer array or boolean mask selects (int64 array)."""
        return self._index_array(key)[0]

    def _index_array(self, key):
        """(int64 array of the record indices a slice, integer sequence or boolean mask selects,
        negative ones made positive; whether they are a slice of step 1, read as one range)."""
        if isinstance(key, slice):
            a, b, step = key.indices(self.count)
            return np.arange(a, b, step, dtype=np.int64), step == 1
        idx = np.asarray(key)
        if idx.ndim != 1:
            raise TypeError("record indices must be one-dimensional, got shape %s" % (idx.shape,))
        if idx.dtype == np.bool_:
            # A boolean array is a mask over the records, as NumPy reads it.
            if idx.shape != (self.count,):
                raise IndexError("boolean mask of %d entries for %d records" % (idx.size, self.count))
            return np.flatnonzero(idx), False
        if idx.size == 0:
            return np.zeros(0, np.int64), False
        if idx.dtype.kind not in "iu":
            raise TypeError("record indices of type %s are not integers" % idx.dtype)
        if idx.dtype.kind == "u" and idx.max() >= self.count:
            raise IndexError("record index %d out of range [0, %d)" % (idx.max(), self.count))
        given = idx.astype(np.int64)
        idx = np.where(given < 0, given + self.count, given)
        if idx.min() < 0 or idx.max() >= self.count:
            bad = given[(idx < 0) | (idx >= self.count)][0]
            raise IndexError("record index %d out of range [0, %d)" % (bad, self.count))
        return idx, False

    def _read_batch(self, idx, contiguous):
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
                                       drop_last, self._start_v2(start))

    def _start_v2(self, start):
        """start as ORDER.md v2 allows it, 0 <= start <= N (the Go reader refuses others too)."""
        start = int(start)
        if not 0 <= start <= self.count:
            raise ValueError("%s: start position %d outside the epoch's %d records" % (self.path, start, self.count))
        return start

    # -- batches -------------------------------------------------------------------------
    def batches(self, batch_size, shuffle=False, seed=0, epoch=0, rank=0, world_size=1,
                drop_last=False, buffer_size=4096, start=0, copy=True, prefetch=None, alloc=None,
                world=None, buffer=None, order_version=2, worker=0, num_workers=1, pad=False):
        """Yield ``(images, labels)``: arrays ``[B, *shape]`` and ``[B]`` int64, in ORDER.md order.

        ``order_version=2`` (the default): a keyed permutation of all records when
        ``shuffle``; every rank yields the same number of batches (the last, partial global
        batch padded by repeating records, or dropped with ``drop_last``); ``start`` is the
        global position to resume from (``state_dict()["position"]``: records of the epoch
        consumed by all ranks together; at most ``len(ds)``, a larger one is refused);
        ``worker``/``num_workers`` give this reader every
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
        shared-memory torch tensor), and records are read straight into it.

        A dataset with fields yields dicts: ``"image"`` (``[B, ...]``, a list for variable-size
        samples), ``"label"`` (int64 ``[B]``), and each field by its name: fixed-size ndarrays
        and masks of fixed-size samples stacked ``[B, ...]``; variable ndarrays (boxes,
        multi-labels) a list of arrays, or with ``pad=True`` one zero-padded
        ``[B, max rows, ...]`` array and ``NAME_lengths`` (int64 ``[B]``); text a list of str,
        json a list of parsed values, bytes a list of bytes. ``copy``, ``prefetch`` and
        ``alloc`` do not apply (each record is read and split on its own)."""
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
        if self.schema:
            return self._field_batches(plan, pad)
        if not self.fixed:
            return self._var_batches(plan, copy)
        return self._fixed_batches(plan, B, copy, prefetch, alloc)

    def _plan_v2(self, B, shuffle, seed, epoch, rank, world, drop_last, start, worker=0, num_workers=1):
        """ORDER.md v2: list of this rank's batches worker, worker+num_workers, ..., each
        ("range", first, n) or ("idx", array)."""
        plan = _order.Plan(self.count, self._start_v2(start), B, rank, world, drop_last)
        perm = _order.Permutation(self.count, seed, epoch) if shuffle else None
        items = []
        need = []  # batches read by index (all of a shuffled epoch), their indices computed at once
        for j in range(worker, plan.batches(), num_workers):
            q = plan.batch_positions(j)
            if not shuffle and q.size and q[-1] < self.count:
                items.append(("range", int(q[0]), int(q.size)))
            else:
                need.append((len(items), j))
                items.append(None)
        for (k, _), idx in zip(need, _order.v2_batches_indices(plan, perm, shuffle, [j for _, j in need])):
            # "spread": drawn from the whole dataset (a bucket dataset may read it sparsely)
            items[k] = ("idx", idx, shuffle)
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
