"""Weighted mixtures of packed datasets (shard/ORDER.md, "Mixtures"), the same order as the Go
reader's ``shard.Mixture``.

    import packer_reader
    m = packer_reader.mix(["web/", "books/", "code/"], weights=[0.6, 0.3, 0.1], seed=1)
    loader = m.loader(256, rank=rank, world_size=world)
    for images, labels, sources, indices in loader:    # sources[i]: which dataset record i is from
        ...
    state = loader.state_dict()                        # every source's cursor; resumes on any world size

Each position of the mixture's stream draws from one source, chosen by a stratified rule (a
split tree of Beatty sequences), so every batch of every rank holds each source's share of
records within less than the source's depth in the tree (1 for two sources, 2 for up to four,
3 for up to eight); each source is read in its own version 2 order.
"""

import collections
import math
import operator

import numpy as np

from . import _order
from ._formats import open_dataset

UNIT_BITS = 20
MAX_POSITIONS = 1 << 40
MIX_PHASE_KEY = 0x2545F4914F6CDD1D
MIX_SOURCE_KEY = 0x9FB21C651E98DF25
STATE_MIXTURE = 1

MixedBatch = collections.namedtuple("MixedBatch", "images labels sources indices")
MixedBatch.__doc__ = """A batch of a mixture read with the default batching: ``images`` [B, ...]
and ``labels`` [B] as a dataset's batches, ``sources`` [B] (int64: the source of each record)
and ``indices`` [B] (int64: its record number in that source)."""


def _uint(name, v, hi=1 << 64):
    """v as an int in [0, hi), as Go's unsigned integers hold it: a float, a bool or a string is
    refused (int(2.7) would read another epoch), and so is a negative number."""
    if isinstance(v, (bool, np.bool_)) or not hasattr(v, "__index__"):
        raise TypeError("mixture %s %r is not an integer" % (name, v))
    v = operator.index(v)
    if not 0 <= v < hi:
        raise ValueError("mixture %s %d is outside [0, %d)" % (name, v, hi))
    return v


def units(weights):
    """The quantised weights of ORDER.md "Mixtures" step 1 (a list of ints)."""
    w = [float(x) for x in weights]
    if not w:
        raise ValueError("a mixture needs at least one source")
    total = 0.0
    for k, x in enumerate(w):
        if not x > 0 or math.isinf(x):
            raise ValueError("mixture weight %d is %r, want a finite number > 0" % (k, x))
        total += x  # in order, no compensated summation (sum() compensates from Python 3.12)
    if math.isinf(total):
        raise ValueError("mixture weights sum to infinity")
    out = []
    for k, x in enumerate(w):
        u = math.floor((x / total) * (1 << UNIT_BITS))
        if u < 1:
            raise ValueError("mixture weight %d (%r) is below 2^-%d of the total %r" % (k, x, UNIT_BITS, total))
        out.append(int(u))
    return out


class _Node:
    __slots__ = ("lo", "mid", "hi", "a", "d", "theta", "left", "right", "depth")

    def __init__(self, lo, hi, depth):
        self.lo, self.hi, self.depth = lo, hi, depth
        self.mid = self.a = self.d = self.theta = 0
        self.left = self.right = -1


