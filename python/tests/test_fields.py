"""Format version 3 (shard/FORMAT.md "Fields"): datasets whose records carry fields besides the
image and labels, written by the test writer from the text (shardwriter.py, independent of the
reader), read back as dicts; hostile shards refused with the file and record named."""

import json
import os
import struct

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES
from packer_reader import FormatError

SCHEMA = [
    {"name": "caption", "kind": "text", "encoding": "raw"},
    {"name": "info", "kind": "json", "encoding": "raw"},
    {"name": "blob", "kind": "bytes", "encoding": "raw"},
    {"name": "boxes", "kind": "ndarray", "dtype": "float32", "shape": [-1, 4], "encoding": "raw", "geometry": "boxes"},
    {"name": "category", "kind": "ndarray", "dtype": "int64", "shape": [-1], "encoding": "raw", "rows_of": "boxes"},
    {"name": "emb", "kind": "ndarray", "dtype": "float64", "shape": [2, 3], "encoding": "raw"},
    {"name": "mask", "kind": "image", "dtype": "uint8", "shape": [-1, -1, 1], "encoding": "raw", "geometry": "mask"},
    {"name": "flag", "kind": "ndarray", "dtype": "uint8", "shape": [1], "encoding": "raw"},
]


def make_records(n, var=False, seed=0):
    """(images, labels, python values per record, raw field bytes per record)."""
    rng = np.random.default_rng(seed)
    images, values, raws = [], [], []
    for i in range(n):
        h, w = (3 + i % 4, 2 + i % 3) if var else (4, 5)
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        k = i % 3  # 0 boxes for every third record
        boxes = rng.random((k, 4)).astype(np.float32) * 10
        cat = rng.integers(0, 80, k).astype(np.int64)
        emb = rng.standard_normal((2, 3))
        mask = rng.integers(0, 4, (h, w, 1), dtype=np.uint8)
        v = {"caption": "record %d: caf\u00e9 \u2603" % i, "info": {"i": i, "tags": ["a", "b"][:i % 3], "x": None},
             "blob": bytes(rng.integers(0, 256, i % 5, dtype=np.uint8)), "boxes": boxes, "category": cat,
             "emb": emb, "mask": mask, "flag": np.array([200 + i], dtype=np.uint8)}
        images.append(img)
        values.append(v)
        raws.append([v["caption"].encode(), json.dumps(v["info"]).encode(), v["blob"], boxes.astype("<f4").tobytes(),
                     cat.astype("<i8").tobytes(), emb.astype("<f8").tobytes(), mask.tobytes(), bytes([200 + i])])
    labels = (np.arange(n) * 3) % len(CLASSES)
    return images, labels, values, raws


def spec(var=False):
    return {"shape": [-1, -1, 3] if var else [4, 5, 3], "dtype": "uint8", "layout": "hwc"}


@pytest.fixture(scope="module")
def fixed_ds(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("fields_fixed"))
    images, labels, values, raws = make_records(23)
    shardwriter.write_dataset(d, images, labels, CLASSES, spec(), fields=SCHEMA, field_values=raws,
                              shard_size=10 * 60)
    return d, images, labels, values


@pytest.fixture(scope="module")
def var_ds(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("fields_var"))
    images, labels, values, raws = make_records(17, var=True)
    shardwriter.write_dataset(d, images, labels, CLASSES, spec(True), fields=SCHEMA, field_values=raws,
                              shard_size=200)
    return d, images, labels, values


def same_record(got, img, label, v):
    assert np.array_equal(got["image"], img) and got["label"] == label
    assert set(got) == {"image", "label"} | set(v)
    for k, want in v.items():
        if isinstance(want, np.ndarray):
            assert got[k].dtype == want.dtype and got[k].shape == want.shape and np.array_equal(got[k], want), k
        else:
            assert type(got[k]) is type(want) and got[k] == want, k


@pytest.mark.parametrize("which", ["fixed_ds", "var_ds"])
def test_records_round_trip(request, which):
    d, images, labels, values = request.getfixturevalue(which)
    with packer_reader.open(d) as ds:
        assert len(ds.shards) > 1 and ds.fields == SCHEMA and ds.manifest["format_version"] == 3
        for i in range(len(ds)):
            same_record(ds[i], images[i], int(labels[i]), values[i])
        assert ds.field(5, "caption") == values[5]["caption"]
        assert np.array_equal(ds.image(4), images[4]) and ds.label(4) == labels[4]
        assert packer_reader.verify(d).ok


