"""Datasets cut at fixed input positions (packer build --cut-inputs, shard format version 4):
the reader reads the version-4 shards packer writes and refuses a mixed-up shard by the chunk
and piece its header names (shard/FORMAT.md "Dataset"), as the Go reader does."""
import json
import os

import pytest
from PIL import Image

import packer_reader
import shardwriter
from test_crosslang import build, packer  # noqa: F401 - the fixture


def _cut_dataset(packer, tmp_path):  # noqa: F811
    root = tmp_path / "src"
    for c, cls in enumerate(["cat", "dog"]):
        os.makedirs(root / cls)
        for k in range(7):
            Image.new("RGB", (10 + k, 8 + c), (40 * c, 9 * k, 7)).save(root / cls / f"{k}.png")
    out = tmp_path / "out"
    build(packer, root, out, "--cut-inputs", "3", "--shard-size", "300", "--resize", "8")
    return out


def test_cut_dataset_reads_and_refuses_mixed_up_shards(packer, tmp_path):  # noqa: F811
    out = _cut_dataset(packer, tmp_path)
    m = json.load(open(out / "manifest.json"))
    assert m["format_version"] == 4 and m["cut_inputs"] == 3
    assert [f["shard"]["chunk"] for f in m["files"]][:2] == [0, 0]
    ds = packer_reader.open(str(out))
    assert len(ds) == 14
    for i in range(len(ds)):
        ds[i]
    # shards 0 and 1 swapped, their entries' size and hashes too: only the chunk and piece
    # tell them apart
    a, b = out / m["files"][0]["path"], out / m["files"][1]["path"]
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)
    f0, f1 = dict(m["files"][0]), dict(m["files"][1])
    for key in ("size", "sha256", "index_sha256", "records"):
        m["files"][0][key], m["files"][1][key] = f1[key], f0[key]
    m["files"][1]["first_record"] = f1["records"]
    shardwriter.write_manifest(str(out / "manifest.json"), m)
    with pytest.raises(packer_reader.FormatError) as ei:
        d = packer_reader.open(str(out))
        for i in range(len(d)):
            d[i]
    assert "shard-00000.pks" in str(ei.value) and '"piece": 1' in str(ei.value)
    # a manifest whose pieces skip one is refused as it is read
    m["files"][1]["shard"] = {"chunk": 0, "piece": 2}
    shardwriter.write_manifest(str(out / "manifest.json"), m)
    with pytest.raises(packer_reader.FormatError, match="out of order"):
        packer_reader.open(str(out))