class Mixture:
    """The order of a weighted mixture of ``len(counts)`` sources holding ``counts[k]`` records
    (ORDER.md "Mixtures"); :func:`mix` makes one over datasets. Attributes: ``counts``,
    ``weights``, ``units``, ``shares`` (``units[k] / sum(units)``), ``epoch_size``, ``seed``,
    ``replacement``, ``shuffle``, ``depths`` (each source's depth in the split tree: the bound of
    its deviation from its share in any window of consecutive positions)."""

    def __init__(self, counts, weights, seed=0, epoch_size=None, replacement=True, shuffle=True):
        counts = [int(c) for c in counts]
        weights = [float(w) for w in weights]
        if len(weights) != len(counts):
            raise ValueError("%d mixture weights for %d sources" % (len(weights), len(counts)))
        self.units = units(weights)
        for k, c in enumerate(counts):
            if c < 1:
                raise ValueError("mixture source %d has %d records, want >= 1" % (k, c))
        self.counts, self.weights = counts, weights
        self.seed = int(seed) & _order.M64
        self.replacement, self.shuffle = bool(replacement), bool(shuffle)
        self.total = sum(self.units)
        self.shares = [u / self.total for u in self.units]
        self._nodes = []
        self._leaf = [0] * len(counts)
        self._build(0, len(counts), 0)
        g = _order.SplitMix64(self.seed ^ MIX_PHASE_KEY)
        for n in self._nodes:
            if n.left >= 0:
                n.theta = g.next() % n.d
        g = _order.SplitMix64(self.seed ^ MIX_SOURCE_KEY)
        self.source_seeds = [g.next() for _ in counts]
        self.depths = [self._nodes[i].depth for i in self._leaf]
        self.epoch_size = self._size(epoch_size)

    def _build(self, lo, hi, depth):
        i = len(self._nodes)
        n = _Node(lo, hi, depth)
        self._nodes.append(n)
        n.d = sum(self.units[lo:hi])
        if hi - lo == 1:
            self._leaf[lo] = i
            return i
        n.mid = lo + (hi - lo) // 2
        n.a = sum(self.units[lo:n.mid])
        n.left = self._build(lo, n.mid, depth + 1)
        n.right = self._build(n.mid, hi, depth + 1)
        return i

    def _size(self, size):
        total = sum(self.counts)
        size = 0 if size is None else int(size)
        if size < 0:
            raise ValueError("mixture epoch size %d is negative" % size)
        if self.replacement:
            size = size or total
            if size > MAX_POSITIONS:
                raise ValueError("mixture epoch size %d is over the limit 2^40" % size)
            return size
        most = self._max_epoch(total)
        size = size or most
        if size > most:
            for k, c in enumerate(self.counts):
                n = self.count(k, size)
                if n > c:
                    raise ValueError("a mixture epoch of %d records without replacement draws %d records from "
                                     "source %d, which has %d (at most %d records an epoch)" % (size, n, k, c, most))
        return size

    def _max_epoch(self, total):
        def fits(n):
            return all(self.count(k, n) <= c for k, c in enumerate(self.counts))
        lo, hi = 1, min(total, MAX_POSITIONS)
        while lo < hi:
            mid = lo + (hi - lo + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    # -- ORDER.md "Mixtures" step 3 ----------------------------------------------------------
    def count(self, k, x):
        """The number of stream positions < x that draw from source k."""
        x = int(x)
        n = self._nodes[0]
        while n.left >= 0:
            c = (x * n.a + n.theta) // n.d
            if k < n.mid:
                x, n = c, self._nodes[n.left]
            else:
                x, n = x - c, self._nodes[n.right]
        return x

    def choose(self, xs):
        """The source and draw number of each stream position in ``xs`` (int64 arrays)."""
        xs = np.asarray(xs, dtype=np.uint64).reshape(-1)
        src = np.empty(xs.size, dtype=np.int64)
        ordinal = np.empty(xs.size, dtype=np.uint64)
        stack = [(0, np.arange(xs.size), xs)]
        one = np.uint64(1)
        while stack:
            i, idx, y = stack.pop()
            n = self._nodes[i]
            if n.left < 0:
                src[idx] = n.lo
                ordinal[idx] = y
                continue
            a, d, th = np.uint64(n.a), np.uint64(n.d), np.uint64(n.theta)
            c = (y * a + th) // d
            left = ((y + one) * a + th) // d > c
            stack.append((n.left, idx[left], c[left]))
            stack.append((n.right, idx[~left], y[~left] - c[~left]))
        return src, ordinal.astype(np.int64)

    def _base(self, epoch):
        epoch = _uint("epoch", epoch)
        if not self.replacement:
            return 0
        if epoch >= MAX_POSITIONS // self.epoch_size:
            raise ValueError("mixture epoch %d of %d records is past stream position 2^40" % (epoch, self.epoch_size))
        return epoch * self.epoch_size

    def _records(self, src, ordinal, epoch):
        """ORDER.md "Mixtures" step 4: the record of each (source, draw number)."""
        rec = np.empty(src.size, dtype=np.int64)
        for k in np.unique(src).tolist():
            sel = src == k
            o = ordinal[sel]
            n = self.counts[k]
            if self.replacement:
                e, i = o // n, o % n
            else:
                e, i = np.full(o.size, epoch, dtype=np.uint64), o
            if not self.shuffle:
                rec[sel] = i
                continue
            out = np.empty(o.size, dtype=np.int64)
            for ek in np.unique(e).tolist():
                m = e == ek
                out[m] = _order.Permutation(n, self.source_seeds[k], int(ek)).at(i[m])
            rec[sel] = out
        return rec

    def at(self, epoch, positions):
        """(sources, records): int64 arrays for the given positions of mixture epoch ``epoch``."""
        epoch = _uint("epoch", epoch)
        p = np.asarray(positions, dtype=np.int64).reshape(-1)
        if p.size and (p.min() < 0 or p.max() >= self.epoch_size):
            raise IndexError("position outside the mixture epoch's %d records" % self.epoch_size)
        src, o = self.choose(p.astype(np.uint64) + np.uint64(self._base(epoch)))
        return src, self._records(src, o, epoch)

    def plan(self, batch_size, rank=0, world_size=1, drop_last=False, start=0):
        """Version 2's plan (steps 2-4) of one rank over the mixture epoch's positions."""
        return _order.Plan(self.epoch_size, start, batch_size, rank, world_size, drop_last)

    def batch_refs(self, plan, epoch, j):
        """(sources, records) of batch j of ``plan`` in mixture epoch ``epoch``."""
        q = plan.batch_positions(j)
        L = self.epoch_size
        q = np.where(q >= L, (q - L) % L, q)
        return self.at(epoch, q)

    def order(self, batch_size, epoch=0, rank=0, world_size=1, drop_last=False, start=0):
        """Every (source, record) this rank reads in mixture epoch ``epoch``, in order, as two
        int64 arrays; batches are consecutive runs of ``batch_size``."""
        plan = self.plan(batch_size, rank, world_size, drop_last, start)
        qs = [plan.batch_positions(j) for j in range(plan.batches())]
        if not qs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        q = np.concatenate(qs)
        L = self.epoch_size
        return self.at(epoch, np.where(q >= L, (q - L) % L, q))

    # -- state -------------------------------------------------------------------------------
    def state(self, epoch, position):
        """ORDER.md's mixture state of epoch ``epoch`` once ``position`` positions are consumed."""
        epoch, position = _uint("epoch", epoch), _uint("position", position, self.epoch_size + 1)
        x = self._base(epoch) + position
        sources = []
        for k, n in enumerate(self.counts):
            d = self.count(k, x)
            e, i = (d // n, d % n) if self.replacement else (int(epoch), d)
            sources.append({"records": n, "drawn": d, "epoch": e, "position": i})
        return {"version": _order.STATE_VERSION, "order": _order.ORDER_V2, "mixture": STATE_MIXTURE,
                "seed": self.seed, "epoch": int(epoch), "position": position, "epoch_size": self.epoch_size,
                "replacement": self.replacement, "shuffle": self.shuffle, "units": list(self.units),
                "sources": sources}

    def restore(self, state):
        """Check that ``state`` is one of this mixture's and return its (epoch, position)."""
        got = (state.get("version"), state.get("order"), state.get("mixture"))
        if got != (_order.STATE_VERSION, _order.ORDER_V2, STATE_MIXTURE):
            raise ValueError("mixture state version/order/mixture %r, this reader knows %r"
                             % (got, (_order.STATE_VERSION, _order.ORDER_V2, STATE_MIXTURE)))
        for key, mine in (("seed", self.seed), ("units", list(self.units)), ("epoch_size", self.epoch_size),
                          ("replacement", self.replacement), ("shuffle", self.shuffle)):
            if state.get(key) != mine:
                raise ValueError("the mixture state is another mixture's: %s %r, the mixture's is %r"
                                 % (key, state.get(key), mine))
        if len(state.get("sources") or []) != len(self.counts):
            raise ValueError("the mixture state is another mixture's: %d sources, the mixture has %d"
                             % (len(state.get("sources") or []), len(self.counts)))
        want = self.state(state.get("epoch"), state.get("position"))
        for k, (a, b) in enumerate(zip(state["sources"], want["sources"])):
            if dict(a) != b:
                raise ValueError("the mixture state's cursor of source %d (%r) is not the one of its position %d (%r)"
                                 % (k, a, state["position"], b))
        return want["epoch"], want["position"]

    # -- introspection -----------------------------------------------------------------------
    def summary(self, epoch=0, batch_size=None, world_size=1, drop_last=False):
        """The realised mixture of epoch ``epoch`` (ORDER.md "Introspection") as a dict: the epoch
        size, and per source its records, weight, units, share, draws in the epoch, their
        fraction of it and the source passes they make; with ``batch_size``, the batches per rank
        and the fewest and most records of each source in one batch of any rank."""
        L = self.epoch_size
        epoch = _uint("epoch", epoch)
        x0 = self._base(epoch)
        out = {"epoch": epoch, "epoch_size": L, "seed": self.seed, "replacement": self.replacement,
               "shuffle": self.shuffle, "sources": []}
        for k, n in enumerate(self.counts):
            drawn = self.count(k, x0 + L) - self.count(k, x0)
            out["sources"].append({"records": n, "weight": self.weights[k], "units": self.units[k],
                                   "share": self.shares[k], "depth": self.depths[k], "drawn": drawn,
                                   "fraction": drawn / L, "passes": drawn / n})
        if batch_size:
            B, W = int(batch_size), int(world_size)
            plan = self.plan(B, 0, W, drop_last)
            full = plan.full * B * W
            lo = [B] * len(self.counts)
            hi = [0] * len(self.counts)
            step = B * max(1, (1 << 22) // B)  # whole batches at a time, a few MiB of positions
            for a in range(0, full, step):
                b = min(full, a + step)
                src, _ = self.choose(np.arange(a, b, dtype=np.uint64) + np.uint64(x0))
                per = src.reshape(-1, B)  # every rank's whole batches, in position order
                for k in range(len(self.counts)):
                    c = (per == k).sum(axis=1)
                    lo[k], hi[k] = min(lo[k], int(c.min())), max(hi[k], int(c.max()))
            out.update(batch_size=B, world_size=W, batches_per_rank=plan.batches())
            for k, s in enumerate(out["sources"]):
                if full:
                    s["batch_min"], s["batch_max"] = lo[k], hi[k]
        return out

    def describe(self, epoch=0, batch_size=None, world_size=1, drop_last=False, names=None):
        """:meth:`summary` as the text ``packer mix-plan`` prints."""
        s = self.summary(epoch, batch_size, world_size, drop_last)
        return format_summary(s, names)


def format_summary(s, names=None):
    """The text of ``packer mix-plan`` for a :meth:`Mixture.summary` dict."""
    names = names or ["source %d" % k for k in range(len(s["sources"]))]
    lines = ["epoch %d: %d records (%s, %s), seed %d" % (
        s["epoch"], s["epoch_size"], "with replacement" if s["replacement"] else "without replacement",
        "shuffled" if s["shuffle"] else "in record order", s["seed"])]
    if "batch_size" in s:
        lines.append("%d ranks, batches of %d: %d batches per rank" % (s["world_size"], s["batch_size"], s["batches_per_rank"]))
    head = "%-24s %12s %8s %8s %12s %9s %8s" % ("source", "records", "weight", "share", "drawn", "fraction", "passes")
    if "batch_size" in s:
        head += "  %s" % "per batch"
    lines.append(head)
    for name, r in zip(names, s["sources"]):
        line = "%-24s %12d %8.4g %8.5f %12d %9.5f %8.3f" % (name, r["records"], r["weight"], r["share"], r["drawn"],
                                                          r["fraction"], r["passes"])
        if "batch_size" in s:
            line += "  %s" % ("%d-%d" % (r["batch_min"], r["batch_max"]) if "batch_min" in r else "-")
        lines.append(line)
    return "\n".join(lines)


def _open(src):
    if isinstance(src, (str, bytes)) or hasattr(src, "__fspath__"):
        return open_dataset(str(src))
    return src


def _same_layout(datasets):
    d0 = datasets[0]
    return all(d.fixed and not d.schema and d.shape == d0.shape and d.dtype == d0.dtype for d in datasets)


class Mix(Mixture):
    """A :class:`Mixture` over opened datasets (``sources``); made by :func:`mix`."""

    def __init__(self, sources, weights, seed=0, epoch_size=None, replacement=True, shuffle=True, collate=None):
        self.sources = [_open(s) for s in sources]
        super().__init__([len(d) for d in self.sources], weights, seed, epoch_size, replacement, shuffle)
        if collate is None and not _same_layout(self.sources):
            shapes = ", ".join("%s %s%s" % (d.shape, d.dtype, " with fields" if d.schema else "") for d in self.sources)
            raise ValueError("the mixture's sources hold records of different shapes, types or fields (%s): "
                             "give collate= to say how to batch them" % shapes)
        self.collate = collate

    def read(self, sources, records):
        """One batch of the given (source, record) pairs, in order: a :class:`MixedBatch`, or
        ``collate(items)`` with ``items`` a list of ``(source, record, ds[record])``. Each source's
        records are read together (``ds[indices]``: sorted, neighbours merged, CRC-checked)."""
        sources = np.asarray(sources, dtype=np.int64)
        records = np.asarray(records, dtype=np.int64)
        if self.collate is not None:
            items = [None] * sources.size
            for k in np.unique(sources).tolist():
                pos = np.flatnonzero(sources == k)
                ds = self.sources[k]
                if ds.schema or not ds.fixed:
                    vals = [ds[int(records[p])] for p in pos]
                else:
                    imgs, labs = ds[records[pos]]
                    vals = [(imgs[i], int(labs[i])) for i in range(pos.size)]
                for p, v in zip(pos.tolist(), vals):
                    items[p] = (k, int(records[p]), v)
            return self.collate(items)
        d0 = self.sources[0]
        images = np.empty((sources.size,) + tuple(d0.shape), dtype=d0.dtype)
        labels = np.empty(sources.size, dtype=np.int64)
        for k in np.unique(sources).tolist():
            sel = sources == k
            imgs, labs = self.sources[k][records[sel]]
            images[sel] = imgs
            labels[sel] = labs
        return MixedBatch(images, labels, sources, records)

    def loader(self, batch_size, rank=0, world_size=1, drop_last=False, epoch=0):
        """A :class:`MixLoader` of this rank's batches of epoch ``epoch``."""
        return MixLoader(self, batch_size, rank, world_size, drop_last, epoch)

    def close(self):
        for d in self.sources:
            d.close()


class MixLoader:
    """One rank's batches of a mixture epoch, with a state to resume from: iterate it for the
    epoch's batches (``len()`` of them, the same on every rank). A batch counts as consumed once
    it is handed out (the trainer processes it before it saves a checkpoint): ``state_dict()``
    is then the same on every rank and holds every source's cursor; ``load_state_dict(state)``,
    on any world size, makes the next pass continue that epoch from there. A pass broken off
    continues where it stopped; after a pass has run to its end the next one starts the epoch
    from its start (call ``set_epoch`` first for the next epoch). ``set_epoch`` of the epoch of a
    state just loaded keeps its position, so the usual loop, ``load_state_dict(state)`` then
    ``for epoch in range(start_epoch, epochs): set_epoch(epoch)``, continues that epoch."""

    def __init__(self, mixture, batch_size, rank=0, world_size=1, drop_last=False, epoch=0):
        self.mixture = mixture
        self.batch_size, self.rank, self.world_size = int(batch_size), int(rank), int(world_size)
        self.drop_last = bool(drop_last)
        self._loaded = None  # the epoch of a state loaded and not read yet
        self._restart(_uint("epoch", epoch), 0)

    def _restart(self, epoch, start):
        self.epoch = epoch
        self._plan = self.mixture.plan(self.batch_size, self.rank, self.world_size, self.drop_last, start)
        self._handed = 0  # batches of the plan handed out
        self._ended = False

    def set_epoch(self, epoch):
        e = _uint("epoch", epoch)
        if self._loaded is not None and e == self._loaded == self.epoch:
            return  # the loaded state's epoch: continue it from its position
        self._loaded = None
        self._restart(e, 0)

    def __len__(self):
        """Batches of the next pass (from a loaded state's position: the rest of the epoch)."""
        if self._ended:
            return self.mixture.plan(self.batch_size, self.rank, self.world_size, self.drop_last, 0).batches()
        return self._plan.batches() - self._handed

    def __iter__(self):
        self._loaded = None
        if self._ended:
            self._restart(self.epoch, 0)
        plan = self._plan
        while self._handed < plan.batches():
            src, rec = self.mixture.batch_refs(plan, self.epoch, self._handed)
            batch = self.mixture.read(src, rec)
            self._handed += 1
            yield batch
        self._ended = True

    def state_dict(self):
        """The state once the batches handed out so far are processed."""
        return self.mixture.state(self.epoch, self._plan.position_after(self._handed))

    def load_state_dict(self, state):
        epoch, position = self.mixture.restore(state)
        self._restart(epoch, position)
        self._loaded = epoch


def mix(sources, weights, seed=0, epoch_size=None, replacement=True, shuffle=True, collate=None):
    """A weighted mixture of packed datasets (paths or opened datasets), read as shard/ORDER.md
    "Mixtures" specifies, the same order as the Go reader's.

    ``weights``: one positive number per source (only their ratios matter). ``epoch_size``: the
    mixture's records per epoch, all ranks together (default: the sources' records summed with
    replacement; without, the longest epoch in which no source runs out). ``replacement``
    (default True): a source drawn past its end starts its next source epoch (repeated), and a
    source whose share is smaller than it is subsampled, the next mixture epoch continuing where
    this one stopped; False: every mixture epoch reads each source at most once, from the start
    of its own epoch (a new subset each epoch). ``shuffle`` (default True): each source in its
    shuffled version 2 order. Sources of different record shapes, types or fields need
    ``collate(items)``, given a list of ``(source, record, ds[record])`` per batch.
    Returns a :class:`Mix`; ``.loader(batch_size, rank, world_size)`` reads it."""
    return Mix(sources, weights, seed, epoch_size, replacement, shuffle, collate)


def mix_plan(sources, weights, seed=0, epoch_size=None, replacement=True, shuffle=True, epoch=0, batch_size=None,
             world_size=1, drop_last=False):
    """The realised proportions and epoch length of a mixture (``packer mix-plan``), as a dict
    (:meth:`Mixture.summary`). ``sources`` are dataset paths, opened datasets or record counts."""
    counts = [s if isinstance(s, (int, np.integer)) else len(_open(s)) for s in sources]
    m = Mixture(counts, weights, seed, epoch_size, replacement, shuffle)
    return m.summary(epoch, batch_size, world_size, drop_last)
