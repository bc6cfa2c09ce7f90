"""PyTorch integration: an ``IterableDataset`` over a packer dataset.

The order is shard/ORDER.md version 2 (the default; ``order_version=1`` keeps version 1): with
``shuffle=True`` a keyed permutation of all records, cut into global batches of
``batch_size * world_size`` records of which rank ``r`` takes the ``r``-th part, so every rank
yields the same number of batches of the same sizes (the last, partial global batch padded by
repeating a few records, or dropped with ``drop_last=True``). DataLoader worker ``w`` of ``nw``
produces the rank's batches ``w, w+nw, ...`` whole, so the worker count never changes a batch,
and the Go and Python readers agree on the order. Batching happens inside the dataset (large
reads), so give the DataLoader ``batch_size=None``.

The short way, :func:`loader`, returns a DataLoader configured as the notes below ask
(``batch_size=None``, rank and world resolved, pinned memory on CUDA, batches moved to the device
and passed through ``transform``)::

    from packer_reader.torch import loader, random_resized_crop_flip

    train = loader("out/", batch_size=256, shuffle=True, seed=42, drop_last=True,
                   transform=random_resized_crop_flip(224))  # device: CUDA when available
    for epoch in range(10):
        train.set_epoch(epoch)
        for images, labels in train:               # float32 [B, 3, 224, 224], int64 [B], on the device
            ...

``len(train)`` counts batches (PyTorch's unit); ``train.num_records()`` counts records, the unit
of Go's ``shard.Loader.Len``.

Complete training loop with the dataset and a DataLoader of your own::

    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader
    from packer_reader.torch import PackerIterableDataset

    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = PackerIterableDataset("out/", batch_size=256, shuffle=True, seed=42, drop_last=True,
                                 pin_memory=(device == "cuda"))  # read straight into pinned memory
    loader = DataLoader(data, batch_size=None, num_workers=0)
    # With worker processes instead (only worth it with heavy per-batch Python work):
    #   data = PackerIterableDataset(..., num_workers=2)
    #   loader = DataLoader(data, batch_size=None, num_workers=2, pin_memory=(device == "cuda"))
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(len(data.classes))).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        data.set_epoch(epoch)                      # new shuffle each epoch, same on every rank
        for images, labels in loader:              # uint8 [B, H, W, C] and int64 [B]
            images = images.to(device, non_blocking=True).float().div_(255)
            labels = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

Each rank reads its own slice automatically: rank and world size come from ``torch.distributed``
when it is initialised, else from the ``RANK`` and ``WORLD_SIZE`` environment variables (torchrun),
or pass ``rank=`` and ``world_size=``. They are resolved in the trainer's process and carried into
the DataLoader workers, so the split is right whatever the workers' start method (``spawn`` and
``forkserver`` workers, where torch.distributed is not initialised, included). ``len(loader)``
is the number of batches every rank yields.

The DataLoader must be created with ``batch_size=None``: the dataset yields whole batches.
``DataLoader(dataset)`` (default ``batch_size=1``) or ``DataLoader(dataset, batch_size=B)`` is
refused at the first batch with a message saying so, instead of stacking batches.

Checkpoints: ``loader(...).state_dict()`` is ``{"version": 1, "order": 2, "seed", "epoch",
"position", "records", "shuffle"}`` (the global position: records of the epoch consumed by all ranks
together; the dataset's record count and the shuffle setting, checked on load), the same on every
rank; ``load_state_dict(state)`` continues the epoch in a run with any number of ranks and
workers, every record read exactly once. ``PackerIterableDataset`` has the same pair, exact when it
is iterated without DataLoader workers. Without a state, ``set_epoch(e)`` and ``set_start(n)`` with
the number of batches this rank already yielded in that epoch resume on the same ranks.

Tensors: every yielded tensor owns its memory; the reader reads each batch straight into it.
In DataLoader workers that memory is shared memory, so the batch reaches the main process as a
handle, not a copy. ``pin_memory=True`` without worker processes (and with CUDA) reads straight
into pinned memory; with ``num_workers > 0`` use the DataLoader's own ``pin_memory=True``
(pinning happens in the main process, one copy)."""

import os
import sys

try:
    import torch as _torch
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info
except ImportError as _e:  # say what to install instead of a bare ModuleNotFoundError
    raise ImportError("packer_reader.torch needs PyTorch: pip install \"packer_reader[torch]\" "
                      "(or apt install python3-torch, or the build for your CUDA from pytorch.org)") from _e

from ._dataset import _alias
from ._errors import FormatError
from ._formats import open_dataset

__all__ = ["loader", "PackerLoader", "PackerIterableDataset", "random_resized_crop_flip", "split_for_worker",
           "resolve_rank", "collate_detection"]


def _epoch_i64(epoch):
    """An epoch (u64, as Go's LoaderState.Epoch) as the signed 64-bit value the shared state
    tensor holds; a negative, too large or non-integer epoch is refused naming it."""
    if isinstance(epoch, bool) or not hasattr(epoch, "__index__"):
        raise TypeError("epoch %r is not an integer" % (epoch,))
    e = epoch.__index__()
    if not 0 <= e < 1 << 64:
        raise ValueError("epoch %d is outside [0, 2^64)" % e)
    return e - (1 << 64) if e >= 1 << 63 else e


