"""Record indices: ds[i] takes integers only (as a NumPy array does). A float, a string or a bool
is a TypeError rather than a silently truncated or converted index serving another record, and
a boolean array is a mask over the records (as NumPy reads it), never a list of indices 0 and 1."""

import numpy as np
import pytest

import packer_reader


@pytest.fixture(params=["shards", "npy"])
def ds(request, shards_dir, npy_dir):
    d = packer_reader.open(shards_dir if request.param == "shards" else npy_dir)
    yield d
    d.close()


@pytest.mark.parametrize("key", [1.5, 1.0, np.float64(2.0), "1", True, np.bool_(True), None])
def test_non_integer_scalar_refused(ds, key):
    with pytest.raises(TypeError):
        ds[key]
    with pytest.raises(TypeError):
        ds.image(key)
    with pytest.raises(TypeError):
        ds.label(key)


@pytest.mark.parametrize("key", [[0.5, 1.5], np.array([1.0, 2.0]), ["1", "2"]])
def test_non_integer_array_refused(ds, key):
    with pytest.raises(TypeError):
        ds[key]


def test_integer_kinds_accepted(ds, data):
    imgs, labels, _, _ = data
    for key in (3, np.int64(3), np.uint8(3), np.int32(-200)):
        img, lab = ds[key]
        want = int(key) % len(ds)
        assert lab == labels[want]
        assert np.array_equal(img, imgs[want])


def test_boolean_mask_selects(ds, data):
    imgs, labels, _, _ = data
    mask = np.zeros(len(ds), bool)
    mask[[5, 17, 150]] = True
    got, got_labels = ds[mask]
    assert list(got_labels) == list(labels[[5, 17, 150]])
    assert np.array_equal(got, imgs[[5, 17, 150]])
    got2, got_labels2 = ds[list(mask)]
    assert np.array_equal(got2, got) and np.array_equal(got_labels2, got_labels)


def test_boolean_mask_wrong_length_refused(ds):
    with pytest.raises(IndexError):
        ds[np.array([True, False, True])]


def test_huge_unsigned_index_refused(ds):
    # 2**64-1 as int64 is -1: it must not wrap around to the last record.
    with pytest.raises(IndexError):
        ds[np.array([2**64 - 1], dtype=np.uint64)]
    with pytest.raises(IndexError):
        ds[np.uint64(2**64 - 1)]
