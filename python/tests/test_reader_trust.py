"""Trust checks of the reading side: what a trainer reads is the dataset it asked for, or an
error naming it."""

import os
import pickle
import shutil

import numpy as np
import pytest

import shardwriter
from conftest import CLASSES, SPEC, make_images, make_labels
from packer_reader import PackerError

N = 60


def _write(d, seed):
    imgs = make_images(N, seed=seed)
    shardwriter.write_dataset(d, list(imgs), make_labels(N), CLASSES, SPEC, shard_size=20 * 60, block_records=7)
    return imgs


def _replace(live, stage):
    os.rename(live, live + ".old")
    os.rename(stage, live)
    shutil.rmtree(live + ".old")


def test_grain_source_replaced_before_a_worker_opens_it(tmp_path):
    """A Grain worker process gets a pickled Source and opens the dataset again by path: one
    that replaced it since (packer build --force) must not be served as the trainer's source,
    whose length and checkpoint the sampler was made for, but refused."""
    from packer_reader.grain import Source

    live, stage = str(tmp_path / "live"), str(tmp_path / "live.partial")
    old = _write(live, 1)
    _write(stage, 2)
    src = Source(live)
    blob = pickle.dumps(src)  # as Grain hands the source to a worker process
    _replace(live, stage)
    worker = pickle.loads(blob)
    with pytest.raises(PackerError, match="replaced"):
        got = worker[3]["image"]
        assert np.array_equal(got, old[3]), "a record of the dataset that replaced the source was served"
    with pytest.raises(PackerError, match="replaced"):
        worker._getitems([0, 1])


def test_start_past_the_epoch_is_refused(tmp_path):
    """ORDER.md v2: 0 <= start <= N, and the Go reader refuses a start past the end. A start
    past it (a position of a larger dataset, batches taken for records) silently yielded an
    empty epoch here; it is an error naming the dataset, as in Go."""
    import packer_reader

    d = str(tmp_path / "ds")
    _write(d, 3)
    with packer_reader.open(d) as ds:
        assert len(list(ds.batches(8, start=N))) == 0  # the end itself: nothing left
        with pytest.raises(ValueError, match="ds.*start position 61 .* 60 records"):
            list(ds.batches(8, start=N + 1))
        with pytest.raises(ValueError, match="ds.*start position 61 .* 60 records"):
            ds.order(start=N + 1)
        assert ds.order(start=N).size == 0


@pytest.mark.parametrize("fmt", ["npy", "hdf5"])
def test_damaged_label_column_is_refused_at_open(tmp_path, fmt):
    """npy and HDF5 datasets carry no checksums of their own: a label changed in labels.npy (or
    /labels) was read as the record's label. The manifest's class_counts, checked against the
    labels at open, catch any single changed label (one class loses a record, another gains
    one, or the label falls outside the classes)."""
    import packer_reader

    imgs, labels = make_images(N, seed=4), make_labels(N)
    d = str(tmp_path / fmt)
    if fmt == "npy":
        shardwriter.write_npy_dataset(d, imgs, labels, CLASSES, SPEC)
        p = os.path.join(d, "labels.npy")
        b = bytearray(open(p, "rb").read())
        b[len(b) - N * 8 + 5 * 8] ^= 1  # record 5's label, low bit
        open(p, "wb").write(bytes(b))
    else:
        h5py = pytest.importorskip("h5py")
        shardwriter.write_h5_dataset(d, imgs, labels, CLASSES, SPEC)
        with h5py.File(os.path.join(d, "data.h5"), "r+") as f:
            f["labels"][5] = f["labels"][5] ^ 1
    with pytest.raises(PackerError, match="labels.*class_counts|class_counts.*labels"):
        with packer_reader.open(d) as ds:
            ds.labels.tolist()
