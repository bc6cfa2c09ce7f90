import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package, without installing it
sys.path.insert(0, HERE)

import shardwriter  # noqa: E402

SPEC = {"shape": [4, 5, 3], "dtype": "uint8", "layout": "hwc"}
CLASSES = ["cat", "dog", "eel", "fox", "gnu"]


def make_images(n, shape=(4, 5, 3), dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal((n,) + tuple(shape)).astype(dtype)
    return rng.integers(0, 256, (n,) + tuple(shape), dtype=np.uint8)


def make_labels(n):
    return (np.arange(n) * 7 + 3) % len(CLASSES)


@pytest.fixture(scope="session")
def data():
    """(images, labels, coarse aux, metas) of the main fixture: 203 records of 4x5x3 uint8."""
    n = 203
    imgs = make_images(n)
    labels = make_labels(n)
    coarse = labels // 2
    metas = [{"i": i, "src": "img%03d.png" % i} for i in range(n)]
    return imgs, labels, coarse, metas


@pytest.fixture(scope="session")
def shards_dir(tmp_path_factory, data):
    """Shards of 30 records (1800 data bytes), 7 records per checksum block, aux and meta."""
    imgs, labels, coarse, metas = data
    d = str(tmp_path_factory.mktemp("shards"))
    shardwriter.write_dataset(d, list(imgs), labels, CLASSES, SPEC, aux={"coarse": coarse}, metas=metas,
                              shard_size=30 * 60, block_records=7)
    return d


@pytest.fixture(scope="session")
def npy_dir(tmp_path_factory, data):
    imgs, labels, coarse, metas = data
    d = str(tmp_path_factory.mktemp("npy"))
    shardwriter.write_npy_dataset(d, imgs, labels, CLASSES, SPEC, aux={"coarse": coarse}, metas=metas)
    return d


@pytest.fixture(scope="session")
def h5_dir(tmp_path_factory, data):
    pytest.importorskip("h5py", reason="h5py not installed")
    imgs, labels, coarse, _ = data
    d = str(tmp_path_factory.mktemp("h5"))
    shardwriter.write_h5_dataset(d, imgs, labels, CLASSES, SPEC, aux={"coarse": coarse})
    return d


def require_torch():
    """torch is required unless PACKER_NO_TORCH=1: a missing torch is a failure, not a silent pass."""
    if os.environ.get("PACKER_NO_TORCH") == "1":
        pytest.skip("PACKER_NO_TORCH=1: torch tests disabled")
    try:
        import torch  # noqa: F401
    except ImportError as e:
        pytest.fail("torch is not importable (%s): install python3-torch (or pip install torch), "
                    "or set PACKER_NO_TORCH=1 to skip the torch tests" % e)
    return torch
