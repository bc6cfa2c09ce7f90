"""Record data CRC-32C is checked by default: flipped bytes are an error naming the shard and
the record range, and verify_crc=False is the explicit way to skip the check."""

import os
import struct
import warnings

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES, SPEC, make_images, make_labels, require_torch
from packer_reader import CorruptionError

N = 90  # 3 shards of 30 records of 60 bytes; checksum blocks of 7 records


@pytest.fixture
def damaged(tmp_path):
    imgs = make_images(N, seed=21)
    d = str(tmp_path)
    shardwriter.write_dataset(d, list(imgs), make_labels(N), CLASSES, SPEC, shard_size=30 * 60, block_records=7)
    p = os.path.join(d, "shard-00001.pks")
    with open(p, "rb") as f:
        f.seek(-64, 2)
        data_off = struct.unpack("<QQQQQQIII4s", f.read(64))[2]
    with open(p, "r+b") as f:  # shard 1, local record 10 (dataset record 40): block 35..41
        f.seek(data_off + 10 * 60 + 5)
        b = f.read(1)[0]
        f.seek(data_off + 10 * 60 + 5)
        f.write(bytes([b ^ 4]))
    return d, imgs


def _check(e):
    assert isinstance(e, CorruptionError)
    assert e.path.endswith("shard-00001.pks") and e.record_range == (37, 44)
    assert "shard-00001.pks" in str(e) and "records 37..43" in str(e)


def test_default_read_refuses_flipped_byte(damaged):
    d, imgs = damaged
    with packer_reader.open(d) as ds:
        with pytest.raises(CorruptionError) as ei:
            ds[40]
        _check(ei.value)
        assert np.array_equal(ds[36][0], imgs[36])  # the intact block next to it reads
    for shuffle in (False, True):
        with packer_reader.open(d) as ds:
            with pytest.raises(CorruptionError) as ei:
                for _ in ds.batches(16, shuffle=shuffle, prefetch=0):
                    pass
            _check(ei.value)
    with packer_reader.open(d) as ds:
        with pytest.raises(CorruptionError) as ei:
            ds[0:N]
        _check(ei.value)


def test_checks_beside_reads(damaged, monkeypatch):
    """Big batches are read in pieces of whole checksum blocks, each checked on the checker
    thread while the next is read (_segment._CHECK_PIECE; made small here so these 60-byte
    records take that path): the same bytes in the same order, and a damaged block is still an
    error before its batch is handed out, from every starting point and piece size."""
    from packer_reader import _crc32c, _segment

    d, imgs = damaged
    monkeypatch.setattr(_crc32c, "BACKEND", "packer-test")  # the path does not depend on which CRC
    calls = []
    real = _segment._SegmentDataset._read_overlapped
    monkeypatch.setattr(_segment._SegmentDataset, "_read_overlapped",
                        lambda self, *a: calls.append(1) or real(self, *a))
    for piece in (60, 7 * 60, 10 * 60):
        monkeypatch.setattr(_segment, "_CHECK_PIECE", piece)
        for bs in (16, 25, 30, 45):
            with packer_reader.open(d) as ds:
                got = []
                with pytest.raises(CorruptionError) as ei:
                    for x, _ in ds.batches(bs, prefetch=0):
                        got.append(x.copy())
                _check(ei.value)
                assert sum(len(x) for x in got) <= 37  # nothing past the damaged block's start
                if got:
                    assert np.array_equal(np.concatenate(got), imgs[:len(np.concatenate(got))])
            with packer_reader.open(d) as ds:  # batches after the damaged one read the same
                x, _ = ds[44:N]
                assert np.array_equal(x, imgs[44:N])
    assert calls


def test_verify_crc_false_reads(damaged):
    d, imgs = damaged
    with packer_reader.open(d, verify_crc=False) as ds:
        x = np.concatenate([b.copy() for b, _ in ds.batches(16)])
        assert len(x) == N and not np.array_equal(x[40], imgs[40]) and np.array_equal(x[41], imgs[41])


def test_torch_default_refuses(damaged):
    require_torch()
    from packer_reader.torch import PackerIterableDataset

    d, _ = damaged
    with pytest.raises(CorruptionError) as ei:
        for _ in PackerIterableDataset(d, batch_size=16):
            pass
    _check(ei.value)
    assert sum(len(y) for _, y in PackerIterableDataset(d, batch_size=16, verify_crc=False)) == N


