"""ds.read_many(indices) and ds.__getitems__: one batch in the caller's order, reads sorted and
merged, repeats read once, every block checked as the iterators check it, from many threads."""

import os
import struct
import threading

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES, SPEC, make_images, make_labels
from packer_reader import CorruptionError
from test_fields import SCHEMA, make_records, same_record, spec

N = 90  # 3 shards of 30 records of 60 bytes; checksum blocks of 7 records


@pytest.fixture
def ds_dir(tmp_path):
    imgs = make_images(N, seed=5)
    shardwriter.write_dataset(str(tmp_path), list(imgs), make_labels(N), CLASSES, SPEC,
                              shard_size=30 * 60, block_records=7)
    return str(tmp_path), imgs


class PreadvCount:
    """Counts os.preadv calls (the reader's only way of reading file bytes)."""

    def __init__(self, monkeypatch):
        self.calls = []
        real = os.preadv

        def counted(fd, bufs, offset, *a):
            self.calls.append((offset, sum(len(b) for b in bufs)))
            return real(fd, bufs, offset, *a)
        monkeypatch.setattr(os, "preadv", counted)


def test_caller_order_repeats_negatives(ds_dir):
    d, imgs = ds_dir
    labels = make_labels(N)
    idx = [57, 3, 3, 89, -1, 30, 29, 4, 3, 61, 60, 59]
    with packer_reader.open(d) as ds:
        images, got_labels = ds.read_many(idx)
        want = [i % N for i in idx]
        assert images.shape == (len(idx),) + ds.shape and images.dtype == np.uint8
        assert images.flags.c_contiguous and images.flags.writeable
        assert images.ctypes.data % 4096 == 0
        assert np.array_equal(images, imgs[want])
        assert got_labels.dtype == np.int64 and np.array_equal(got_labels, labels[want])
        # the same through numpy-style indexing and an array of another integer type
        a, b = ds[np.asarray(idx, dtype=np.int32)]
        assert np.array_equal(a, images) and np.array_equal(b, got_labels)
        empty, el = ds.read_many([])
        assert empty.shape == (0,) + ds.shape and el.shape == (0,)
        for bad in ([N], [-N - 1], [0, 1, 2 * N]):
            with pytest.raises(IndexError, match="record index %d out of range" % bad[-1]):
                ds.read_many(bad)
        with pytest.raises(TypeError):
            ds.read_many([1.0, 2.0])
        with pytest.raises(TypeError):
            ds.read_many([[1, 2]])


def test_getitems_is_a_list_of_records(ds_dir):
    d, imgs = ds_dir
    with packer_reader.open(d) as ds:
        idx = [44, 2, 44, 17]
        recs = ds.__getitems__(idx)
        assert len(recs) == 4
        for i, (img, label) in zip(idx, recs):
            want_img, want_label = ds[i]
            assert np.array_equal(img, want_img) and label == want_label and isinstance(label, int)
        # the records are views of one batch buffer
        base = recs[0][0].base
        assert base is not None and all(r[0].base is base for r in recs)


def test_runs_are_one_read_and_repeats_read_once(ds_dir, monkeypatch):
    d, imgs = ds_dir
    with packer_reader.open(d, verify_crc=False) as ds:
        count = PreadvCount(monkeypatch)
        images, _ = ds.read_many([12, 10, 13, 11, 11, 12])  # shard 0, records 10..13: one run
        assert np.array_equal(images, imgs[[12, 10, 13, 11, 11, 12]])
        assert len(count.calls) == 1 and count.calls[0][1] == 4 * 60
        count.calls.clear()
        images, _ = ds.read_many([31, 5, 29, 30, 6])  # runs 5..6 and 29 in shard 0, 30..31 in shard 1
        assert np.array_equal(images, imgs[[31, 5, 29, 30, 6]])
        assert sorted(n for _, n in count.calls) == [60, 120, 120]
        offsets = [o for o, _ in count.calls]
        assert offsets[:2] == sorted(offsets[:2])  # shard 0's reads in file order


