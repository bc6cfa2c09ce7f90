"""The Go side's checked-in shards (shard/testdata/*.pks): the golden shard written by the Go
writer reads back exactly, and every broken shard is rejected the way the Go reader rejects it."""

import glob
import os

import numpy as np
import pytest

import packer_reader
from packer_reader import CorruptionError, FormatError
from packer_reader._shard import ShardFile

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "shard", "testdata")
BROKEN = sorted(p for p in glob.glob(os.path.join(TESTDATA, "*.pks")) if not p.endswith("golden.pks"))
CHECKSUM_ON_OPEN = {"bad-header-crc", "bad-footer-crc", "bad-index-crc"}
PADDING = {"padding-not-zero", "header-padding-not-zero", "index-padding-not-zero"}


def _golden():
    p = os.path.join(TESTDATA, "golden.pks")
    if not os.path.exists(p):
        pytest.skip("shard/testdata/golden.pks not present")
    return p


def test_golden_shard():
    with packer_reader.open(_golden(), verify_crc=True) as ds:
        assert len(ds) == 2 and ds.shape == (2, 2, 1) and ds.dtype == np.uint8
        assert ds[0][0].ravel().tolist() == [1, 2, 3, 4] and ds[0][1] == 3
        assert ds[1][0].ravel().tolist() == [5, 6, 7, 8] and ds[1][1] == -1
        assert ds.aux(0) == {"coarse_label": 1} and ds.aux(1) == {"coarse_label": 2}
        assert ds.shards[0].meta["dataset"] == {"name": "golden"}
        (x, y), = list(ds.batches(4))
        assert x.tolist() == [[[[1], [2]], [[3], [4]]], [[[5], [6]], [[7], [8]]]] and y.tolist() == [3, -1]
    sf = ShardFile(_golden())
    assert sf.verify_blocks() == [] and sf.check_padding() == []
    sf.close()


@pytest.mark.parametrize("path", BROKEN, ids=[os.path.basename(p)[:-4] for p in BROKEN])
def test_broken_shard(path):
    name = os.path.basename(path)[:-4]
    if name.startswith("valid"):
        with packer_reader.open(path, verify_crc=True) as ds:
            for i in range(len(ds)):
                img, _ = ds[i]
                assert img.dtype == ds.dtype
                ds.meta(i)
            assert ds.shards[0].verify_blocks() == [] and ds.shards[0].check_padding() == []
        return
    if name in PADDING:
        sf = ShardFile(path)  # opens: padding is only checked by verify
        faults = sf.check_padding()
        sf.close()
        assert faults and all(isinstance(f, FormatError) for f in faults)
        return
    if name.startswith("bad-crc-record"):
        rec = int(name[len("bad-crc-record"):])
        with packer_reader.open(path, verify_crc=True) as ds:
            with pytest.raises(CorruptionError) as ei:
                for i in range(len(ds)):
                    ds[i]
            a, b = ei.value.record_range
            assert a <= rec < b and ei.value.path == path
            faults = ds.shards[0].verify_blocks()
            assert len(faults) == 1 and faults[0].record_range[0] <= rec < faults[0].record_range[1]
        return
    with pytest.raises(FormatError) as ei:
        ds = packer_reader.open(path)
        ds.close()
    assert ei.value.path == path
    assert isinstance(ei.value, CorruptionError) == (name in CHECKSUM_ON_OPEN), ei.value


V2 = os.path.join(TESTDATA, "v2")


def test_go_v2_fixture_reads_at_own_shapes():
    """shard/testdata/v2/valid-v2-shapes.pks, written by the Go writer (format version 2): five
    images of shape [-1, -1, 3]; record i is shapesHW[i], byte j is 16*i + j%16, label 10+i,
    aux coarse_label i//2 (shard/shapes_test.go)."""
    hw = [(2, 3), (3, 2), (1, 1), (4, 5), (2, 2)]
    with packer_reader.open(os.path.join(V2, "valid-v2-shapes.pks"), verify_crc=True) as ds:
        assert len(ds) == 5 and ds.record_size is None
        for i, (h, w) in enumerate(hw):
            img, label = ds[i]
            assert img.shape == (h, w, 3) and img.dtype == np.uint8
            assert img.ravel().tolist() == [(16 * i + j % 16) & 0xFF for j in range(h * w * 3)]
            assert label == 10 + i and ds.aux(i) == {"coarse_label": i // 2}
        (imgs, labels), = list(ds.batches(8))
        assert [a.shape for a in imgs] == [(h, w, 3) for h, w in hw] and labels.tolist() == [10, 11, 12, 13, 14]
        assert ds.shards[0].verify_blocks() == []


@pytest.mark.parametrize("name", ["v1-shapes-flag", "v2-shape-mismatch", "v2-shape-zero", "v2-var-no-shapes-flag"])
def test_go_v2_broken_refused(name):
    """The Go reader refuses these at open; so must this one."""
    path = os.path.join(V2, name + ".pks")
    with pytest.raises(FormatError) as ei:
        with packer_reader.open(path, verify_crc=True) as ds:
            for i in range(len(ds)):
                ds[i]
    assert ei.value.path == path