def test_slow_fallback_warns_once(damaged, monkeypatch):
    from packer_reader import _crc32c, _shards

    d, imgs = damaged
    monkeypatch.setattr(_crc32c, "BACKEND", "numpy")
    monkeypatch.setattr(_crc32c, "crc32c", _crc32c._crc32c_numpy)
    monkeypatch.setattr(_shards, "_warned_slow_crc", False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):
            with packer_reader.open(d) as ds:
                with pytest.raises(CorruptionError):
                    ds[40]  # still checked on the fallback
        with packer_reader.open(d, verify_crc=False):
            pass
    slow = [x for x in w if "python3-crc32c" in str(x.message)]
    assert len(slow) == 1, [str(x.message) for x in w]
    assert "verify_crc=False" in str(slow[0].message)


def test_records_of_damaged_block_never_handed_out(damaged):
    """A read that covers only the head, the middle or the tail of a checksum block must check
    that block before it returns its records: the damaged block is 37..43, the flipped byte is in
    record 40 (ds[35:41] returned it unchecked)."""
    d, _ = damaged
    for lo, hi in ((35, 41), (35, 40), (38, 42), (41, 45), (37, 38)):
        with packer_reader.open(d) as ds:
            with pytest.raises(CorruptionError) as ei:
                ds[lo:hi]
            _check(ei.value)

    for bs in (2, 3, 5, 16):
        with packer_reader.open(d) as ds:
            seen = 0
            with pytest.raises(CorruptionError) as ei:
                for _, labels in ds.batches(bs, prefetch=0):
                    assert seen + len(labels) <= 37, "batch %d..%d handed out" % (seen, seen + len(labels))
                    seen += len(labels)
            _check(ei.value)


@pytest.mark.parametrize("lo,hi", [(38, 41), (37, 44), (35, 39), (42, 46)])
def test_check_records_checks_given_bytes(tmp_path, lo, hi):
    """The check covers the bytes a read returns (one buffer, or one buffer per record as a
    shuffled read gathers them), not a second read of the file: a byte flipped in memory after
    the read is a CorruptionError naming the block 37..43 (shard-00001 local 7..13)."""
    imgs = make_images(N, seed=21)
    d = str(tmp_path)
    shardwriter.write_dataset(d, list(imgs), make_labels(N), CLASSES, SPEC, shard_size=30 * 60, block_records=7)
    for as_list in (False, True):
        with packer_reader.open(d) as ds:
            seg = ds._segs[1]
            recs = [bytearray(imgs[i].tobytes()) for i in range(lo, hi)]
            recs[len(recs) // 2][3] ^= 1
            data = [memoryview(r) for r in recs] if as_list else memoryview(b"".join(recs))
            with pytest.raises(CorruptionError) as ei:
                seg.check_records(lo - 30, hi - 30, data)
            assert ei.value.path.endswith("shard-00001.pks")
        with packer_reader.open(d) as ds:  # the intact bytes pass
            recs = [memoryview(imgs[i].tobytes()) for i in range(lo, hi)]
            ds._segs[1].check_records(lo - 30, hi - 30, recs if as_list else memoryview(b"".join(recs)))


def test_checked_tail_reused(tmp_path, monkeypatch):
    """A check of a batch reads the rest of its last block from the file for the CRC; a read in
    order takes those very bytes for the next batch instead of reading them again
    (_shard.take_tail). The batches must be the records, whatever the batch size against the
    block size, and the tail must be taken."""
    from packer_reader import _segment

    imgs = make_images(N, seed=5)
    d = str(tmp_path)
    shardwriter.write_dataset(d, list(imgs), make_labels(N), CLASSES, SPEC, shard_size=30 * 60, block_records=7)
    taken = []
    real = _segment.take_tail
    monkeypatch.setattr(_segment, "take_tail", lambda seg, lo, hi, out: taken.append(real(seg, lo, hi, out) - lo) or lo + taken[-1])
    for bs in (2, 3, 5, 9, 16, 29):
        taken.clear()
        with packer_reader.open(d) as ds:
            x = np.concatenate([b.copy() for b, _ in ds.batches(bs, prefetch=0)])
        assert np.array_equal(x, imgs), bs
        assert any(taken), "batch size %d: no checked tail was reused" % bs


def test_damaged_tail_not_reused(damaged):
    """The flipped byte (record 40) lies in the tail a batch ending at 38 reads for the CRC of
    block 37..43: the check fails, and the next read of 38.. must fail too, never hand out the
    tail's bytes."""
    d, _ = damaged
    with packer_reader.open(d) as ds:
        with pytest.raises(CorruptionError):
            ds[30:38]
        with pytest.raises(CorruptionError) as ei:
            ds[38:44]
        _check(ei.value)
