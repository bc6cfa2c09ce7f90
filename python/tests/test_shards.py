import os

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES, SPEC, make_images


def collect(it, copy=True):
    imgs, labs = [], []
    for x, y in it:
        imgs.append(x.copy() if copy else x)
        labs.append(y.copy() if copy else y)
    return imgs, labs


def test_open_and_random_access(shards_dir, data):
    imgs, labels, coarse, metas = data
    with packer_reader.open(shards_dir) as ds:
        assert isinstance(ds, packer_reader.ShardDataset)
        assert len(ds) == len(imgs) and len(ds.shards) == 7
        assert ds.classes == CLASSES
        assert ds.sample_spec == SPEC and ds.shape == (4, 5, 3) and ds.dtype == np.uint8
        for i in [0, 29, 30, 31, 119, 202, -1]:
            img, lab = ds[i]
            assert img.shape == (4, 5, 3) and img.dtype == np.uint8
            assert np.array_equal(img, imgs[i]) and lab == labels[i] == ds.label(i)
            assert ds.aux(i) == {"coarse": int(coarse[i])}
            assert ds.meta(i) == metas[i]
        with pytest.raises(IndexError):
            ds[len(imgs)]
        assert np.array_equal(ds.labels, labels)


def test_open_manifest_path_and_single_shard(shards_dir, data):
    imgs = data[0]
    with packer_reader.open(os.path.join(shards_dir, "manifest.json")) as ds:
        assert len(ds) == len(imgs)
    with packer_reader.open(os.path.join(shards_dir, "shard-00001.pks")) as ds:
        assert len(ds) == 30 and np.array_equal(ds[0][0], imgs[30])


@pytest.mark.parametrize("B", [1, 7, 30, 64, 500])
@pytest.mark.parametrize("prefetch", [0, 2])
def test_batches_in_order(shards_dir, data, B, prefetch):
    imgs, labels = data[0], data[1]
    with packer_reader.open(shards_dir) as ds:
        xs, ys = collect(ds.batches(B, prefetch=prefetch))
    assert all(x.shape[0] == B for x in xs[:-1]) and all(x.shape[1:] == (4, 5, 3) for x in xs)
    assert np.array_equal(np.concatenate(xs), imgs)
    assert np.array_equal(np.concatenate(ys), labels) and ys[0].dtype == np.int64


def test_batches_are_fresh_unless_views_asked_for(shards_dir, data):
    with packer_reader.open(shards_dir) as ds:
        for prefetch in (0, 2):  # the default: every kept batch stays intact
            b = list(ds.batches(10, prefetch=prefetch))
            assert not any(np.shares_memory(b[i][0], b[j][0]) for i in range(len(b)) for j in range(i))
            assert np.array_equal(np.concatenate([x for x, _ in b]), data[0])
        a = list(ds.batches(10, prefetch=0, copy=False))  # the fast path: one reused buffer
        assert a[0][0].base is a[1][0].base or np.shares_memory(a[0][0], a[1][0])
        assert not np.array_equal(a[0][0], data[0][0:10]), "views of the reused buffer were expected"


def test_go_names_for_world_and_buffer(shards_dir):
    with packer_reader.open(shards_dir) as ds:
        a = ds.order(shuffle=True, seed=3, rank=1, world_size=3, buffer_size=50, order_version=1)
        b = ds.order(shuffle=True, seed=3, rank=1, world=3, buffer=50, order_version=1)
        assert np.array_equal(a, b) and not np.array_equal(a, ds.order(shuffle=True, seed=3, rank=1, world=3, order_version=1))
        ya = np.concatenate([y for _, y in ds.batches(7, shuffle=True, seed=3, rank=1, world_size=3, order_version=1)])
        yb = np.concatenate([y for _, y in ds.batches(7, shuffle=True, seed=3, rank=1, world=3, order_version=1)])
        assert np.array_equal(ya, yb)
        with pytest.raises(TypeError, match="world_size=2 and world=3"):
            ds.order(world_size=2, world=3)


