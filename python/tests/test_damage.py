"""Damaged shards raise the right exception naming the file and the record range."""

import os
import struct

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES, SPEC, make_images, make_labels
from packer_reader import CorruptionError, FormatError

N = 90  # 3 shards of 30 records of 60 bytes; checksum blocks of 7 records


@pytest.fixture
def ds_dir(tmp_path):
    imgs = make_images(N, seed=11)
    shardwriter.write_dataset(str(tmp_path), list(imgs), make_labels(N), CLASSES, SPEC,
                              aux={"coarse": np.arange(N) % 3}, shard_size=30 * 60, block_records=7)
    return str(tmp_path)


def shard(d, k):
    return os.path.join(d, "shard-%05d.pks" % k)


def flip(path, offset, bit=0):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ (1 << bit)]))


def footer(path):
    with open(path, "rb") as f:
        f.seek(-64, 2)
        return struct.unpack("<QQQQQQIII4s", f.read(64))


def test_data_bit_flip_names_block_records(ds_dir):
    p = shard(ds_dir, 1)
    n, rs, data_off = footer(p)[:3]
    flip(p, data_off + 10 * rs + 5, 3)  # shard 1, local record 10: block 1 = local records 7..13
    with packer_reader.open(ds_dir, verify_crc=False) as ds:  # the explicit opt-out reads damaged data
        assert len(list(ds.batches(16))) == 6
    with packer_reader.open(ds_dir, verify_crc=True) as ds:
        with pytest.raises(CorruptionError) as ei:
            for _ in ds.batches(16):
                pass
        e = ei.value
        assert e.path == p and e.record_range == (37, 44)
        assert "shard-00001.pks" in str(e) and "records 37..43" in str(e)
        ds[36]  # block 0 of shard 1 is intact
        with pytest.raises(CorruptionError):
            ds[40]
    with packer_reader.open(ds_dir, verify_crc=True) as ds:
        with pytest.raises(CorruptionError) as ei:
            for _ in ds.batches(8, shuffle=True, seed=4, prefetch=2):
                pass
        assert ei.value.record_range == (37, 44)
    rep = packer_reader.verify(ds_dir)
    kinds = sorted(f.kind for f in rep.faults)
    assert kinds == ["checksum", "sha256"], rep
    cs = [f for f in rep.faults if f.kind == "checksum"][0]
    assert cs.record_range == (37, 44) and cs.path == p


def test_every_fault_is_reported(ds_dir):
    for k, rec in [(0, 0), (0, 29), (2, 15)]:
        p = shard(ds_dir, k)
        data_off, rs = footer(p)[2], footer(p)[1]
        flip(p, data_off + rec * rs)
    rep = packer_reader.verify(ds_dir)
    ranges = sorted(f.record_range for f in rep.faults if f.kind == "checksum")
    assert ranges == [(0, 7), (28, 30), (74, 81)], rep
    assert sum(f.kind == "sha256" for f in rep.faults) == 2


def test_index_flip(ds_dir):
    p = shard(ds_dir, 2)
    index_off = footer(p)[4]
    flip(p, index_off + 8 * 4)  # label of local record 4
    with pytest.raises(CorruptionError) as ei:
        packer_reader.open(ds_dir)
    assert ei.value.path == p and ei.value.record_range == (60, 90) and "index" in ei.value.reason
    assert ei.value.offset == index_off
    assert any(f.kind == "checksum" and f.path == p and f.offset == index_off  # no range, as packer verify
               for f in packer_reader.verify(ds_dir).faults)


def test_header_meta_flip(ds_dir):
    p = shard(ds_dir, 0)
    flip(p, 40, 1)  # inside the meta JSON
    with pytest.raises(CorruptionError) as ei:
        packer_reader.open(ds_dir)
    assert ei.value.path == p and ei.value.record_range == (0, 30) and "header" in ei.value.reason


