"""PyTorch wrapper. torch is required: these tests fail when it is missing, unless PACKER_NO_TORCH=1."""

import numpy as np
import pytest

from conftest import require_torch


@pytest.fixture
def torch():
    return require_torch()


def _all(loader):
    xs, ys = [], []
    for x, y in loader:
        xs.append(x.numpy().copy())
        ys.append(y.numpy().copy())
    return xs, ys


def test_single_process(torch, shards_dir, data):
    from packer_reader.torch import PackerIterableDataset

    imgs, labels = data[0], data[1]
    ds = PackerIterableDataset(shards_dir, batch_size=32)
    assert len(ds) == 7 and ds.classes[0] == "cat"
    xs, ys = _all(ds)
    assert np.array_equal(np.concatenate(xs), imgs) and np.array_equal(np.concatenate(ys), labels)
    batches = list(ds)
    assert batches[0][0].dtype == torch.uint8 and batches[0][1].dtype == torch.int64
    assert not np.shares_memory(batches[0][0].numpy(), batches[1][0].numpy()), "tensors must own their memory"
    ds = PackerIterableDataset(shards_dir, batch_size=32, pin_memory=True)  # no CUDA here: plain tensors
    assert sum(len(x) for x, _ in ds) == len(imgs)


@pytest.mark.parametrize("shuffle", [False, True])
def test_dataloader_two_workers_cover_everything_once(torch, shards_dir, data, shuffle):
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    imgs, labels = data[0], data[1]
    ds = PackerIterableDataset(shards_dir, batch_size=16, shuffle=shuffle, seed=3, buffer_size=25, num_workers=2)
    ds.set_epoch(1)
    loader = DataLoader(ds, batch_size=None, num_workers=2)
    xs, ys = _all(loader)
    x, y = np.concatenate(xs), np.concatenate(ys)
    assert len(x) == len(imgs)
    # labels travel with their images
    lab_of = {bytes(r): int(l) for r, l in zip(imgs.reshape(len(imgs), -1), labels)}
    assert all(lab_of[bytes(r)] == int(l) for r, l in zip(x.reshape(len(x), -1), y))
    # identify each sample by its bytes: every record exactly once
    keys = sorted(bytes(r) for r in x.reshape(len(x), -1))
    assert keys == sorted(bytes(r) for r in imgs.reshape(len(imgs), -1))
    # and each worker read exactly its ORDER.md share (rank' = w of world' = 2)
    import packer_reader

    with packer_reader.open(shards_dir) as pds:
        w0 = pds.order(shuffle=shuffle, seed=3, epoch=1, rank=0, world_size=2, buffer_size=25)
        w1 = pds.order(shuffle=shuffle, seed=3, epoch=1, rank=1, world_size=2, buffer_size=25)
    got0 = np.concatenate(xs[0::2])  # in-order round robin: even batches from worker 0
    assert np.array_equal(got0[:len(w0)], imgs[w0][:len(got0)])
    assert np.array_equal(np.concatenate(xs[1::2]), imgs[w1][:sum(len(b) for b in xs[1::2])])
    assert len(loader) == len(xs) == 14


def test_ranks_and_workers(torch, shards_dir, data):
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    imgs = data[0]
    seen = []
    for r in range(2):
        ds = PackerIterableDataset(shards_dir, batch_size=8, shuffle=True, seed=1, rank=r, world_size=2)
        xs, _ = _all(DataLoader(ds, batch_size=None, num_workers=2))
        seen += [bytes(v) for v in np.concatenate(xs).reshape(-1, 60)]
    assert sorted(seen) == sorted(bytes(v) for v in imgs.reshape(-1, 60))


def test_resume_with_workers(torch, shards_dir):
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    ds = PackerIterableDataset(shards_dir, batch_size=10, shuffle=True, seed=2)
    full, _ = _all(DataLoader(ds, batch_size=None, num_workers=2))
    ds.set_start(5)
    rest, _ = _all(DataLoader(ds, batch_size=None, num_workers=2))
    assert len(rest) == len(full) - 5
    assert all(np.array_equal(a, b) for a, b in zip(rest, full[5:]))


def test_batches_read_straight_into_shared_tensors(torch, tmp_path):
    import packer_reader
    import shardwriter
    from conftest import make_images
    from packer_reader.torch import _TensorBuffers

    imgs = make_images(50, shape=(3, 5, 5), dtype=np.float16)
    shardwriter.write_dataset(str(tmp_path), list(imgs), np.arange(50) % 2, ["a", "b"],
                              {"shape": [3, 5, 5], "dtype": "float16", "layout": "chw"}, shard_size=150 * 17)
    tb = _TensorBuffers(shared=True, pinned=False)
    got = []
    with packer_reader.open(str(tmp_path)) as ds:
        for x, _ in ds.batches(8, shuffle=True, seed=1, copy=True, prefetch=2, alloc=tb.alloc):
            t = tb.view(x)
            assert t.is_shared() and t.dtype == torch.float16 and tuple(t.shape) == x.shape
            assert t.data_ptr() == x.ctypes.data
            got.append(t.clone())
        order = ds.order(shuffle=True, seed=1)
    assert np.array_equal(torch.cat(got).numpy(), imgs[order])
    assert not tb.live