def test_drop_last_and_start(shards_dir, data):
    imgs = data[0]
    with packer_reader.open(shards_dir) as ds:
        xs, _ = collect(ds.batches(50, drop_last=True))
        assert [len(x) for x in xs] == [50, 50, 50, 50]
        xs, _ = collect(ds.batches(16, start=37))
        assert np.array_equal(np.concatenate(xs), imgs[37:])
        assert list(ds.batches(16, start=len(ds))) == []
        with pytest.raises(ValueError, match="start position 1000 outside"):  # ORDER.md v2: start <= N
            list(ds.batches(16, start=1000))
        assert list(ds.batches(16, start=1000, order_version=1)) == []  # v1: this rank's records, all read


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("world", [1, 2, 3, 5])
@pytest.mark.parametrize("shuffle", [False, True])
def test_rank_split_covers_everything_once(shards_dir, data, world, shuffle, version):
    imgs, labels = data[0], data[1]
    seen = []
    counts = set()
    with packer_reader.open(shards_dir) as ds:
        for r in range(world):
            kw = dict(buffer_size=20) if version == 1 else dict(batch_size=8)
            order = ds.order(shuffle=shuffle, seed=9, epoch=1, rank=r, world_size=world, order_version=version, **kw)
            xs, ys = collect(ds.batches(8, shuffle=shuffle, seed=9, epoch=1, rank=r, world_size=world,
                                        buffer_size=20, order_version=version))
            x = np.concatenate(xs)
            assert np.array_equal(x, imgs[order]) and np.array_equal(np.concatenate(ys), labels[order])
            seen += order.tolist()
            counts.add(len(xs))
    if version == 1:
        assert sorted(seen) == list(range(len(imgs)))
    else:  # every record, plus fewer than `world` repeated to pad the last batch; equal batch counts
        assert sorted(set(seen)) == list(range(len(imgs))) and len(seen) - len(imgs) < world
        assert len(counts) == 1


def test_shuffle_determinism(shards_dir, data):
    imgs = data[0]
    with packer_reader.open(shards_dir) as ds:
        a = np.concatenate(collect(ds.batches(32, shuffle=True, seed=5))[1])
        b = np.concatenate(collect(ds.batches(32, shuffle=True, seed=5, prefetch=0))[1])
        c = np.concatenate(collect(ds.batches(32, shuffle=True, seed=6))[1])
        d = np.concatenate(collect(ds.batches(32, shuffle=True, seed=5, epoch=1))[1])
        xs, _ = collect(ds.batches(32, shuffle=True, seed=5))
        order = ds.order(shuffle=True, seed=5)
    assert np.array_equal(a, b) and not np.array_equal(a, c) and not np.array_equal(a, d)
    assert np.array_equal(np.concatenate(xs), imgs[order])
    assert sorted(order.tolist()) == list(range(len(imgs)))


def test_shuffle_resume(shards_dir):
    with packer_reader.open(shards_dir) as ds:
        full = np.concatenate(collect(ds.batches(10, shuffle=True, seed=3, epoch=2, rank=1, world_size=2, order_version=1))[0])
        for start in [0, 5, 10, 57, 101]:
            part = collect(ds.batches(10, shuffle=True, seed=3, epoch=2, rank=1, world_size=2, start=start, order_version=1))[0]
            got = np.concatenate(part) if part else np.zeros((0,) + full.shape[1:], full.dtype)
            assert np.array_equal(got, full[start:])


def test_verify_crc_reads(shards_dir, data):
    imgs = data[0]
    with packer_reader.open(shards_dir, verify_crc=True) as ds:
        assert np.array_equal(np.concatenate(collect(ds.batches(11))[0]), imgs)
        assert ds.shards[0]._verified.all()
    with packer_reader.open(shards_dir, verify_crc=True) as ds:
        xs = collect(ds.batches(13, shuffle=True, seed=1))[0]
        assert all(s._verified.all() for s in ds.shards)
        assert len(np.concatenate(xs)) == len(imgs)


def test_direct_io(tmp_path):
    imgs = make_images(300, shape=(32, 32, 3), seed=4)  # 3 KiB records: batches are not page aligned
    labels = np.arange(300) % 5
    shardwriter.write_dataset(str(tmp_path), list(imgs), labels, CLASSES,
                              {"shape": [32, 32, 3], "dtype": "uint8", "layout": "hwc"}, shard_size=3072 * 70)
    with packer_reader.open(str(tmp_path), direct=True, verify_crc=True) as ds:
        assert np.array_equal(np.concatenate(collect(ds.batches(33))[0]), imgs)


def test_float_dtypes(tmp_path):
    for dt, name in [(np.float16, "float16"), (np.float32, "float32")]:
        imgs = make_images(40, shape=(3, 4, 4), dtype=dt)
        spec = {"shape": [3, 4, 4], "dtype": name, "layout": "chw"}
        d = str(tmp_path / name)
        shardwriter.write_dataset(d, list(imgs), np.zeros(40, int), ["x"], spec, shard_size=700)
        with packer_reader.open(d) as ds:
            assert ds.dtype == np.dtype(dt) and ds[3][0].dtype == np.dtype(dt)
            assert np.array_equal(np.concatenate(collect(ds.batches(6, shuffle=True, seed=1))[0]),
                                  imgs[ds.order(shuffle=True, seed=1)])


