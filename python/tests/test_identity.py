"""Each shard (and npy/hdf5 file) is checked against the manifest when the dataset is opened:
swapped, renamed or foreign files are refused with a message naming the file, never served."""

import json
import os
import shutil

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES, SPEC, make_images, make_labels
from packer_reader import FormatError

N = 200  # shards of 30 records: 6 full shards and one of 20


@pytest.fixture
def ds_dir(tmp_path):
    imgs = make_images(N, seed=5)
    shardwriter.write_dataset(str(tmp_path), list(imgs), make_labels(N), CLASSES, SPEC,
                              aux={"coarse": np.arange(N) % 3}, shard_size=30 * 60, block_records=7)
    return str(tmp_path), imgs


def shard(d, k):
    return os.path.join(d, "shard-%05d.pks" % k)


def test_swapped_contents_refused(ds_dir):
    d, imgs = ds_dir
    a, b = open(shard(d, 1), "rb").read(), open(shard(d, 2), "rb").read()
    with open(shard(d, 1), "wb") as f:
        f.write(b)
    with open(shard(d, 2), "wb") as f:
        f.write(a)
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d)
    assert "shard-00001.pks" in str(ei.value) and "shard index 2" in str(ei.value)


def test_swapped_by_rename_refused(ds_dir):
    d, imgs = ds_dir
    os.rename(shard(d, 0), os.path.join(d, "tmp"))
    os.rename(shard(d, 3), shard(d, 0))
    os.rename(os.path.join(d, "tmp"), shard(d, 3))
    for crc in (True, False):
        with pytest.raises(FormatError) as ei:
            packer_reader.open(d, verify_crc=crc)
        assert "shard-00000.pks" in str(ei.value) and "shard index 3" in str(ei.value)


def test_last_shard_swapped_refused(ds_dir):
    # the last shard holds fewer records: its record count and size differ too
    d, imgs = ds_dir
    os.rename(shard(d, 6), os.path.join(d, "tmp"))
    os.rename(shard(d, 5), shard(d, 6))
    os.rename(os.path.join(d, "tmp"), shard(d, 5))
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d)
    assert "shard-00005.pks" in str(ei.value)


def _edit_manifest(d, fn):
    """Edit the manifest and reseal it, so what is tested is the identity check, not the
    manifest's own checksum."""
    p = os.path.join(d, "manifest.json")
    m = json.load(open(p))
    fn(m)
    shardwriter.write_manifest(p, m)


def test_manifest_size_and_records_checked(ds_dir):
    d, _ = ds_dir
    _edit_manifest(d, lambda m: m["files"][2].update(size=m["files"][2]["size"] + 4096))
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d)
    assert "shard-00002.pks" in str(ei.value) and "bytes" in str(ei.value)


def test_foreign_spec_refused(ds_dir, tmp_path_factory):
    d, _ = ds_dir
    # a shard of another dataset (other sample spec, no aux) dropped in place of shard 4
    other = str(tmp_path_factory.mktemp("other"))
    spec = {"shape": [5, 4, 3], "dtype": "uint8", "layout": "hwc"}
    shardwriter.write_shard(os.path.join(other, "x.pks"), list(make_images(30, (5, 4, 3))), make_labels(30), spec,
                            shard_index=4)
    shutil.copy(os.path.join(other, "x.pks"), shard(d, 4))
    _edit_manifest(d, lambda m: m["files"][4].update(size=os.path.getsize(shard(d, 4))))
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d)
    assert "shard-00004.pks" in str(ei.value) and "sample spec" in str(ei.value)
    # same sample spec, but no aux columns
    shardwriter.write_shard(os.path.join(other, "y.pks"), list(make_images(30)), make_labels(30), SPEC, shard_index=4)
    shutil.copy(os.path.join(other, "y.pks"), shard(d, 4))
    _edit_manifest(d, lambda m: m["files"][4].update(size=os.path.getsize(shard(d, 4))))
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d)
    assert "shard-00004.pks" in str(ei.value) and "aux" in str(ei.value)


def test_layout_differs_refused(ds_dir):
    d, _ = ds_dir
    _edit_manifest(d, lambda m: m["sample"].update(layout="chw"))
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d)
    assert "shard-00000.pks" in str(ei.value) and "layout" in str(ei.value)


