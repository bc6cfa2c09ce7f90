"""packer_reader: read packer output (shards, npy, hdf5) from Python at disk speed.

    import packer_reader
    ds = packer_reader.open("out/")            # any of the three formats, through manifest.json
    img, label = ds[0]                          # ndarray with ds.shape / ds.dtype, int
    for images, labels in ds.batches(256, shuffle=True, seed=1, epoch=0):
        ...                                     # [B, ...] array (its own; copy=False: reused views), [B] int64

A dataset packed with fields (captions, JSON, boxes, masks: ``ds.fields``, shard/FORMAT.md
"Fields") gives dicts instead: ``ds[i] -> {"image", "label", NAME: value, ...}`` and batches as
dicts (python/README.md, "Samples with fields").

Order of records (shuffle, rank/world split, resume) follows shard/ORDER.md exactly, like the
Go reader. Shards are parsed as shard/FORMAT.md specifies: magic, version, flags, limits and the
header, footer and index CRC-32C are checked when a dataset is opened, and each shard against the
manifest (its index, sample and label spec, record count and size). The CRC-32C of record data is
checked by default too, the first time a read touches each checksum block, so damaged data is a
``CorruptionError`` naming the shard and record range, never a silent batch. Checked blocks are
remembered, so the check costs time in the first epoch only (one core's CRC-32C speed: about
13 GB/s with packer's SSE4.2 library _lib/libpackercrc.so, which the wheel carries and
scripts/setup.sh builds in the source tree; about 2 GB/s with Debian's python3-crc32c otherwise,
docs/bench/crc.txt); without either the checks run on a NumPy fallback at a few hundred MB/s and
a one-time RuntimeWarning says so. ``open(path, verify_crc=False)`` skips them.
``verify(path)`` always checks everything: file sizes, SHA-256, every data block CRC, padding, and
npy/hdf5 shapes; files the manifest does not list are warnings (``report.warnings``), faults with
``verify(path, strict=True)``.

PyTorch: see ``packer_reader.torch``. Weighted mixtures of datasets: ``packer_reader.mix``
(shard/ORDER.md "Mixtures").
"""

from ._dataset import Dataset
from ._errors import CorruptionError, FormatError, PackerError
from ._hdf5 import HDF5Dataset
from ._manifest import load_manifest
from ._npy import NpyDataset
from ._formats import open_dataset as _open
from ._s3 import AccessError, S3Error
from ._shards import ShardDataset
from ._verify import Fault, Report, verify
from .mixture import mix, mix_plan

__version__ = "0.2.0"

__all__ = ["open", "verify", "Dataset", "ShardDataset", "NpyDataset", "HDF5Dataset", "Report", "Fault",
           "PackerError", "FormatError", "CorruptionError", "S3Error", "AccessError", "load_manifest",
           "mix", "mix_plan"]


def open(path, verify_crc=True, direct=False, cache_dir=None):  # noqa: A001 - the package's entry point
    """Open a packer output directory (its manifest decides the format), a manifest.json, a
    single ``.pks`` shard file, or a dataset in a bucket, ``s3://bucket/prefix`` (needs boto3;
    see python/README.md, "Reading from a bucket"). Returns a :class:`Dataset`.

    ``verify_crc`` (default True): check the CRC-32C of every data block the first time a read
    touches it, raising :class:`CorruptionError` on a mismatch; False skips the check (shards
    only; npy and hdf5 carry no internal checksums, use :func:`verify`).
    ``direct``: read batches with ``O_DIRECT`` where the platform and file system allow it,
    bypassing the page cache (for cold, read-once passes over data larger than memory).
    ``cache_dir`` (default: the ``PACKER_CACHE_DIR`` variable), for ``s3://`` datasets only: a
    folder keeping a whole local copy of each object, named by its ETag, so later opens and
    epochs read local files; a copy of another version of an object is never used."""
    return _open(path, verify_crc=verify_crc, direct=direct, cache_dir=cache_dir)