def test_damaged_block_raises_naming_file_and_records(ds_dir):
    d, imgs = ds_dir
    p = os.path.join(d, "shard-00001.pks")
    with open(p, "rb") as f:
        f.seek(-64, 2)
        n, rs, data_off = struct.unpack("<QQQQQQIII4s", f.read(64))[:3]
    with open(p, "r+b") as f:  # shard 1, local record 10: block 1 = local records 7..13 = 37..43
        f.seek(data_off + 10 * rs + 5)
        b = f.read(1)[0]
        f.seek(data_off + 10 * rs + 5)
        f.write(bytes([b ^ 1]))
    with packer_reader.open(d) as ds:
        for idx in ([3, 37], [43, 43], [60, 38, 2]):  # a record of the damaged block, not the damaged one too
            with pytest.raises(CorruptionError) as ei:
                ds.read_many(idx)
            e = ei.value
            assert e.path == p and e.record_range == (37, 44)
            assert "shard-00001.pks" in str(e) and "records 37..43" in str(e)
        with pytest.raises(CorruptionError):
            ds.__getitems__([36, 40])
        images, _ = ds.read_many([36, 44, 0, 89, 36])  # outside the damaged block: read and checked
        assert np.array_equal(images, imgs[[36, 44, 0, 89, 36]])
    with packer_reader.open(d, verify_crc=False) as ds:  # the opt-out reads the damaged bytes
        images, _ = ds.read_many([40])
        assert not np.array_equal(images[0], imgs[40])


def test_threads_share_a_dataset(ds_dir):
    d, imgs = ds_dir
    errors = []
    with packer_reader.open(d) as ds:  # fresh: the threads race to check the same blocks first

        def work(seed):
            rng = np.random.default_rng(seed)
            try:
                for _ in range(40):
                    idx = rng.integers(0, N, int(rng.integers(1, 40)))
                    images, labels = ds.read_many(idx)
                    if not np.array_equal(images, imgs[idx]):
                        errors.append("thread %d: wrong bytes for %s" % (seed, idx.tolist()))
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append("thread %d: %r" % (seed, e))
        threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_threads_all_see_the_damage(ds_dir):
    d, _ = ds_dir
    p = os.path.join(d, "shard-00002.pks")
    with open(p, "r+b") as f:  # shard 2's data starts at 4096: its first block, records 60..66
        f.seek(4096 + 3)
        b = f.read(1)[0]
        f.seek(4096 + 3)
        f.write(bytes([b ^ 0x80]))
    caught = []
    with packer_reader.open(d) as ds:

        def work():
            try:
                ds.read_many([1, 62, 80])
            except CorruptionError as e:
                caught.append(e.record_range)
        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert caught == [(60, 67)] * 6


@pytest.mark.parametrize("fmt", ["npy", "hdf5"])
def test_other_formats(fmt, npy_dir, request, data):
    d = npy_dir if fmt == "npy" else request.getfixturevalue("h5_dir")
    imgs, labels = data[0], data[1]
    idx = [150, 2, 2, 200, 0, 1, 149]
    with packer_reader.open(d) as ds:
        images, got = ds.read_many(idx)
        assert np.array_equal(images, imgs[idx]) and np.array_equal(got, labels[idx])


def test_variable_size_records(tmp_path):
    rng = np.random.default_rng(3)
    imgs = [rng.integers(0, 256, (2 + i % 5, 3, 3), dtype=np.uint8) for i in range(40)]
    spec_var = {"shape": [-1, 3, 3], "dtype": "uint8", "layout": "hwc"}
    shardwriter.write_dataset(str(tmp_path), imgs, np.arange(40) % 5, CLASSES, spec_var, shard_size=600)
    with packer_reader.open(str(tmp_path)) as ds:
        idx = [33, 1, 33, 20]
        images, labels = ds.read_many(idx)
        assert [a.shape for a in images] == [imgs[i].shape for i in idx]
        assert all(np.array_equal(a, imgs[i]) for a, i in zip(images, idx))
        assert labels.tolist() == [i % 5 for i in idx]


@pytest.mark.parametrize("var", [False, True])
def test_fields(tmp_path, var):
    images, labels, values, raws = make_records(23, var=var)
    shardwriter.write_dataset(str(tmp_path), images, labels, CLASSES, spec(var), fields=SCHEMA, field_values=raws,
                              shard_size=10 * 60 if not var else 200)
    idx = [22, 3, 4, 5, 3, 0, 11]
    with packer_reader.open(str(tmp_path)) as ds:
        assert len(ds.shards) > 1
        batch = ds.read_many(idx)
        assert batch["label"].tolist() == [int(labels[i]) for i in idx]
        if not var:
            assert batch["image"].shape == (len(idx), 4, 5, 3)
        recs = ds.__getitems__(idx)
        for i, r in zip(idx, recs):
            same_record(r, images[i], int(labels[i]), values[i])
        for k, want in ds[idx].items():
            got = batch[k]
            assert len(got) == len(want)
            for a, b in zip(got, want):
                assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
