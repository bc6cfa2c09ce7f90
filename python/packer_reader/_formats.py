"""The formats a manifest may name, each to its Dataset class, and open_dataset: a packer output
directory, manifest.json, .pks file or s3:// prefix to the Dataset of its format."""

import os
from pathlib import Path

from . import _s3
from ._errors import FormatError
from ._hdf5 import HDF5Dataset
from ._manifest import MANIFEST, load_manifest
from ._npy import NpyDataset
from ._shards import ShardDataset

# The Dataset class of each format a manifest may name (_manifest.FORMATS, which load_manifest
# checks first; a test keeps the two lists equal). A new output format is its module (_npy.py is
# the one to copy), a line here, its name in FORMATS and its checks in _verify.
READERS = {"shards": ShardDataset, "npy": NpyDataset, "hdf5": HDF5Dataset}


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
            cls = READERS[m["format"]]
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
    cls = READERS[m["format"]]
    return cls(str(p), m, verify_crc, direct)