def test_variable_size_records(tmp_path):
    rng = np.random.default_rng(2)
    clips = [rng.integers(0, 256, (t, 2, 2, 3), dtype=np.uint8) for t in [1, 4, 2, 7, 3, 5]]
    metas = [{"frames": len(c), "video": "v%d.mp4" % i} for i, c in enumerate(clips)]
    spec = {"shape": [-1, 2, 2, 3], "dtype": "uint8", "layout": "thwc"}
    shardwriter.write_dataset(str(tmp_path), clips, [0, 1, 0, 1, 0, 1], ["a", "b"], spec, metas=metas,
                              shard_size=12 * 9)
    with packer_reader.open(str(tmp_path), verify_crc=True) as ds:
        assert not ds.fixed and len(ds) == 6
        for i, c in enumerate(clips):
            assert np.array_equal(ds[i][0], c) and ds.meta(i) == metas[i]
        got = [x for b, _ in ds.batches(4, shuffle=True, seed=2) for x in b]
        order = ds.order(shuffle=True, seed=2)
        assert all(np.array_equal(g, clips[i]) for g, i in zip(got, order))
    assert packer_reader.verify(str(tmp_path)).ok


def test_empty_dataset(tmp_path):
    shardwriter.write_dataset(str(tmp_path), [], [], ["a"], SPEC)
    with packer_reader.open(str(tmp_path)) as ds:
        assert len(ds) == 0 and list(ds.batches(4)) == []


def test_many_shards_keep_no_descriptors(tmp_path, monkeypatch, data):
    """Above MAX_OPEN_SHARDS each read opens its shard; a replaced shard is detected."""
    import packer_reader._shards as dsmod

    imgs, labels = data[0], data[1]
    monkeypatch.setattr(dsmod, "MAX_OPEN_SHARDS", 3)
    d = str(tmp_path)
    shardwriter.write_dataset(d, list(imgs), labels, CLASSES, SPEC, shard_size=60 * 25, block_records=4)
    for direct in (False, True):
        with packer_reader.open(d, verify_crc=True, direct=direct) as ds:
            assert len(ds.shards) == 9 and all(s.fd < 0 for s in ds.shards)
            assert np.array_equal(np.concatenate(collect(ds.batches(16))[0]), imgs)
            order = ds.order(shuffle=True, seed=2)
            assert np.array_equal(np.concatenate(collect(ds.batches(16, shuffle=True, seed=2))[0]), imgs[order])
            assert np.array_equal(ds[77][0], imgs[77])
    with packer_reader.open(d) as ds:
        p = ds.shards[4].path
        with open(p, "rb") as f:
            blob = f.read()
        os.remove(p)
        with open(p, "wb") as f:  # same bytes, new file
            f.write(blob)
        with pytest.raises(packer_reader.FormatError, match="replaced"):
            ds[4 * 25]


def test_copy_batches_recycle_only_dropped_memory(shards_dir, data):
    import gc

    imgs = data[0]
    with packer_reader.open(shards_dir) as ds:
        held = [x for x, _ in ds.batches(20, copy=True, prefetch=2)]  # all kept: nothing reused
        assert np.array_equal(np.concatenate(held), imgs)
        assert len({x.ctypes.data for x in held}) == len(held)
        ptrs = set()
        for x, _ in ds.batches(20, copy=True, prefetch=0):  # each dropped at once: reused
            ptrs.add(x.ctypes.data)
            del x
            gc.collect()
        assert len(ptrs) <= 3


def test_abandoned_iterator_stops_its_thread(shards_dir):
    import gc
    import threading

    before = threading.active_count()
    with packer_reader.open(shards_dir) as ds:
        for _ in range(3):
            it = ds.batches(8, prefetch=3)
            next(it)
            it.close()  # as a `break` out of a for loop does when the generator is dropped
        it = ds.batches(8, prefetch=3)
        next(it)
        del it
        gc.collect()
    assert threading.active_count() == before


def test_npy_direct_and_verify_crc_flag(npy_dir, data):
    with packer_reader.open(npy_dir, direct=True, verify_crc=True) as ds:
        assert np.array_equal(np.concatenate(collect(ds.batches(17))[0]), data[0])


@pytest.mark.parametrize("fmt", ["shards", "npy", "hdf5"])
def test_slices_and_index_lists(fmt, shards_dir, npy_dir, h5_dir, data):
    imgs, labels = data[0], data[1]
    d = {"shards": shards_dir, "npy": npy_dir, "hdf5": h5_dir}[fmt]
    with packer_reader.open(d) as ds:
        for key in [slice(25, 95), slice(None, None, 7), slice(200, 250), slice(-5, None), [5, 150, 5, -1], []]:
            x, y = ds[key]
            want = np.arange(len(imgs))[key] if not isinstance(key, list) else np.array(key, dtype=int)
            assert np.array_equal(x, imgs[want]) and np.array_equal(y, labels[want])
        with pytest.raises(IndexError):
            ds[[0, 999]]
