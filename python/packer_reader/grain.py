"""A packer dataset as a Grain random-access data source, for JAX training loops.

    import grain
    from packer_reader.grain import Source

    source = Source("out/")                     # len(source), source[i] -> {"image", "label"}
    sampler = grain.samplers.IndexSampler(len(source), shuffle=True, seed=0, num_epochs=1,
                                          shard_options=grain.sharding.ShardByJaxProcess(drop_remainder=True))
    loader = grain.DataLoader(data_source=source, sampler=sampler,
                              operations=[grain.transforms.Batch(256, drop_remainder=True)])

This module does not import Grain: a source is anything with ``__len__`` and a thread-safe
``__getitem__`` (Grain's ``RandomAccessDataSource`` protocol), and ``_getitems`` for batched
reads (``SupportsBatchedReadRandomAccessDataSource``). See python/README.md, "JAX and Grain".
"""

import threading

import numpy as np

from ._errors import FormatError
from ._formats import open_dataset

__all__ = ["Source"]

# jax.device_put on the CPU backend aliases a NumPy array (no copy) when its data is C-contiguous
# and 64-byte aligned; otherwise it copies.
_DEVICE_ALIGN = 64


def _aligned(nbytes):
    raw = np.empty(nbytes + _DEVICE_ALIGN, dtype=np.uint8)
    off = (-raw.ctypes.data) % _DEVICE_ALIGN
    return raw[off:off + nbytes]


def _device_ready(a):
    """a itself when it is C-contiguous and _DEVICE_ALIGN-aligned, else such a copy of it."""
    if a.flags.c_contiguous and a.ctypes.data % _DEVICE_ALIGN == 0:
        return a
    out = _aligned(a.nbytes).view(a.dtype).reshape(a.shape)
    np.copyto(out, a)
    return out


class Source:
    """Grain's random-access data source over a packer dataset (any format :func:`packer_reader.open`
    reads: shards, npy, hdf5; a local folder, a manifest, a shard file or ``s3://``).

    ``len(source)`` records; ``source[i]`` is a dict ``{"image": ndarray, "label": int}``, and a
    dataset with fields adds each field by its name, as :meth:`Dataset.record` gives them.
    ``source._getitems(indices)`` (also ``__getitems__``) reads a list of indices as one batch
    with :meth:`Dataset.read_many`: sorted by shard and offset, neighbouring records in one read,
    a repeated index read once, every checksum block checked (a damaged one raises
    :class:`CorruptionError` naming the file and the records), the records handed back in the
    order asked.

    Every array handed out is C-contiguous and 64-byte aligned, which ``jax.device_put`` on the
    CPU takes without a copy: the records of a fixed-size dataset are views of one batch buffer
    (4096-byte aligned) when the record size is a multiple of 64 bytes, as every usual image
    shape's is, and copied once into aligned memory otherwise.

    Thread-safe: Grain's read threads share one source, and reads release the GIL (``preadv``,
    and the CRC-32C of packer's C library). Picklable: a Grain worker process gets the path and
    options and opens the dataset itself on its first read; a dataset that replaced the one
    this source opened (``packer build --force``, another ``manifest_sha256``) is refused there
    with a :class:`FormatError`, never served under this source's length. ``repr(source)`` names the dataset
    and its record count, which a Grain DataLoader checkpoint checks on restore.

    ``verify_crc``, ``direct``, ``cache_dir``: as :func:`packer_reader.open`."""

    def __init__(self, path, verify_crc=True, direct=False, cache_dir=None):
        self._args = (str(path), bool(verify_crc), bool(direct), cache_dir)
        self._lock = threading.Lock()
        self._ds = None
        self._pin = None
        # errors (no such dataset, a damaged header) here, not on a worker's first read; the
        # manifest's seal pins the dataset every process reads
        self._pin = (self._open().manifest or {}).get("manifest_sha256")

    def _open(self):
        ds = self._ds
        if ds is not None:
            return ds
        with self._lock:
            if self._ds is None:
                path, verify_crc, direct, cache_dir = self._args
                ds = open_dataset(path, verify_crc=verify_crc, direct=direct, cache_dir=cache_dir)
                now = (ds.manifest or {}).get("manifest_sha256")
                if self._pin is not None and now != self._pin:
                    ds.close()
                    raise FormatError(path, "the dataset was replaced since this grain Source was made "
                                      "(manifest_sha256 %s, now %s): its records are not the ones counted; "
                                      "make a new Source" % (self._pin, now))
                self._ds = ds
            return self._ds

    @property
    def dataset(self):
        """The :class:`packer_reader.Dataset` this source reads."""
        return self._open()

    def __len__(self):
        return len(self._open())

    def __getitem__(self, index):
        """Record ``index`` (an integer in ``[0, len)``; negative counts from the end), read on
        its own into aligned memory."""
        ds = self._open()
        if ds.schema:
            return self._ready(ds.record(index))
        img, label = ds[index]
        return {"image": _device_ready(img), "label": label}

    def _getitems(self, indices):
        """The records ``indices`` (any integers in range, repeats allowed) as a list of dicts, in
        the order asked, read as one batch (:meth:`Dataset.read_many`)."""
        ds = self._open()
        if ds.schema:
            return [self._ready(r) for r in ds.__getitems__(indices)]
        images, labels = ds.read_many(indices)
        labels = labels.tolist()
        if ds.fixed and images.size:
            rs = ds.record_size
            if rs % _DEVICE_ALIGN or images.ctypes.data % _DEVICE_ALIGN:
                # every record's slot on the alignment: one copy of the batch into a wider stride
                stride = rs + (-rs % _DEVICE_ALIGN)
                raw = _aligned(len(labels) * stride).reshape(len(labels), stride)
                raw[:, :rs] = images.reshape(len(labels), -1).view(np.uint8)
                images = [raw[j, :rs].view(ds.dtype).reshape(ds.shape) for j in range(len(labels))]
        else:
            images = [_device_ready(a) for a in images]
        return [{"image": images[j], "label": labels[j]} for j in range(len(labels))]

    @staticmethod
    def _ready(rec):
        for k, v in rec.items():
            if isinstance(v, np.ndarray):
                rec[k] = _device_ready(v)
        return rec

    __getitems__ = _getitems

    def __repr__(self):
        path, verify_crc, direct, _ = self._args
        return "packer_reader.grain.Source(%r, records=%d, verify_crc=%r, direct=%r)" % (
            path, len(self), verify_crc, direct)

    def __getstate__(self):
        return {"args": self._args, "pin": self._pin}

    def __setstate__(self, state):
        self._args = tuple(state["args"])
        self._pin = state.get("pin")
        self._lock = threading.Lock()
        self._ds = None

    def close(self):
        with self._lock:
            ds, self._ds = self._ds, None
        if ds is not None:
            ds.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