def test_batches_fixed_stacked_and_lists(fixed_ds):
    d, images, labels, values = fixed_ds
    with packer_reader.open(d) as ds:
        seen = []
        for b in ds.batches(4, shuffle=True, seed=3):
            idx = [int(np.flatnonzero([np.array_equal(x, im) for im in images])[0]) for x in b["image"]]
            seen += idx
            assert b["image"].shape == (len(idx), 4, 5, 3)
            assert np.array_equal(b["label"], labels[idx]) and b["label"].dtype == np.int64
            assert b["emb"].shape == (len(idx), 2, 3) and np.array_equal(b["emb"], np.stack([values[i]["emb"] for i in idx]))
            assert b["mask"].shape == (len(idx), 4, 5, 1)
            assert b["caption"] == [values[i]["caption"] for i in idx]
            assert b["info"] == [values[i]["info"] for i in idx]
            assert b["blob"] == [values[i]["blob"] for i in idx]
            for j, i in enumerate(idx):
                assert np.array_equal(b["boxes"][j], values[i]["boxes"])
        assert sorted(seen) == list(range(len(images)))
        assert list(ds.order(shuffle=True, seed=3)) == seen
        b = ds[2:7]
        assert b["image"].shape == (5, 4, 5, 3) and b["caption"] == [values[i]["caption"] for i in range(2, 7)]


def test_batches_pad(var_ds):
    d, images, labels, values = var_ds
    with packer_reader.open(d) as ds:
        b = next(iter(ds.batches(6, pad=True)))
        assert isinstance(b["image"], list) and [x.shape for x in b["image"]] == [images[i].shape for i in range(6)]
        assert isinstance(b["mask"], list) and b["mask"][3].shape == images[3].shape[:2] + (1,)
        rows = [len(values[i]["boxes"]) for i in range(6)]
        assert b["boxes_lengths"].tolist() == rows and b["category_lengths"].tolist() == rows
        assert b["boxes"].shape == (6, max(rows), 4) and b["boxes"].dtype == np.float32
        for j in range(6):
            assert np.array_equal(b["boxes"][j, :rows[j]], values[j]["boxes"]) and not b["boxes"][j, rows[j]:].any()
            assert np.array_equal(b["category"][j, :rows[j]], values[j]["category"])
        b = next(iter(ds.batches(6)))
        assert "boxes_lengths" not in b and isinstance(b["boxes"], list)


def test_no_fields_unchanged(shards_dir):
    with packer_reader.open(shards_dir) as ds:
        assert ds.fields == []
        img, label = ds[0]
        assert isinstance(label, int)
        assert ds.record(0)["label"] == label and np.array_equal(ds.record(0)["image"], img)


# -- hostile shards ----------------------------------------------------------------------------

def one_shard(tmp_path, schema=SCHEMA, n=4, var=False, mutate=None, **kw):
    images, labels, values, raws = make_records(n, var)
    if mutate:
        mutate(raws)
    p = str(tmp_path / "one.pks")
    shardwriter.write_shard(p, images, labels, spec(var), fields=schema, field_values=raws, **kw)
    return p


def test_non_utf8_text_and_bad_json(tmp_path):
    def bad_text(raws):
        raws[2][0] = b"caf\xe9"

    with packer_reader.open(one_shard(tmp_path, mutate=bad_text)) as ds:
        ds[1]
        with pytest.raises(FormatError, match="record 2: field 'caption': not UTF-8") as ei:
            ds[2]
        assert ei.value.path.endswith("one.pks")

    def bad_json(raws):
        raws[1][1] = b'{"a": NaN}'

    with packer_reader.open(one_shard(tmp_path, mutate=bad_json)) as ds:
        with pytest.raises(FormatError, match="record 1: field 'info': not one JSON value"):
            ds[1]


