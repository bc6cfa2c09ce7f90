"""The manifest's own checksum (shard/FORMAT.md, "Dataset"): every reader refuses an edited or
damaged manifest.json at open, and verify reports it."""

import json
import os
import shutil

import pytest

import packer_reader
import shardwriter
from packer_reader import FormatError


@pytest.fixture(params=["shards_dir", "npy_dir", "h5_dir"])
def ds(request, tmp_path):
    d = str(tmp_path / "ds")
    shutil.copytree(request.getfixturevalue(request.param), d)
    return d


def _rewrite(d, fn):
    p = os.path.join(d, "manifest.json")
    with open(p, "rb") as f:
        raw = f.read()
    with open(p, "wb") as f:
        f.write(fn(raw))


def _refused(d, match):
    with pytest.raises(FormatError, match=match) as ei:
        packer_reader.open(d).close()
    assert ei.value.path.endswith("manifest.json")
    rep = packer_reader.verify(d)
    assert [f.kind for f in rep.faults] == ["manifest"], rep
    assert match.split(":")[0] in rep.faults[0].reason


def test_written_manifest_ends_with_its_checksum(ds):
    with open(os.path.join(ds, "manifest.json"), "rb") as f:
        raw = f.read()
    assert raw.endswith(b'"\n}\n') and b',\n  "manifest_sha256": "' in raw[-100:]
    packer_reader.open(ds).close()
    assert packer_reader.verify(ds).ok


def test_edit_refused_at_open(ds):
    # a hand edit that keeps the JSON valid and the numbers consistent
    _rewrite(ds, lambda raw: raw.replace(b'"transform": {}', b'"transform": {"size": 1}', 1))
    _refused(ds, "checksum mismatch")


def test_bit_flip_refused_at_open(ds):
    _rewrite(ds, lambda raw: raw[:40] + bytes([raw[40] ^ 0x20]) + raw[41:])
    with pytest.raises(FormatError):
        packer_reader.open(ds).close()
    assert not packer_reader.verify(ds).ok


def test_missing_checksum_refused_at_open(ds):
    def strip(raw):
        m = json.loads(raw)
        del m["manifest_sha256"]
        return (json.dumps(m, indent=2) + "\n").encode()

    _rewrite(ds, strip)
    _refused(ds, "has no manifest_sha256: written by packer < 0.2")


def test_upper_case_checksum_refused(ds):
    _rewrite(ds, lambda raw: raw[:-70] + raw[-70:].upper().replace(b"MANIFEST_SHA256", b"manifest_sha256"))
    with pytest.raises(FormatError, match="manifest"):
        packer_reader.open(ds).close()


def test_resealed_edit_is_read(ds):
    # the checksum guards the bytes, not the meaning: a resealed manifest is opened (and its
    # contents are then cross-checked against the data by verify)
    p = os.path.join(ds, "manifest.json")
    with open(p) as f:
        m = json.load(f)
    shardwriter.write_manifest(p, m)
    packer_reader.open(ds).close()


def _reseal(d, edit):
    p = os.path.join(d, "manifest.json")
    with open(p) as f:
        m = json.load(f)
    edit(m)
    shardwriter.write_manifest(p, m)


def _move_count(m):
    m["class_counts"][0] -= 1
    m["class_counts"][1] += 1


def _dup_class(m):
    m["classes"][1] = m["classes"][0]


def _swap_files(m):
    if len(m["files"]) < 2:  # data.h5 alone: list it twice instead
        m["files"].append(dict(m["files"][0]))
    m["files"][0], m["files"][-1] = m["files"][-1], m["files"][0]


@pytest.mark.parametrize("edit", [
    _move_count,  # the same sum
    _dup_class,
    _swap_files,
    lambda m: m["label"].update(dtype="int32"),
    lambda m: m["label"].update(aux=m["label"]["aux"] + ["extra"]),
    lambda m: m["label"].update(aux=[]),
    lambda m: m.update(format_version=3),
    lambda m: m["classes"].pop(),
    lambda m: m["files"].append(dict(m["files"][-1])),
], ids=["class_counts-moved", "class-duplicated", "files-swapped", "label-dtype", "aux-added", "aux-removed",
        "format-version", "class-removed", "file-twice"])
def test_resealed_edit_caught_by_cross_checks(ds, edit):
    # the checksum is recomputed: the cross-checks against the data must catch the edit
    _reseal(ds, edit)
    rep = packer_reader.verify(ds)
    assert not rep.ok, "verify accepts a resealed manifest edit"


GEN = ".packer-gen-0123456789abcdef"


def _move_under(d, folder):
    """Every data file moved under folder/, the manifest's paths naming them there."""
    os.makedirs(os.path.join(d, *folder.split("/")), exist_ok=True)
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    for fe in m["files"]:
        os.rename(os.path.join(d, fe["path"]), os.path.join(d, *folder.split("/"), fe["path"]))
        fe["path"] = folder + "/" + fe["path"]
    shardwriter.write_manifest(os.path.join(d, "manifest.json"), m)


def test_generation_prefix_paths_read(ds, tmp_path):
    """A dataset replaced in a bucket (build -o s3://... --force) names its files
    .packer-gen-<16 hex>/NAME; copied to a local folder it reads as the original."""
    want = packer_reader.open(ds)
    imgs, labels = want[0:len(want)]
    _move_under(ds, GEN)
    with packer_reader.open(ds) as got:
        gi, gl = got[0:len(got)]
        assert np_equal(gi, imgs) and np_equal(gl, labels)
        assert [b[1].tolist() for b in got.batches(16, shuffle=True, seed=3)] == \
            [b[1].tolist() for b in want.batches(16, shuffle=True, seed=3)]
    want.close()
    rep = packer_reader.verify(ds)
    assert rep.ok, rep


@pytest.mark.parametrize("folder", ["sub", ".packer-gen-0123", ".packer-gen-0123456789abcdeg",
                                    GEN + "/" + GEN, "a/" + GEN])
def test_other_folders_refused(shards_dir, tmp_path, folder):
    d = str(tmp_path / "ds")
    shutil.copytree(shards_dir, d)
    _move_under(d, folder)
    with pytest.raises(FormatError, match="not a local relative path"):
        packer_reader.open(d).close()


def np_equal(a, b):
    import numpy as np
    return np.array_equal(np.asarray(a), np.asarray(b))


def test_every_format_a_manifest_may_name_has_a_reader():
    from packer_reader import _formats, _manifest

    assert sorted(_formats.READERS) == sorted(_manifest.FORMATS)
    for name, cls in _formats.READERS.items():
        assert cls.format == name