def _state_int(state, key, hi=1 << 64):
    """state[key] as an int in [0, hi): a float, a bool or a string (an edited or damaged
    checkpoint) is refused naming the key, as Go's JSON decoding refuses it."""
    v = state.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("loader state %s %r is not an integer" % (key, v))
    if not 0 <= v < hi:
        raise ValueError("loader state %s %d is outside [0, %d)" % (key, v, hi))
    return v


def resolve_rank(rank=None, world_size=None):
    """(rank, world_size) of this process: the given values, else torch.distributed's when it is
    initialised, else the ``RANK`` and ``WORLD_SIZE`` environment variables (torchrun sets
    them) when set, else (0, 1)."""
    if rank is not None and world_size is not None:
        return int(rank), int(world_size)
    dist = getattr(_torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        r, w = dist.get_rank(), dist.get_world_size()
    elif os.environ.get("RANK", "").strip() and os.environ.get("WORLD_SIZE", "").strip():
        try:
            r, w = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        except ValueError:
            raise ValueError("RANK=%r / WORLD_SIZE=%r in the environment are not integers"
                             % (os.environ["RANK"], os.environ["WORLD_SIZE"]))
    else:
        r, w = 0, 1
    return int(r if rank is None else rank), int(w if world_size is None else world_size)


def split_for_worker(rank=None, world_size=None):
    """(rank', world', w, nw) of the calling DataLoader worker as ORDER.md defines, from the
    given rank/world_size (else :func:`resolve_rank`) and torch's worker info."""
    rank, world_size = resolve_rank(rank, world_size)
    info = get_worker_info()
    w, nw = (info.id, info.num_workers) if info is not None else (0, 1)
    return rank * nw + w, world_size * nw, w, nw


def _caller_auto_collates():
    """True when the DataLoader asking for our iterator batches what we yield with its default
    collate function: DataLoader(ds, batch_size=B), or DataLoader(ds), whose default is
    batch_size=1. Our items are whole batches already, so that would stack batches."""
    try:
        from torch.utils.data._utils.collate import default_collate
        from torch.utils.data._utils.fetch import _BaseDatasetFetcher
    except ImportError:  # another torch layout: no check, as before
        return False
    f = sys._getframe(2)  # 0: this function, 1: __iter__, 2: who called iter(dataset)
    fetcher = f.f_locals.get("self") if f is not None else None
    return (isinstance(fetcher, _BaseDatasetFetcher) and getattr(fetcher, "auto_collation", False)
            and getattr(fetcher, "collate_fn", None) is default_collate)


def _caller_loader_workers():
    """The num_workers of the DataLoader whose len() asks for ours (DataLoader.__len__ calls
    len(dataset)), or 0 when len() was asked by someone else."""
    try:
        from torch.utils.data import DataLoader
    except ImportError:
        return 0
    f = sys._getframe(2)  # 0: this function, 1: __len__, 2: who called len(dataset)
    loader = f.f_locals.get("self") if f is not None else None
    return int(loader.num_workers) if isinstance(loader, DataLoader) else 0


class PackerIterableDataset(IterableDataset):
    """Yields ``(images, labels)`` batches as tensors (``[B, ...]`` and int64 ``[B]``).

    Arguments: ``path`` (packer output directory, or ``s3://bucket/prefix``), ``batch_size``, ``shuffle``, ``seed``,
    ``epoch``, ``drop_last``, ``buffer_size`` (shuffle buffer, records), ``rank``/``world_size``
    (default: torch.distributed when initialised, else the RANK/WORLD_SIZE environment
    variables, else 0/1; resolved in the trainer's process and carried into DataLoader
    workers), ``pin_memory``, ``start`` (batches already consumed this epoch, see set_start),
    ``verify_crc`` (default True: record CRC-32C checked; False skips it), ``prefetch``
    (batches read ahead per worker by a background thread; None, the default: as in
    ``Dataset.batches``, a thread once the loop has work of its own to overlap), ``direct``
    (O_DIRECT reads), ``cache_dir`` (bucket datasets: local copies of the objects, see
    ``packer_reader.open``), ``num_workers`` (the DataLoader's worker count, for ``len()``, since
    each worker has its own last batch; a DataLoader with another count is refused at the first
    batch; order_version=1 only), ``order_version`` (2, the default, or 1: shard/ORDER.md; under 2
    ``start`` is the global position of :meth:`state_dict` and ``buffer_size`` is unused),
    ``pad`` (a dataset with fields: variable ndarray fields padded, as ``Dataset.batches``).

    A dataset with fields yields dicts of tensors (``Dataset.batches``'s dicts, every array a
    tensor; text, json and bytes stay Python lists)."""

    def __init__(self, path, batch_size, shuffle=False, seed=0, epoch=0, drop_last=False, buffer_size=4096,
                 rank=None, world_size=None, pin_memory=False, start=0, verify_crc=True, prefetch=None,
                 direct=False, num_workers=None, world=None, buffer=None, cache_dir=None, order_version=2,
                 pad=False):
        super().__init__()
        self.pad = bool(pad)
        if order_version not in (1, 2):
            raise ValueError("order_version=%r: the reading orders are 1 and 2 (shard/ORDER.md)" % (order_version,))
        self.order_version = order_version
        self._consumed = 0  # batches handed out by this process's own iterator (state_dict)
        self._pass_start = 0  # the position the pass they came from started at
        # The epoch of a resume position given by load_state_dict or set_start and not read yet:
        # set_epoch of that epoch keeps the position (the usual loop calls it after loading).
        self._resume_epoch = None
        if world is not None:  # the Go API's names (LoaderOptions.World, Buffer)
            if world_size is not None and world_size != world:
                raise TypeError("world_size=%r and world=%r given: they are the same setting, pass one"
                                % (world_size, world))
            world_size = world
        buffer_size = _alias(buffer_size, buffer, 4096, "buffer_size", "buffer")
        self.num_workers = num_workers
        self.path = str(path)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self._seed0 = int(seed)  # until _state exists (the seed property)
        self.drop_last = drop_last
        self.buffer_size = buffer_size
        self.rank = rank
        self.world_size = world_size
        self.pin_memory = pin_memory
        # epoch and resume position live in shared memory, so set_epoch/set_start reach
        # persistent DataLoader workers too (they hold their own copy of this object). The
        # position is, under order_version=2, the global position of ORDER.md (records of the
        # epoch consumed by all ranks together); under 1, batches this rank already yielded.
        # The third value is 1 while DataLoader worker processes iterate this dataset: its own
        # state_dict() then cannot know what the trainer consumed.
        # The fourth is the seed (as a signed 64-bit value): load_state_dict sets it, and it must
        # reach persistent workers too.
        s64 = self._seed0 & ((1 << 64) - 1)
        self._state = _torch.tensor([_epoch_i64(epoch), 0, 0, s64 - (1 << 64) if s64 >= 1 << 63 else s64],
                                    dtype=_torch.int64).share_memory_()
        self.verify_crc = verify_crc
        self.prefetch = prefetch
        self.direct = direct
        self.cache_dir = cache_dir
        self._ds = None
        self._pid = None
        self._pin = None
        ds = self._dataset()  # fail early on a bad path, and expose the metadata
        # Every process opens the dataset again (workers, each epoch of non-persistent ones):
        # each must open this one, not one that replaced it since (packer build --force).
        self._pin = (ds.manifest or {}).get("manifest_sha256")
        self.classes = ds.classes
        self.sample_spec = ds.sample_spec
        self.fields = ds.fields
        self.count = len(ds)
        ds.close()  # workers open their own (h5py handles must not cross a fork)
        self._ds = None
        if start:
            self.set_start(start)

    def _dataset(self):
        if self._ds is None or self._pid != os.getpid():  # one open dataset per process
            ds = open_dataset(self.path, verify_crc=self.verify_crc, direct=self.direct,
                              cache_dir=getattr(self, "cache_dir", None))
            pin = getattr(self, "_pin", None)
            now = (ds.manifest or {}).get("manifest_sha256")
            if pin is not None and now != pin:
                ds.close()
                raise FormatError(self.path, "the dataset was replaced since this PackerIterableDataset was made "
                                  "(manifest_sha256 %s, now %s): its records are not the ones counted; make a new one"
                                  % (pin, now))
            self._ds = ds
            self._pid = os.getpid()
        return self._ds

    def __getstate__(self):
        st = self.__dict__.copy()
        st["_ds"] = None
        st["_pid"] = None
        if get_worker_info() is None:
            # Pickled in the trainer's process to start a DataLoader worker (spawn or
            # forkserver): torch.distributed is not initialised in the worker, so carry the rank
            # and world size resolved here.
            st["_carried"] = resolve_rank(self.rank, self.world_size)
        return st

    def _rank_world(self):
        """This rank and world size: inside a worker, the ones carried from the trainer's
        process (or explicit); else resolved now."""
        carried = self.__dict__.get("_carried")
        if carried is not None and get_worker_info() is not None:
            return resolve_rank(carried[0] if self.rank is None else self.rank,
                                carried[1] if self.world_size is None else self.world_size)
        return resolve_rank(self.rank, self.world_size)

    def _split(self):
        r, W = self._rank_world()
        info = get_worker_info()
        w, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        if info is not None and self.num_workers is not None and self.num_workers != nw:
            raise ValueError("PackerIterableDataset(num_workers=%d) but the DataLoader runs %d workers: "
                             "give both the same number (len() depends on it)" % (self.num_workers, nw))
        if not 0 <= r < W:
            raise ValueError("rank %d is not in [0, world_size=%d)" % (r, W))
        return r * nw + w, W * nw, w, nw

    @property
    def seed(self):
        return int(self._state[3]) & ((1 << 64) - 1)

    @seed.setter
    def seed(self, value):
        v = int(value) & ((1 << 64) - 1)
        self._state[3] = v - (1 << 64) if v >= 1 << 63 else v

    @property
    def epoch(self):
        return int(self._state[0]) & ((1 << 64) - 1)

    @property
    def start(self):
        return int(self._state[1])

    def set_epoch(self, epoch):
        """Select the epoch (changes the shuffle) and read it from its start. Reaches persistent
        workers too. A resume position given for this same epoch by load_state_dict or
        set_start, whose pass has not started yet, is kept: the usual loop, ``load_state_dict``
        then ``for epoch in range(start_epoch, epochs): set_epoch(epoch)``, continues the
        checkpoint's epoch where it stopped instead of reading its consumed batches again."""
        e64 = _epoch_i64(epoch)
        e = e64 & ((1 << 64) - 1)
        if self._resume_epoch is not None and e == self._resume_epoch == self.epoch:
            return
        self._resume_epoch = None
        self._state[0] = e64
        self._state[1] = 0
        self._consumed, self._pass_start = 0, 0

    def set_start(self, batches_consumed):
        """Resume the current epoch after this many batches already yielded by this rank since
        the epoch's start (under order_version=2 every rank has yielded as many)."""
        b = int(batches_consumed)
        if b < 0:
            raise ValueError("set_start(%d): batches consumed cannot be negative" % b)
        if self.order_version == 2:
            self._state[1] = self._plan(0).position_after(b)
        else:
            self._state[1] = b
        self._consumed, self._pass_start = 0, self.start
        self._resume_epoch = self.epoch

    def _plan(self, start):
        from . import _order

        r, W = self._rank_world()
        return _order.Plan(self.count, min(int(start), self.count), self.batch_size, r, W, self.drop_last)

    def state_dict(self):
        """The loader state of ORDER.md v2 after the batches this object's own iterator handed
        out (no DataLoader workers; with workers use the loader's, :meth:`PackerLoader.state_dict`,
        which counts in the trainer's process): the same on every rank, and loadable into a run
        with any number of ranks and workers. Called inside a DataLoader worker (as torchdata's
        StatefulDataLoader does) it returns that worker's state instead, which only that worker
        of the same number of workers can load."""
        if self.order_version != 2:
            raise ValueError("state_dict() needs order_version=2 (a version 1 position is per rank and worker)")
        info = get_worker_info()
        if info is not None:
            return self._worker_state(info)
        if int(self._state[2]):
            raise ValueError("PackerIterableDataset.state_dict(): the dataset is read by DataLoader worker "
                             "processes, so it cannot tell which batches the trainer consumed; take the state "
                             "from the DataLoader that loader() returns (loader(...).state_dict()), which counts "
                             "them in the trainer's process")
        return self._state_after(self._consumed, self._pass_start)

    def _worker_state(self, info):
        """state_dict() called inside a DataLoader worker, as torchdata's StatefulDataLoader does:
        it snapshots each worker's dataset with the batches that worker sent, and hands each state
        back to the same worker on resume. This worker's share of the pass (ORDER.md v2: batches
        j = w, w + nw, ... of the pass started at `position`) is counted in `worker_batches`; the
        epoch's global position is known only to the trainer's process (the loader's state)."""
        from . import _order

        epoch, seed, start, k0 = self.__dict__.get("_wpass") or (self.epoch, self.seed, self.start, 0)
        return {"version": _order.STATE_VERSION, "order": 2, "seed": int(seed), "epoch": int(epoch),
                "position": int(start), "records": self.count, "shuffle": bool(self.shuffle),
                "worker": info.id, "num_workers": info.num_workers, "worker_batches": int(k0 + self._consumed)}

    def _load_worker_state(self, state, info):
        """load_state_dict() of a state from _worker_state, inside the worker it was taken in (the
        same worker id of the same number of workers): this worker's next pass goes on after its
        `worker_batches` batches of the pass that started at `position`."""
        for key in ("worker", "num_workers", "worker_batches"):
            if not isinstance(state.get(key), int) or state[key] < 0:
                raise ValueError("worker loader state without a valid %r: %r" % (key, state))
        if info is None:
            raise ValueError("a DataLoader worker's loader state (worker %d of %d) is loaded by that worker "
                             "(torchdata's StatefulDataLoader does); to continue an epoch here, load the "
                             "loader's own state (loader(...).state_dict())" % (state["worker"], state["num_workers"]))
        if (state["worker"], state["num_workers"]) != (info.id, info.num_workers):
            raise ValueError("the loader state of worker %d of %d cannot resume worker %d of %d: resume with "
                             "the same number of DataLoader workers" % (state["worker"], state["num_workers"],
                                                                         info.id, info.num_workers))
        pos = _state_int(state, "position")
        if not 0 <= pos <= self.count:
            raise ValueError("loader state position %d is outside this dataset's %d records" % (pos, self.count))
        # Kept in this worker's own copy, not in the shared state: every worker has its own.
        self._wresume = (_state_int(state, "epoch"), _state_int(state, "seed"), pos, int(state["worker_batches"]))

    def _state_after(self, consumed, start):
        """The state once `consumed` batches of a pass started at global position `start` are."""
        from . import _order

        return {"version": _order.STATE_VERSION, "order": 2, "seed": int(self.seed), "epoch": self.epoch,
                "position": int(self._plan(start).position_after(consumed)), "records": self.count,
                "shuffle": bool(self.shuffle)}

    def _check_run(self, state):
        """Refuse a state saved by a run over another number of records or with the other
        shuffle setting (ORDER.md, "Loader state and resume"); one without "records" (an earlier
        reader's) is not checked."""
        if "records" not in state:
            return
        if _state_int(state, "records") != self.count:
            raise ValueError("the loader state is of a dataset of %r records, %s has %d: its position does not "
                             "continue this dataset's epoch" % (state["records"], self.path, self.count))
        if bool(state.get("shuffle")) != bool(self.shuffle):
            raise ValueError("the loader state is of a run with shuffle=%s, this one has shuffle=%s: its position "
                             "would select other records than the ones not read yet"
                             % (bool(state.get("shuffle")), bool(self.shuffle)))

    def _pass_ended(self, start):
        """A pass started at `start` ran to its end, seen in the trainer's process: the resume
        position was for that pass only, so the next one reads the whole epoch (and len() counts
        it), unless the position was set again meanwhile."""
        if self.start == start:
            self._state[1] = 0
            self._resume_epoch = None

    def load_state_dict(self, state):
        """Continue the epoch of a state from :meth:`state_dict` (of any rank of a run with any
        number of ranks and workers): seed, epoch and global position."""
        from . import _order

        if not isinstance(state, dict) or state.get("version") != _order.STATE_VERSION or state.get("order") != 2:
            raise ValueError("not a packer loader state of version %d and reading order 2: %r"
                             % (_order.STATE_VERSION, state))
        if self.order_version != 2:
            raise ValueError("load_state_dict() needs order_version=2")
        self._check_run(state)
        if "worker" in state:
            return self._load_worker_state(state, get_worker_info())
        pos = _state_int(state, "position")
        if not 0 <= pos <= self.count:
            raise ValueError("loader state position %d is outside this dataset's %d records" % (pos, self.count))
        e64 = _epoch_i64(_state_int(state, "epoch"))
        self.seed = _state_int(state, "seed")
        self._state[0] = e64
        self._state[1] = pos
        self._consumed, self._pass_start = 0, pos
        self._resume_epoch = self.epoch

    def _worker_batches(self, w, nw, start):
        # batches worker w already delivered when `start` batches came round-robin from nw workers
        return max(0, -(-(start - w) // nw))

    def __len__(self):
        """Batches this rank yields per epoch, all its workers together (under order_version=1:
        with the constructor's num_workers when given, else, when asked by a DataLoader
        (``len(loader)``), with that DataLoader's num_workers, else for one reader; under 2 the
        worker count does not matter). Under order_version=2 it counts from the resume position
        (load_state_dict, set_start) while that pass is due or running: the batches the pass
        yields; the whole epoch's once it ran to its end, or after set_epoch. Under 1 it ignores
        set_start. (Batches, as PyTorch wants of ``len(loader)``; :meth:`num_records` counts
        records, as Go's ``Loader.Len``.)"""
        return self._count(_caller_loader_workers())[0]  # asks who called len()

    def num_records(self):
        """Records this rank yields per epoch, all its workers together (less dropped last
        batches, plus the padding of the last under order_version=2), the unit Go's
        ``shard.Loader.Len`` counts; under order_version=2 from the resume position, as
        ``len()``."""
        return self._count(0)[1]

    def _count(self, caller_workers):
        from . import _order

        if self.order_version == 2:
            p = self._plan(self.start)
            return p.batches(), p.records()
        info = get_worker_info()
        if info is not None:
            nw = info.num_workers
        elif self.num_workers is not None:
            nw = max(1, self.num_workers)
        else:
            nw = max(1, caller_workers)
        r, W = self._rank_world()
        batches = records = 0
        for w in range(nw):
            lo, hi = _order.rank_bounds(self.count, r * nw + w, W * nw)
            n = hi - lo
            b = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            batches += b
            records += min(n, b * self.batch_size)
        return batches, records

    def __iter__(self):
        if _caller_auto_collates():
            raise ValueError(
                "PackerIterableDataset yields whole batches (batch_size=%d, set on the dataset), so the "
                "DataLoader must not batch them again: write DataLoader(dataset, batch_size=None, ...) "
                "(DataLoader(dataset) defaults to batch_size=1 and DataLoader(dataset, batch_size=B) "
                "would stack B batches)" % self.batch_size)
        self._resume_epoch = None  # the resume position is being read: set_epoch resets it again
        return self._batches()

    def _batches(self):
        if self.order_version == 2:
            yield from self._batches_v2()
            return
        rp, wp, w, nw = self._split()
        # The DataLoader always asks worker 0 first. After resuming at batch `start`, the next
        # batch is due from the ORDER.md reader start % nw, so worker w plays reader
        # (w + start) % nw: the resumed sequence of batches is the uninterrupted one.
        epoch, start = self.epoch, self.start
        v = (w + start) % nw
        rp = rp - w + v
        ds = self._dataset()
        start_records = self._worker_batches(v, nw, start) * self.batch_size
        in_worker = get_worker_info() is not None
        pin = self.pin_memory and not in_worker and _torch.cuda.is_available()
        tensors = (_TensorBuffers(shared=in_worker, pinned=pin) if (in_worker or pin) and ds.fixed and not ds.schema
                   else None)
        it = ds.batches(self.batch_size, shuffle=self.shuffle, seed=self.seed, epoch=epoch, rank=rp,
                        world_size=wp, drop_last=self.drop_last, buffer_size=self.buffer_size,
                        start=start_records, copy=True, prefetch=self.prefetch,
                        alloc=tensors.alloc if tensors is not None else None, order_version=1, pad=self.pad)
        yield from self._tensors(it, tensors, pin)

    def _batches_v2(self):
        from . import _order

        # ORDER.md v2: this rank's batches from the global position; worker w of nw takes
        # batches w, w+nw, ... (the DataLoader asks the workers in turn, from worker 0).
        r, W, w, nw = self._split_v2()
        epoch, seed, start = self.epoch, self.seed, self.start
        ds = self._dataset()
        in_worker = get_worker_info() is not None
        if in_worker:
            # A worker's own resume point (StatefulDataLoader), once; its state_dict() counts this
            # worker's batches of the pass from here.
            epoch, seed, start, k0 = self.__dict__.pop("_wresume", None) or (epoch, seed, start, 0)
            self._wpass = (epoch, seed, start, k0)
            if k0:
                # Worker w's batch w + k0*nw of the pass from `start` is batch w of the pass
                # from the position after k0*nw batches: the same batches, the same contents.
                start = _order.Plan(self.count, start, self.batch_size, r, W, self.drop_last).position_after(k0 * nw)
        pin = self.pin_memory and not in_worker and _torch.cuda.is_available()
        tensors = (_TensorBuffers(shared=in_worker, pinned=pin) if (in_worker or pin) and ds.fixed and not ds.schema
                   else None)
        self._state[2] = 1 if in_worker else 0
        it = ds.batches(self.batch_size, shuffle=self.shuffle, seed=seed, epoch=epoch, rank=r,
                        world_size=W, drop_last=self.drop_last, start=start, copy=True, prefetch=self.prefetch,
                        alloc=tensors.alloc if tensors is not None else None, order_version=2,
                        worker=w, num_workers=nw, pad=self.pad)
        self._consumed, self._pass_start = 0, start
        for batch in self._tensors(it, tensors, pin):
            self._consumed += 1  # handed out: counted before the caller sees it
            yield batch
        if not in_worker:
            self._pass_ended(start)

    def _split_v2(self):
        r, W = self._rank_world()
        info = get_worker_info()
        w, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        if not 0 <= r < W:
            raise ValueError("rank %d is not in [0, world_size=%d)" % (r, W))
        return r, W, w, nw

    def _tensors(self, it, tensors, pin):
        for batch in it:
            if isinstance(batch, dict):  # a dataset with fields
                yield _map_arrays(batch, lambda a: _torch.from_numpy(a).pin_memory() if pin else _torch.from_numpy(a))
                continue
            images, labels = batch
            if isinstance(images, list):
                x = [_torch.from_numpy(a) for a in images]
                if pin:
                    x = [t.pin_memory() for t in x]
            elif tensors is not None:
                x = tensors.view(images)  # the batch was read straight into shared/pinned memory
            else:
                x = _torch.from_numpy(images)
            y = _torch.from_numpy(labels)
            if pin:
                y = y.pin_memory()
            yield x, y


_TORCH_DTYPES = {"uint8": _torch.uint8, "float16": _torch.float16, "float32": _torch.float32}


def _map_arrays(batch, fn):
    """The batch dict with fn applied to every array, in lists too (per-record arrays); str,
    bytes and parsed json values stay as they are."""
    import numpy as np

    out = {}
    for k, v in batch.items():
        if isinstance(v, (np.ndarray, _torch.Tensor)):
            out[k] = fn(v)
        elif isinstance(v, list) and v and all(isinstance(x, (np.ndarray, _torch.Tensor)) for x in v):
            out[k] = [fn(x) for x in v]
        else:
            out[k] = v
    return out


class _TensorBuffers:
    """Batch memory owned by torch: shared memory in DataLoader workers (the batch then crosses
    to the main process as a handle, not a copy) or pinned memory (host-to-device copies are
    async DMA). The reader reads records straight into it."""

    def __init__(self, shared, pinned):
        import threading

        self.shared = shared
        self.pinned = pinned
        self.live = {}
        self.lock = threading.Lock()

    def alloc(self, nbytes):
        if self.shared:
            t = _torch.empty(0, dtype=_torch.uint8).set_(_torch.UntypedStorage._new_shared(nbytes))
        else:
            t = _torch.empty(nbytes, dtype=_torch.uint8, pin_memory=self.pinned)
        a = t.numpy()
        with self.lock:
            self.live[a.ctypes.data] = t
        return a

    def view(self, images):
        p = images.ctypes.data
        with self.lock:
            for base, t in self.live.items():
                if base <= p < base + t.numel():
                    del self.live[base]  # each buffer carries one batch (copy=True)
                    break
            else:
                raise RuntimeError("packer_reader: batch memory not found")
        off = p - base
        x = t[off:off + images.nbytes].view(_TORCH_DTYPES[images.dtype.name])
        return x.view(images.shape)


# -- the one-call loader ----------------------------------------------------------------------

def _resolve_device(device):
    if device is None:
        return _torch.device("cuda" if _torch.cuda.is_available() else "cpu")
    return _torch.device(device)


class PackerLoader(DataLoader):
    """The DataLoader :func:`loader` returns: a ``torch.utils.data.DataLoader`` over a
    :class:`PackerIterableDataset` (``batch_size=None`` underneath) that moves every batch to
    ``device`` and applies ``transform`` there. ``len(loader)`` is batches per epoch for this
    rank; ``set_epoch``/``set_start`` reach the dataset (and persistent workers)."""

    def __init__(self, dataset, device, transform=None, **kwargs):
        super().__init__(dataset, batch_size=None, **kwargs)
        self.device = device
        self.transform = transform
        self._consumed = 0  # batches handed out in this epoch's pass, counted here
        self._pass_start = dataset.start  # the global position that pass started at

    def state_dict(self):
        """The loader state (ORDER.md v2: seed, epoch, global position) after the batches this
        loader handed out, counted in the trainer's process whatever the worker count. The same
        on every rank; :meth:`load_state_dict` continues it in a run with any number of ranks
        and workers, every record of the epoch read exactly once."""
        if self.dataset.order_version != 2:
            raise ValueError("state_dict() needs order_version=2 (a version 1 position is per rank and worker)")
        return self.dataset._state_after(self._consumed, self._pass_start)

    def load_state_dict(self, state):
        """Continue the epoch of a state from :meth:`state_dict`; reaches persistent workers."""
        self.dataset.load_state_dict(state)
        self._consumed, self._pass_start = 0, self.dataset.start

    def set_epoch(self, epoch):
        """Select the epoch (a new shuffle, the same on every rank); call before each epoch. A
        state loaded for this same epoch and not read yet is kept (see
        :meth:`PackerIterableDataset.set_epoch`)."""
        self.dataset.set_epoch(epoch)
        self._consumed, self._pass_start = 0, self.dataset.start

    def set_start(self, batches_consumed):
        """Resume the current epoch after this many batches already yielded by this rank."""
        self.dataset.set_start(batches_consumed)
        self._consumed, self._pass_start = 0, self.dataset.start

    def num_records(self):
        """Records per epoch for this rank (Go's ``Loader.Len`` unit); ``len()`` counts batches."""
        return self.dataset._count(self.num_workers)[1]

    @property
    def classes(self):
        return self.dataset.classes

    @property
    def fields(self):
        """The dataset's fields schema (``[]`` without fields; see :func:`collate_detection`)."""
        return self.dataset.fields

    def __iter__(self):
        dev = self.device
        blocking = dev.type != "cuda"
        self._consumed, self._pass_start = 0, self.dataset.start
        self.dataset._resume_epoch = None
        for x in super().__iter__():
            self._consumed += 1
            if isinstance(x, dict):  # a dataset with fields: every tensor to the device
                x = _map_arrays(x, lambda t: t.to(dev, non_blocking=not blocking))
                yield self.transform(x) if self.transform is not None else x
                continue
            x, y = x
            if isinstance(x, list):  # variable-size records: one tensor each
                x = [t.to(dev, non_blocking=not blocking) for t in x]
            else:
                x = x.to(dev, non_blocking=not blocking)
            y = y.to(dev, non_blocking=not blocking)
            if self.transform is not None:
                x = self.transform(x)
            yield x, y
        if self.dataset.order_version == 2:
            self.dataset._pass_ended(self._pass_start)


def loader(path, batch_size, shuffle=False, seed=0, drop_last=False, device=None, num_workers=0,
           transform=None, rank=None, world_size=None, epoch=0, buffer_size=4096, verify_crc=True,
           prefetch=None, direct=False, persistent_workers=None, world=None, buffer=None, cache_dir=None,
           order_version=2, pad=False, **dataloader_kwargs):
    """A DataLoader over the packer dataset at ``path``, configured so the usual mistakes cannot
    be made. Yields ``(images, labels)`` on ``device`` (default: CUDA when available, else CPU):
    images ``[B, *shape]`` in the stored dtype (a list of tensors for variable-size records),
    labels int64 ``[B]``, each passed through ``transform(images)`` on the device when given.

    - ``batch_size=None`` underneath: the dataset reads whole batches in large contiguous reads;
    - rank and world size resolved (``rank=``/``world_size=``, else torch.distributed, else the
      ``RANK``/``WORLD_SIZE`` variables torchrun sets, else 0/1) and carried into workers;
    - pinned host memory when ``device`` is CUDA (read straight into it without workers, pinned
      by the DataLoader with them), copies to the device ``non_blocking``;
    - ``loader.set_epoch(e)`` before each epoch reshuffles, also in persistent workers
      (``persistent_workers`` defaults to True when ``num_workers > 0``);
    - ``len(loader)`` is the number of batches this rank yields per epoch (PyTorch's unit for
      schedulers); ``loader.num_records()`` is records, the unit of Go's ``Loader.Len``.

    A dataset with fields (``loader.fields``) yields dicts instead, as ``Dataset.batches`` does,
    with every array a tensor on ``device`` (lists of per-record tensors for variable fields;
    text, json and bytes stay Python lists), and ``transform`` receives the whole dict; pass
    ``pad=True`` for padded variable fields. :func:`collate_detection` turns a batch into
    torchvision's detection inputs.

    ``device="cuda"`` (and the default on a CUDA machine) is the current CUDA device: in
    multi-GPU training call ``torch.cuda.set_device(local_rank)`` first, or pass
    ``device=f"cuda:{local_rank}"``.

    ``path`` may be ``s3://bucket/prefix`` (see python/README.md, "Reading from a bucket");
    ``cache_dir`` (default: $PACKER_CACHE_DIR) then keeps local copies of its objects.

    ``world``/``buffer`` are accepted as the Go API's names for ``world_size``/``buffer_size``.
    Other keywords go to the DataLoader (``timeout``, ``multiprocessing_context``, ...)."""
    dev = _resolve_device(device)
    cuda = dev.type == "cuda"
    num_workers = int(num_workers)
    for k in ("batch_size", "collate_fn", "sampler", "batch_sampler", "shuffle"):
        if k in dataloader_kwargs:
            raise TypeError("loader() sets %s itself; it cannot be passed to the DataLoader" % k)
    data = PackerIterableDataset(path, batch_size, shuffle=shuffle, seed=seed, epoch=epoch, drop_last=drop_last,
                                 buffer_size=buffer_size, rank=rank, world_size=world_size,
                                 pin_memory=cuda and num_workers == 0, verify_crc=verify_crc,
                                 prefetch=prefetch, direct=direct, num_workers=num_workers, world=world,
                                 buffer=buffer, cache_dir=cache_dir, order_version=order_version, pad=pad)
    if persistent_workers is None:
        persistent_workers = num_workers > 0
    kw = dict(num_workers=num_workers, persistent_workers=bool(persistent_workers) and num_workers > 0,
              pin_memory=cuda and num_workers > 0)
    kw.update(dataloader_kwargs)
    return PackerLoader(data, dev, transform=transform, **kw)


def random_resized_crop_flip(size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), flip=0.5, generator=None,
                             mean=None, std=None):
    """A batch transform for :func:`loader`: the random-resized-crop + horizontal-flip recipe of
    ImageNet training, run on whatever device the batch is on. Takes uint8 images, either one
    ``[B, H, W, C]`` tensor or a list of ``[H_i, W_i, C]`` tensors (variable-size records), and
    returns float32 ``[B, C, size, size]`` in [0, 1] (then ``(x - mean) / std`` when given).

    Per image: a crop covering a random fraction ``scale`` of the area with a random aspect
    ratio in ``ratio`` (log-uniform; ten tries, else the largest centred crop that fits the
    ratio range), resized bilinearly to ``size`` x ``size``, flipped left-right with probability
    ``flip``. The crop boxes are drawn on the CPU from ``generator`` (a ``torch.Generator``;
    seed it for reproducible crops), so the same seed gives the same boxes on any device.

    Given a batch dict (a dataset with fields) it transforms ``batch["image"]`` and returns the
    dict with it replaced: the other fields stay as they are, so use it where they do not
    follow the pixels (captions, labels), not with boxes or masks."""
    import math

    import torch.nn.functional as F

    out_hw = (size, size) if isinstance(size, int) else tuple(size)
    lo, hi = math.log(ratio[0]), math.log(ratio[1])

    def rand(n=1):
        return _torch.rand(n, generator=generator, dtype=_torch.float64).tolist()

    def box(h, w):
        area = h * w
        for _ in range(10):
            s, r = rand(2)
            a = area * (scale[0] + (scale[1] - scale[0]) * s)
            ar = math.exp(lo + (hi - lo) * r)
            cw, ch = int(round(math.sqrt(a * ar))), int(round(math.sqrt(a / ar)))
            if 0 < cw <= w and 0 < ch <= h:
                y0, x0 = rand(2)
                return int(y0 * (h - ch + 1)), int(x0 * (w - cw + 1)), ch, cw
        ar = w / h  # fallback: centred, aspect ratio clamped into the range
        if ar < ratio[0]:
            cw, ch = w, int(round(w / ratio[0]))
        elif ar > ratio[1]:
            ch, cw = h, int(round(h * ratio[1]))
        else:
            cw, ch = w, h
        return (h - ch) // 2, (w - cw) // 2, ch, cw

    def transform(images):
        if isinstance(images, dict):  # a batch with fields: its image only (boxes and masks stay)
            return dict(images, image=transform(images["image"]))
        outs = []
        for img in images:  # [H, W, C] each, on the device
            h, w = int(img.shape[0]), int(img.shape[1])
            y, x, ch, cw = box(h, w)
            crop = img[y:y + ch, x:x + cw].permute(2, 0, 1).unsqueeze(0).float()
            crop = F.interpolate(crop, size=out_hw, mode="bilinear", align_corners=False)
            if rand()[0] < flip:
                crop = crop.flip(-1)
            outs.append(crop)
        if not outs:
            return _torch.empty((0, 0) + out_hw, dtype=_torch.float32)
        x = _torch.cat(outs).div_(255).clamp_(0, 1)
        if mean is not None:
            m = _torch.as_tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
            sd = _torch.as_tensor(std if std is not None else 1.0, dtype=x.dtype, device=x.device)
            x = (x - m) / sd.view(1, -1, 1, 1) if sd.ndim else (x - m) / sd
        return x

    return transform


def collate_detection(batch, fields, boxes=None, labels=None):
    """``(images, targets)`` of a batch dict for torchvision's detection models: ``images`` a
    list of the batch's image tensors (``[H, W, C]`` or as stored; a stacked batch is split),
    ``targets`` a list of one dict per image: ``"boxes"`` (float32 ``[k, 4]``, x0, y0, x1, y1 in
    the image's pixels), ``"labels"`` (int64 ``[k]``, from the ``labels`` field) and every other
    field whose rows follow the boxes (``rows_of``, for example ``iscrowd``) by its name.

    ``fields`` is the schema (``loader(...).fields`` or ``ds.fields``); ``boxes`` names the boxes
    field (default: the schema's one field of geometry boxes); ``labels`` the field that becomes
    ``"labels"`` (default: the first integer field with rows_of the boxes field). Works on batches
    read with or without ``pad=True`` (padded rows are cut off by ``NAME_lengths``)."""
    bf = [f for f in fields if f.get("geometry") == "boxes" and (boxes is None or f["name"] == boxes)]
    if len(bf) != 1:
        raise ValueError("collate_detection: %s; name one with boxes=" % (
            "no boxes field %r in the schema" % boxes if boxes else
            "%d fields of geometry boxes in the schema" % len(bf)))
    bname = bf[0]["name"]
    rows = [f for f in fields if f.get("rows_of") == bname]
    if labels is None:
        ints = [f["name"] for f in rows if f.get("dtype") in ("int32", "int64")]
        labels = ints[0] if ints else None
    elif labels not in [f["name"] for f in rows]:
        raise ValueError("collate_detection: %r is not a field with rows_of %r" % (labels, bname))

    def per_image(name):
        v = batch[name]
        if name + "_lengths" in batch:  # padded: cut each row back to its length
            n = batch[name + "_lengths"].tolist()
            return [v[j, :n[j]] for j in range(len(n))]
        return list(v)

    images = list(batch["image"])
    cols = {"boxes": per_image(bname)}
    for f in rows:
        key = "labels" if f["name"] == labels else f["name"]
        cols[key] = [t.long() if key == "labels" else t for t in per_image(f["name"])]
    targets = [{k: v[j] for k, v in cols.items()} for j in range(len(images))]
    return images, targets