def test_fieldlens_past_the_record(tmp_path):
    _, _, _, raws = make_records(4)
    lens = [[len(v) for v in r] for r in raws]
    lens[2][0] += 1000
    with pytest.raises(FormatError, match="record 2 .*field lengths add up") as ei:
        packer_reader.open(one_shard(tmp_path, fieldlens=lens))
    assert ei.value.path.endswith("one.pks")


def test_field_length_not_its_kind(tmp_path):
    def short_boxes(raws):  # a box row cut short, the sample value still right
        raws[1][3] = raws[1][3][:-4]
        raws[1][4] = raws[1][4][:8 * (len(raws[1][3]) // 16)]

    with pytest.raises(FormatError, match="record 1 .*field 'boxes'"):
        packer_reader.open(one_shard(tmp_path, mutate=short_boxes))

    def rows_differ(raws):
        raws[2][4] += struct.pack("<q", 7)

    with pytest.raises(FormatError, match="record 2 .*field 'category'.*rows of 'boxes'"):
        packer_reader.open(one_shard(tmp_path, mutate=rows_differ))

    def mask_size(raws):
        raws[0][6] = raws[0][6][:-1]

    with pytest.raises(FormatError, match="record 0 .*field 'mask'"):
        packer_reader.open(one_shard(tmp_path, var=True, mutate=mask_size))


@pytest.mark.parametrize("edit,match", [
    (lambda s: s[0].update(encoding="zstd"), "unknown encoding 'zstd'"),
    (lambda s: s[0].update(kind="audio"), "unknown kind"),
    (lambda s: s[5].update(shape=[2, -1]), "only the first may be -1"),
    (lambda s: s[4].update(rows_of="caption"), "not a boxes field"),
    (lambda s: s[6].update(shape=[1, -1, -1]), "height and width"),
    (lambda s: s[1].update(name="caption"), "used twice"),
    (lambda s: s[1].update(name="label"), "reserved"),
    (lambda s: s[0].update(lang="en"), "unknown member"),
    (lambda s: s[0].update(dtype="uint8"), "a text field has no dtype"),
    (lambda s: s[7].pop("shape"), "1 to 8 integers"),
    (lambda s: s[3].update(rows_of="boxes"), "without rows_of"),
    (lambda s: s[6].update(shape=[-1, -1, 5000]), "height and width"),
])
def test_bad_schema_refused(tmp_path, edit, match):
    schema = json.loads(json.dumps(SCHEMA))
    edit(schema)
    with pytest.raises(FormatError, match=match):
        packer_reader.open(one_shard(tmp_path, schema=schema))


def test_versions_and_flags(tmp_path):
    with pytest.raises(FormatError, match="version 5"):
        packer_reader.open(one_shard(tmp_path, version=5))
    with pytest.raises(FormatError, match="version 4 shard's meta shard must hold chunk and piece"):
        packer_reader.open(one_shard(tmp_path, version=4))  # its meta shard holds an index
    with pytest.raises(FormatError, match="unknown flags"):  # FlagFields in a version-2 shard
        packer_reader.open(one_shard(tmp_path, var=True, version=2))
    p = str(tmp_path / "v3.pks")
    imgs = list(np.zeros((3, 4, 5, 3), np.uint8))
    shardwriter.write_shard(p, imgs, [0, 1, 2], spec(), var_size=True, version=3)  # no FlagFields
    with pytest.raises(FormatError, match="version 3 shard needs FlagFields"):
        packer_reader.open(p)
    # below version 3 "fields" is any meta key, not a schema
    shardwriter.write_shard(p, imgs, [0, 1, 2], spec(), extra_meta={"fields": "not a schema"})
    with packer_reader.open(p) as ds:
        assert ds.fields == [] and ds[2][1] == 2


def test_schema_mismatch_manifest_and_shards(tmp_path, fixed_ds):
    import shutil

    d = str(tmp_path / "ds")
    shutil.copytree(fixed_ds[0], d)
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    m["fields"][0]["name"] = "text"
    shardwriter.write_manifest(os.path.join(d, "manifest.json"), m)
    with pytest.raises(FormatError, match="fields schema"):
        packer_reader.open(d)
    rep = packer_reader.verify(d)
    assert not rep.ok and any("fields" in f.reason for f in rep.faults), rep
    m.pop("fields")
    shardwriter.write_manifest(os.path.join(d, "manifest.json"), m)
    with pytest.raises(FormatError, match="fields schema"):
        packer_reader.open(d)


# -- torch -------------------------------------------------------------------------------------

def test_torch_loader_dicts_and_detection_collate(var_ds, fixed_ds):
    from conftest import require_torch

    torch = require_torch()
    from packer_reader.torch import PackerIterableDataset, collate_detection, loader

    d, images, labels, values = var_ds
    train = loader(d, batch_size=5, device="cpu")
    assert train.fields == SCHEMA
    got = 0
    for b in train:
        n = len(b["image"])
        assert all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8 for t in b["image"])
        assert b["label"].dtype == torch.int64 and b["label"].tolist() == labels[got:got + n].tolist()
        assert b["caption"] == [values[i]["caption"] for i in range(got, got + n)]
        assert b["info"] == [values[i]["info"] for i in range(got, got + n)]
        assert b["emb"].dtype == torch.float64 and b["emb"].shape == (n, 2, 3)
        imgs, targets = collate_detection(b, train.fields)
        for j, t in enumerate(targets):
            v = values[got + j]
            assert t["boxes"].dtype == torch.float32 and torch.equal(t["boxes"], torch.from_numpy(v["boxes"]))
            assert t["labels"].dtype == torch.int64 and t["labels"].tolist() == v["category"].tolist()
            assert torch.equal(imgs[j], torch.from_numpy(images[got + j]))
        got += n
    assert got == len(images)

    # padded batches through worker processes give the same targets
    train = loader(d, batch_size=4, device="cpu", pad=True, num_workers=2, shuffle=True, seed=5)
    order = list(PackerIterableDataset(d, 4, shuffle=True, seed=5)._dataset().order(shuffle=True, seed=5))
    seen = []
    for b in train:
        assert b["boxes"].dim() == 3 and b["boxes_lengths"].dtype == torch.int64
        _, targets = collate_detection(b, train.fields)
        seen += [t["labels"].tolist() for t in targets]
    assert sorted(map(tuple, seen)) == sorted(tuple(values[i]["category"].tolist()) for i in order)

    d = fixed_ds[0]
    b = next(iter(loader(d, batch_size=3, device="cpu")))
    assert b["image"].shape == (3, 4, 5, 3) and b["mask"].shape == (3, 4, 5, 1)


# -- npy and hdf5 field layouts (written here with numpy and h5py, as the layouts say) ----------

def _add_files(d, m, rels):
    m["files"] += [shardwriter._file_entry(d, r) for r in rels]
    m["fields"] = SCHEMA
    shardwriter.write_manifest(os.path.join(d, "manifest.json"), m)


def write_npy_fields(d, images, labels, values):
    m = shardwriter.write_npy_dataset(d, np.stack(images), labels, CLASSES, spec())
    rels = []
    for f in SCHEMA:
        name, vals = f["name"], [v[f["name"]] for v in values]
        if f["kind"] == "image" or (f["kind"] == "ndarray" and f.get("shape", [])[:1] != [-1]):
            np.save(os.path.join(d, name + ".npy"), np.stack(vals))
            rels.append(name + ".npy")
            continue
        if f["kind"] == "ndarray":
            flat = np.concatenate(vals)
            counts = [len(v) for v in vals]
        else:
            raw = [v.encode() if f["kind"] == "text" else json.dumps(v).encode() if f["kind"] == "json" else v
                   for v in vals]
            flat = np.frombuffer(b"".join(raw), dtype=np.uint8)
            counts = [len(r) for r in raw]
        np.save(os.path.join(d, name + ".values.npy"), flat)
        np.save(os.path.join(d, name + ".offsets.npy"), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
        rels += [name + ".values.npy", name + ".offsets.npy"]
    _add_files(d, m, rels)


def write_h5_fields(d, images, labels, values):
    import h5py

    m = shardwriter.write_h5_dataset(d, np.stack(images), labels, CLASSES, spec())
    with h5py.File(os.path.join(d, "data.h5"), "a") as h:
        for f in SCHEMA:
            name, vals = f["name"], [v[f["name"]] for v in values]
            if f["kind"] == "image" or (f["kind"] == "ndarray" and f.get("shape", [])[:1] != [-1]):
                h.create_dataset(name, data=np.stack(vals))
            elif f["kind"] == "ndarray":
                ds = h.create_dataset(name, (len(vals),), dtype=h5py.vlen_dtype(np.dtype(f["dtype"])))
                for i, v in enumerate(vals):
                    ds[i] = v.reshape(-1)
                ds.attrs["shape"] = np.asarray(f["shape"], dtype=np.int64)
            elif f["kind"] == "bytes":
                ds = h.create_dataset(name, (len(vals),), dtype=h5py.vlen_dtype(np.uint8))
                for i, v in enumerate(vals):
                    ds[i] = np.frombuffer(v, dtype=np.uint8)
            else:
                strs = [v if f["kind"] == "text" else json.dumps(v) for v in vals]
                h.create_dataset(name, data=strs, dtype=h5py.string_dtype("utf-8"))
            h[name].attrs["kind"] = f["kind"]
        h.attrs["fields"] = json.dumps(SCHEMA)
    m["files"] = []
    _add_files(d, m, ["data.h5"])


@pytest.mark.parametrize("fmt", ["npy", "hdf5"])
def test_npy_hdf5_field_layouts(tmp_path, fmt):
    if fmt == "hdf5":
        pytest.importorskip("h5py")
    d = str(tmp_path / fmt)
    images, labels, values, _ = make_records(9)
    (write_npy_fields if fmt == "npy" else write_h5_fields)(d, images, labels, values)
    with packer_reader.open(d) as ds:
        assert ds.format == fmt and ds.fields == SCHEMA
        for i in range(len(ds)):
            same_record(ds[i], images[i], int(labels[i]), values[i])
        b = next(iter(ds.batches(4, pad=True)))
        assert b["image"].shape == (4, 4, 5, 3) and b["mask"].shape == (4, 4, 5, 1)
        assert b["boxes_lengths"].tolist() == [len(values[i]["boxes"]) for i in range(4)]
    rep = packer_reader.verify(d)
    assert rep.ok, rep


def test_npy_field_files_checked(tmp_path):
    d = str(tmp_path / "npy")
    images, labels, values, _ = make_records(6)
    write_npy_fields(d, images, labels, values)
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    # an offsets file whose offsets run backwards
    np.save(os.path.join(d, "caption.offsets.npy"), np.array([0, 5, 3, 9, 12, 14, 20], dtype=np.int64))
    m["files"] = [fe if fe["path"] != "caption.offsets.npy" else shardwriter._file_entry(d, fe["path"])
                  for fe in m["files"]]
    shardwriter.write_manifest(os.path.join(d, "manifest.json"), m)
    with pytest.raises(FormatError, match="offsets") as ei:
        packer_reader.open(d)
    assert ei.value.path.endswith("caption.offsets.npy")
    assert not packer_reader.verify(d).ok


def test_verify_reports_bad_values(tmp_path):
    images, labels, values, raws = make_records(8)
    raws[3][0] = b"\xff\xfe caption"
    raws[5][1] = b"{not json"
    d = str(tmp_path / "ds")
    shardwriter.write_dataset(d, images, labels, CLASSES, spec(), fields=SCHEMA, field_values=raws, shard_size=4 * 60)
    rep = packer_reader.verify(d)
    bad = sorted((f.record_range, f.path.endswith("shard-00001.pks")) for f in rep.faults)
    assert bad == [((3, 4), False), ((5, 6), True)], rep
    assert "not UTF-8" in str(rep) and "not one JSON value" in str(rep)


def test_h5_missing_field_dataset(tmp_path):
    pytest.importorskip("h5py")
    import h5py

    d = str(tmp_path / "h5")
    images, labels, values, _ = make_records(5)
    write_h5_fields(d, images, labels, values)
    with h5py.File(os.path.join(d, "data.h5"), "a") as h:
        del h["category"]
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    m["files"] = [shardwriter._file_entry(d, "data.h5")]
    shardwriter.write_manifest(os.path.join(d, "manifest.json"), m)
    with pytest.raises(FormatError, match="missing dataset /category"):
        packer_reader.open(d)
    rep = packer_reader.verify(d)
    assert any("/category" in f.reason for f in rep.faults), rep


def test_dict_key_collisions(tmp_path):
    schema = [{"name": "image", "kind": "text", "encoding": "raw"},
              {"name": "b", "kind": "ndarray", "dtype": "int32", "shape": [-1], "encoding": "raw"},
              {"name": "b_lengths", "kind": "text", "encoding": "raw"}]
    images = list(np.zeros((2, 4, 5, 3), np.uint8))
    raws = [[b"x", struct.pack("<i", 7), b"y"], [b"z", b"", b"w"]]
    p = str(tmp_path / "c.pks")
    shardwriter.write_shard(p, images, [0, 1], spec(), fields=schema, field_values=raws)
    with packer_reader.open(p) as ds:
        assert ds.field(1, "image") == "z" and ds.field(0, "b").tolist() == [7]
        with pytest.raises(FormatError, match="field 'image' has the name"):
            ds[0]
        with pytest.raises(FormatError, match="field 'image' has the name"):
            next(iter(ds.batches(2)))
    schema[0]["name"] = "a"
    shardwriter.write_shard(p, images, [0, 1], spec(), fields=schema, field_values=raws)
    with packer_reader.open(p) as ds:
        assert ds[1]["a"] == "z" and next(iter(ds.batches(2)))["b_lengths"] == ["y", "w"]
        with pytest.raises(ValueError, match="pad=True"):
            next(iter(ds.batches(2, pad=True)))


def test_cli_inspect_shows_fields(fixed_ds):
    from test_cli import run

    r = run("inspect", fixed_ds[0])
    assert r.returncode == 0, r.stderr
    assert 'field boxes: {"dtype": "float32", "encoding": "raw", "geometry": "boxes", "kind": "ndarray", ' \
           '"shape": [-1, 4]}' in r.stdout and "field caption: " in r.stdout


def test_verify_label_minus_one_means_no_class(tmp_path):
    images, labels, values, raws = make_records(4)
    d = str(tmp_path / "ds")
    labels = [-1, 2, -2, -1]  # -1: a record without a class (COCO, captions); -2 is no label
    shardwriter.write_dataset(d, images, labels, CLASSES, spec(), fields=SCHEMA, field_values=raws)
    rep = packer_reader.verify(d)
    assert [(f.kind, f.record_range) for f in rep.faults] == [("labels", (2, 3))], rep
    assert packer_reader.open(d)[0]["label"] == -1


@pytest.mark.parametrize("which", ["fixed_ds", "var_ds"])
def test_batches_read_a_run_at_once_as_records(request, which):
    """In-order batches read each shard's share of a batch in one call (crossing shard
    boundaries): the same values as record by record, for every batch size."""
    ds = packer_reader.open(request.getfixturevalue(which)[0])
    want = [ds[i] for i in range(len(ds))]
    for bs in (1, 3, 7, len(ds)):
        k = 0
        for b in ds.batches(bs):
            for j in range(len(b["label"])):
                w = want[k]
                assert int(b["label"][j]) == w["label"] and np.array_equal(b["image"][j], w["image"])
                for f in ds.fields:
                    got, exp = b[f["name"]][j], w[f["name"]]
                    assert np.array_equal(got, exp) if isinstance(exp, np.ndarray) else got == exp
                k += 1
        assert k == len(ds)


def test_batches_run_checks_the_bytes(tmp_path, fixed_ds):
    """A flipped byte in a record's field is caught by the batch read's CRC check."""
    import shutil
    from packer_reader import CorruptionError
    d = str(tmp_path / "d")
    shutil.copytree(fixed_ds[0], d)
    first = sorted(p for p in os.listdir(d) if p.endswith(".pks"))[0]
    path = os.path.join(d, first)
    ds = packer_reader.open(d)
    off = ds._segs[0].range_span(0, 1)[0] + int(ds._segs[0].offsets[1]) - 1  # record 0's last byte
    ds.close()
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0xFF]))
    ds = packer_reader.open(d)
    with pytest.raises(CorruptionError):
        for _ in ds.batches(4):
            pass
