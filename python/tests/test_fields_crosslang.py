"""The Go writer's version-3 fixture (shard/testdata/fields-v3/: shards, manifest.json and
expected.json, the values the Go side wrote) reads back in Python with the same values."""

import base64
import hashlib
import json
import os

import numpy as np
import pytest

import packer_reader

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "shard", "testdata", "fields-v3")


def _expected():
    p = os.path.join(FIXTURE, "expected.json")
    if not os.path.exists(p):
        pytest.skip("shard/testdata/fields-v3/expected.json is not in this tree (the Go side's fixture of "
                    "format version 3 shards, written by the shard package's tests)")
    with open(p) as f:
        return json.load(f)


def _same(name, kind, got, want):
    if kind == "text":
        assert isinstance(got, str) and got == want, name
    elif kind == "json":
        assert got == want, name
    elif kind == "bytes":
        assert isinstance(got, bytes) and got == base64.b64decode(want), name
    elif kind == "image":
        assert list(got.shape) == want["shape"], name
        assert hashlib.sha256(np.ascontiguousarray(got).tobytes()).hexdigest() == want["sha256"], name
    else:
        w = np.asarray(want, dtype=got.dtype)
        assert got.shape == w.shape or (got.size == 0 and w.size == 0), (name, got.shape, w.shape)
        assert np.array_equal(got.reshape(-1), w.reshape(-1)), name


def test_go_fields_fixture():
    exp = _expected()
    with packer_reader.open(FIXTURE) as ds:
        assert ds.fields == exp["fields"]
        assert ds.manifest["format_version"] == 3
        assert len(ds) == len(exp["records"])
        kinds = {f["name"]: f["kind"] for f in exp["fields"]}
        for i, want in enumerate(exp["records"]):
            rec = ds[i]
            assert rec["label"] == want["label"]
            assert list(rec["image"].shape) == want["shape"]
            assert hashlib.sha256(rec["image"].tobytes()).hexdigest() == want["sample_sha256"]
            assert set(rec) - {"image", "label"} == set(want["fields"])
            for name, value in want["fields"].items():
                _same(name, kinds[name], rec[name], value)
        b = next(iter(ds.batches(len(ds), pad=True)))
        assert b["label"].tolist() == [r["label"] for r in exp["records"]]
    rep = packer_reader.verify(FIXTURE)
    assert rep.ok, rep