@pytest.mark.parametrize("offset,bit,match", [
    (0, 0, "magic"),
    (8, 1, "version 3"),
    (11, 4, "unknown flags"),
    (15, 4, "meta length"),
    (25, 0, "reserved"),
])
def test_header_fields(ds_dir, offset, bit, match):
    p = shard(ds_dir, 1)
    flip(p, offset, bit)
    with pytest.raises(FormatError, match=match) as ei:
        packer_reader.open(ds_dir)
    assert ei.value.path == p
    rep = packer_reader.verify(ds_dir)
    assert any(f.kind == "structure" and f.path == p for f in rep.faults), rep


def test_footer_flip(ds_dir):
    p = shard(ds_dir, 1)
    size = os.path.getsize(p)
    flip(p, size - 64 + 1)  # record_count
    with pytest.raises(CorruptionError, match="footer"):
        packer_reader.open(ds_dir)
    p2 = shard(ds_dir, 2)
    flip(p2, os.path.getsize(p2) - 2)  # trailer magic
    rep = packer_reader.verify(ds_dir)
    assert {f.path for f in rep.faults if f.kind in ("checksum", "structure")} == {p, p2}, rep


@pytest.mark.parametrize("cut", [1, 64, 4096, 5000])
def test_truncation(ds_dir, cut):
    p = shard(ds_dir, 2)
    size = os.path.getsize(p)
    with open(p, "r+b") as f:
        f.truncate(size - cut)
    with pytest.raises(FormatError) as ei:
        packer_reader.open(ds_dir)
    assert ei.value.path == p
    rep = packer_reader.verify(ds_dir)
    assert any(f.kind == "size" and f.path == p for f in rep.faults)
    assert any(f.kind == "structure" and f.path == p for f in rep.faults)


def test_truncation_during_read(ds_dir):
    with packer_reader.open(ds_dir) as ds:
        p = shard(ds_dir, 1)
        with open(p, "r+b") as f:
            f.truncate(100)
        with pytest.raises(FormatError) as ei:
            for _ in ds.batches(16):
                pass
        assert ei.value.path == p


def test_nonzero_padding(ds_dir):
    p = shard(ds_dir, 0)
    n, rs, data_off, data_len = footer(p)[:4]
    flip(p, data_off + data_len + 3)
    with packer_reader.open(ds_dir) as ds:
        assert len(ds) == N
    rep = packer_reader.verify(ds_dir)
    assert sorted(f.kind for f in rep.faults) == ["sha256", "structure"], rep


def test_missing_and_extra_files(ds_dir):
    os.remove(shard(ds_dir, 1))
    with open(os.path.join(ds_dir, "stray.tmp"), "wb") as f:
        f.write(b"x")
    rep = packer_reader.verify(ds_dir)
    # the unlisted file is a warning (no reader opens it); the missing listed shard is a fault
    assert [f.kind for f in rep.faults] == ["missing"], rep
    assert [(f.kind, os.path.basename(f.path)) for f in rep.warnings] == [("extra", "stray.tmp")], rep
    rep = packer_reader.verify(ds_dir, strict=True)
    assert sorted(f.kind for f in rep.faults) == ["extra", "missing"] and not rep.warnings, rep
    with pytest.raises(OSError):
        packer_reader.open(ds_dir)


def test_bad_manifest(ds_dir):
    mp = os.path.join(ds_dir, "manifest.json")
    with open(mp, "w") as f:
        f.write("{not json")
    with pytest.raises(FormatError, match="manifest"):
        packer_reader.open(ds_dir)
    rep = packer_reader.verify(ds_dir)
    assert [f.kind for f in rep.faults] == ["manifest"]


def test_not_a_shard(tmp_path):
    p = tmp_path / "x.pks"
    p.write_bytes(b"\0" * 8192)
    with pytest.raises(FormatError, match="magic"):
        packer_reader.open(str(p))