def test_rank_from_torch_distributed(torch, shards_dir, data, monkeypatch):
    import torch.distributed as dist

    import packer_reader
    from packer_reader.torch import PackerIterableDataset, split_for_worker

    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda: 2)
    monkeypatch.setattr(dist, "get_world_size", lambda: 3)
    assert split_for_worker() == (2, 3, 0, 1)
    assert split_for_worker(rank=0, world_size=1) == (0, 1, 0, 1)
    ds = PackerIterableDataset(shards_dir, batch_size=9, shuffle=True, seed=4)
    got = np.concatenate([x.numpy() for x, _ in ds])
    with packer_reader.open(shards_dir) as pds:
        order = pds.order(shuffle=True, seed=4, rank=2, world_size=3)
    assert np.array_equal(got, data[0][order])
    assert len(ds) == -(-len(order) // 9)


def test_worker_corruption_reaches_the_trainer(torch, tmp_path, data):
    import shardwriter
    from conftest import CLASSES, SPEC
    from torch.utils.data import DataLoader

    import packer_reader
    from packer_reader.torch import PackerIterableDataset

    imgs, labels = data[0], data[1]
    d = str(tmp_path)
    shardwriter.write_dataset(d, list(imgs), labels, CLASSES, SPEC, shard_size=60 * 50, block_records=10)
    p = tmp_path / "shard-00002.pks"
    b = bytearray(p.read_bytes())
    b[4096 + 60 * 33] ^= 1  # shard 2 (records 100..149), block 3 = records 130..139
    p.write_bytes(bytes(b))
    ds = PackerIterableDataset(d, batch_size=16, verify_crc=True)
    with pytest.raises(packer_reader.CorruptionError, match="shard-00002.pks.*records 130..139"):
        for _ in DataLoader(ds, batch_size=None, num_workers=2):
            pass


def test_set_epoch_reaches_persistent_workers(torch, shards_dir, data):
    from torch.utils.data import DataLoader

    import packer_reader
    from packer_reader.torch import PackerIterableDataset

    imgs = data[0]
    ds = PackerIterableDataset(shards_dir, batch_size=16, shuffle=True, seed=6, buffer_size=30)
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
    with packer_reader.open(shards_dir) as pds:
        for epoch in (0, 1, 2):
            ds.set_epoch(epoch)
            xs, _ = _all(loader)
            w0 = pds.order(shuffle=True, seed=6, epoch=epoch, rank=0, world_size=2, buffer_size=30)
            got0 = np.concatenate(xs[0::2])
            assert np.array_equal(got0, imgs[w0][:len(got0)]), "epoch %d" % epoch


@pytest.mark.parametrize("workers", [0, 2])
def test_habitual_dataloader_batch_size_fails_at_once(torch, shards_dir, workers):
    """DataLoader(ds, batch_size=B), and DataLoader(ds) whose default is batch_size=1, would
    stack whole batches ([1, B, ...] or a stack error): refused at the first batch with a
    message that says what to write."""
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    ds = PackerIterableDataset(shards_dir, batch_size=16, num_workers=workers or None)
    for kwargs in ({"batch_size": 16}, {}, {"batch_size": 16, "drop_last": True}):
        with pytest.raises(ValueError) as ei:
            next(iter(DataLoader(ds, num_workers=workers, **kwargs)))
        msg = str(ei.value)
        assert "batch_size=None" in msg and "DataLoader(" in msg, msg
    # the recommended form still works
    assert sum(len(y) for _, y in DataLoader(ds, batch_size=None, num_workers=workers)) == 203


def test_num_workers_mismatch_refused(torch, shards_dir):
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    ds = PackerIterableDataset(shards_dir, batch_size=16, num_workers=3)
    with pytest.raises(ValueError) as ei:
        list(DataLoader(ds, batch_size=None, num_workers=2))
    assert "num_workers" in str(ei.value)


def test_len_of_loader_counts_workers_without_being_told(torch, shards_dir):
    """len(DataLoader(ds, batch_size=None, num_workers=2)) is what the loader yields, though the
    dataset was not given num_workers (each worker has its own last, partial batch)."""
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    ds = PackerIterableDataset(shards_dir, batch_size=16)
    for workers in (0, 2):
        loader = DataLoader(ds, batch_size=None, num_workers=workers)
        assert len(loader) == sum(1 for _ in loader), workers
    assert len(ds) == 13  # asked directly: one reader