def test_npy_and_hdf5_size_checked(npy_dir, tmp_path):
    d = str(tmp_path / "npy")
    shutil.copytree(npy_dir, d)
    _edit_manifest(d, lambda m: m["files"][0].update(size=m["files"][0]["size"] + 1))
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d)
    assert "images.npy" in str(ei.value)


def test_npy_labels_swapped_refused(npy_dir, tmp_path, data):
    # labels.npy of another dataset with as many records: same shape, other size in the manifest
    d = str(tmp_path / "npy")
    shutil.copytree(npy_dir, d)
    _edit_manifest(d, lambda m: [fe.update(size=fe["size"] + 8) for fe in m["files"] if fe["path"] == "labels.npy"])
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d)
    assert "labels.npy" in str(ei.value)


def test_hdf5_size_checked(h5_dir, tmp_path):
    d = str(tmp_path / "h5")
    shutil.copytree(h5_dir, d)
    _edit_manifest(d, lambda m: m["files"][0].update(size=m["files"][0]["size"] + 1))
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d)
    assert "data.h5" in str(ei.value)


def test_intact_dataset_reads(ds_dir):
    d, imgs = ds_dir
    with packer_reader.open(d) as ds:
        x, _ = ds[0:N]
        assert np.array_equal(x, imgs)


def _sibling(tmp_path_factory, seed=6):
    """A build of another folder with the same names and options: same structure, labels and
    aux values, other pixels."""
    d = str(tmp_path_factory.mktemp("sibling"))
    shardwriter.write_dataset(d, list(make_images(N, seed=seed)), make_labels(N), CLASSES, SPEC,
                              aux={"coarse": np.arange(N) % 3}, shard_size=30 * 60, block_records=7)
    return d


@pytest.mark.parametrize("crc", [True, False])
def test_sibling_shard_refused(ds_dir, tmp_path_factory, crc):
    # shard 2 of a sibling build copied in (an rsync of a rebuild): the header checks pass (same
    # names, options, counts, size); the index (block CRCs) does not hash to index_sha256
    d, imgs = ds_dir
    shutil.copy(shard(_sibling(tmp_path_factory), 2), shard(d, 2))
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d, verify_crc=crc)
    assert "shard-00002.pks" in str(ei.value) and "index_sha256" in str(ei.value)


def test_sibling_shard_old_manifest(ds_dir, tmp_path_factory):
    # a manifest written before index_sha256: the weaker checks only (documented in FORMAT.md);
    # the dataset opens, and verify (the whole file's SHA-256) is what tells the shard apart
    d, imgs = ds_dir
    shutil.copy(shard(_sibling(tmp_path_factory), 2), shard(d, 2))
    _edit_manifest(d, lambda m: [fe.pop("index_sha256") for fe in m["files"]])
    with packer_reader.open(d) as ds:
        assert len(ds) == N
    rep = packer_reader.verify(d)
    assert not rep.ok and any(f.kind == "sha256" and f.path.endswith("shard-00002.pks") for f in rep.faults)


def test_sibling_shard_verify(ds_dir, tmp_path_factory):
    # verify names why the readers refuse it, besides the whole file's SHA-256
    d, _ = ds_dir
    shutil.copy(shard(_sibling(tmp_path_factory), 2), shard(d, 2))
    rep = packer_reader.verify(d)
    assert any(f.path.endswith("shard-00002.pks") and "index_sha256" in f.reason and "another build" in f.reason
               for f in rep.faults), [str(f) for f in rep.faults]
    # a manifest whose index_sha256 is wrong for an intact shard: a fault, though every SHA-256 matches
    d2 = str(tmp_path_factory.mktemp("wrongpin"))
    shutil.copytree(_sibling(tmp_path_factory, seed=7), d2, dirs_exist_ok=True)
    _edit_manifest(d2, lambda m: m["files"][3].update(index_sha256="0" * 64))
    rep = packer_reader.verify(d2)
    assert [os.path.basename(f.path) for f in rep.faults] == ["shard-00003.pks"], [str(f) for f in rep.faults]
    assert "index_sha256" in rep.faults[0].reason
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d2)
    assert "shard-00003.pks" in str(ei.value) and "index_sha256" in str(ei.value)


def test_manifest_index_sha256_must_be_hex(ds_dir):
    d, _ = ds_dir
    _edit_manifest(d, lambda m: m["files"][1].update(index_sha256="ABC"))
    with pytest.raises(FormatError) as ei:
        packer_reader.open(d)
    assert "shard-00001.pks" in str(ei.value) and "index_sha256" in str(ei.value)