def test_manifest_record_counts_must_match(ds_dir):
    import json

    mp = os.path.join(ds_dir, "manifest.json")
    with open(mp) as f:
        m = json.load(f)
    m["files"][1]["records"] = 31
    shardwriter.write_manifest(mp, m)  # resealed: the cross-check is under test, not the checksum
    with pytest.raises(FormatError, match="manifest says 31 records"):
        packer_reader.open(ds_dir)
    rep = packer_reader.verify(ds_dir)
    assert any(f.kind == "count" and f.path == shard(ds_dir, 1) for f in rep.faults), rep


@pytest.mark.parametrize("chunk", [97, 1000, 4096, 1 << 20])
def test_stream_check_matches_block_checks(ds_dir, chunk):
    import hashlib

    from packer_reader._shard import ShardFile

    p = shard(ds_dir, 1)
    n, rs, data_off, data_len = footer(p)[:4]
    for rec in (0, 13, 14, 29):
        flip(p, data_off + rec * rs + 7)
    flip(p, data_off + data_len + 1)  # data padding
    sf = ShardFile(p, 30)
    try:
        sha = hashlib.sha256()
        faults = sf.stream_check(sha, chunk=chunk)
        with open(p, "rb") as f:
            assert sha.hexdigest() == hashlib.sha256(f.read()).hexdigest()
        ranges = [f.record_range for f in faults if isinstance(f, CorruptionError)]
        assert ranges == [e.record_range for e in sf.verify_blocks()] == [(30, 37), (37, 44), (44, 51), (58, 60)]
        assert [f.reason for f in faults if not isinstance(f, CorruptionError)] == ["data padding is not zero"]
    finally:
        sf.close()


def test_exceptions_pickle_and_accept_a_bare_message():
    import pickle

    e = CorruptionError("/d/shard-00001.pks", (37, 44), 4096, "data block 1: CRC-32C mismatch")
    f = pickle.loads(pickle.dumps(e))
    assert type(f) is CorruptionError and f.record_range == (37, 44) and f.offset == 4096 and str(f) == str(e)
    g = pickle.loads(pickle.dumps(FormatError("/d/x.pks", "bad magic", 0)))
    assert g.path == "/d/x.pks" and g.offset == 0 and "bad magic" in str(g)
    assert str(CorruptionError("whole message")) == "whole message"  # how torch re-raises
    assert FormatError("whole message").reason == "whole message"


@pytest.mark.parametrize("prefetch", [None, 0, 2])
def test_damage_outside_the_batch_is_caught_before_its_block_is_handed_out(ds_dir, prefetch):
    # Block 1 of shard 1 is global records 37..43; the batch [36, 39) holds 37 and 38 of it, and
    # the rest of the block (read into the thread's scratch buffer for its CRC) has the flip.
    p = shard(ds_dir, 1)
    n, rs, data_off = footer(p)[:3]
    flip(p, data_off + 12 * rs + 1, 5)  # local record 12 = global 42
    with packer_reader.open(ds_dir) as ds:
        seen = []
        with pytest.raises(CorruptionError) as ei:
            for _, labels in ds.batches(3, prefetch=prefetch):
                seen.append(len(labels))
        assert sum(seen) == 36  # nothing of block 1 was handed out
        assert ei.value.path == p and ei.value.record_range == (37, 44)
        assert "shard-00001.pks" in str(ei.value) and "records 37..43" in str(ei.value)


def test_scratch_buffers_are_per_thread():
    import threading

    from packer_reader import _shard

    here = _shard._scratch(100)
    there = []
    t = threading.Thread(target=lambda: there.append(_shard._scratch(100)))
    t.start()
    t.join()
    a = np.frombuffer(here, dtype=np.uint8)
    b = np.frombuffer(there[0], dtype=np.uint8)
    assert not np.shares_memory(a, b)
    assert len(_shard._scratch(_shard._SCRATCH_MAX + 1)) == _shard._SCRATCH_MAX + 1
