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
    ds = PackerIterableDataset(shards_dir, batch_size=16, shuffle=shuffle, seed=3, buffer_size=25, num_workers=2,
                               order_version=1)
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
        w0 = pds.order(shuffle=shuffle, seed=3, epoch=1, rank=0, world_size=2, buffer_size=25, order_version=1)
        w1 = pds.order(shuffle=shuffle, seed=3, epoch=1, rank=1, world_size=2, buffer_size=25, order_version=1)
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
    # every record; 203 records on 2 ranks: the last batch padded by one repeated record
    assert sorted(set(seen)) == sorted(bytes(v) for v in imgs.reshape(-1, 60)) and len(seen) == len(imgs) + 1


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
        order = pds.order(shuffle=True, seed=4, rank=2, world_size=3, batch_size=9)
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
    ds = PackerIterableDataset(shards_dir, batch_size=16, shuffle=True, seed=6)
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
    with packer_reader.open(shards_dir) as pds:
        for epoch in (0, 1, 2):
            ds.set_epoch(epoch)
            xs, _ = _all(loader)
            want = pds.order(shuffle=True, seed=6, epoch=epoch)
            assert np.array_equal(np.concatenate(xs), imgs[want]), "epoch %d" % epoch


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

    ds = PackerIterableDataset(shards_dir, batch_size=16, num_workers=3, order_version=1)  # v2: any count works
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


def test_loader_is_configured(torch, shards_dir, data):
    from packer_reader.torch import PackerLoader, loader

    imgs, labels = data[0], data[1]
    ld = loader(shards_dir, batch_size=32, device="cpu")
    assert isinstance(ld, PackerLoader) and ld.batch_size is None and ld.num_workers == 0
    assert len(ld) == 7 and ld.num_records() == len(imgs) and ld.classes[0] == "cat"
    xs, ys = _all(ld)
    assert np.array_equal(np.concatenate(xs), imgs) and np.array_equal(np.concatenate(ys), labels)
    ld = loader(shards_dir, batch_size=32, drop_last=True, device="cpu")
    assert len(ld) == 6 and ld.num_records() == 192 and sum(len(y) for _, y in ld) == 192


def test_loader_shuffles_per_epoch_with_workers_and_ranks(torch, shards_dir, data):
    from packer_reader.torch import loader

    n = len(data[0])
    seen = []
    for rank in range(2):
        ld = loader(shards_dir, batch_size=16, shuffle=True, seed=5, device="cpu", num_workers=2,
                    rank=rank, world=2)  # the Go name for world_size
        assert ld.persistent_workers and len(ld) == len(list(ld))
        ld.set_epoch(0)
        e0 = np.concatenate([y.numpy() for _, y in ld])
        ld.set_epoch(1)
        e1 = np.concatenate([y.numpy() for _, y in ld])
        assert len(e0) == ld.num_records() and not np.array_equal(e0, e1)
        seen.append(e0)
    assert sum(len(s) for s in seen) == n + n % 2  # the last batch padded to the same size on both ranks
    assert len(seen[0]) == len(seen[1])


def test_loader_transform_runs_on_batches(torch, shards_dir, data):
    from packer_reader.torch import loader

    ld = loader(shards_dir, batch_size=50, device="cpu", transform=lambda x: x.float().mean(dim=(1, 2, 3)))
    got = np.concatenate([x.numpy() for x, _ in ld])
    assert np.allclose(got, data[0].reshape(len(data[0]), -1).mean(axis=1), atol=1e-4)


def test_loader_on_cuda_pins_and_moves(torch, shards_dir, data):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from packer_reader.torch import loader

    ld = loader(shards_dir, batch_size=32)
    assert ld.device.type == "cuda" and ld.dataset.pin_memory
    x, y = next(iter(ld))
    assert x.is_cuda and y.is_cuda and np.array_equal(x.cpu().numpy(), data[0][:32])
    ld = loader(shards_dir, batch_size=32, num_workers=2)
    assert ld.pin_memory and not ld.dataset.pin_memory
    ys = [y for _, y in ld]
    assert all(y.is_cuda for y in ys) and np.array_equal(np.sort(torch.cat(ys).cpu().numpy()), np.sort(data[1]))


def test_random_resized_crop_flip_on_variable_size_images(torch, tmp_path):
    import shardwriter
    from packer_reader.torch import loader, random_resized_crop_flip

    rng = np.random.default_rng(4)
    sizes = [(17, 23), (40, 9), (8, 8), (31, 64), (5, 50), (12, 30), (64, 64)]
    imgs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]
    spec = {"shape": [-1, -1, 3], "dtype": "uint8", "layout": "hwc"}
    shardwriter.write_dataset(str(tmp_path), imgs, [i % 2 for i in range(len(imgs))], ["a", "b"], spec,
                              shard_size=4000, shapes=True)

    def run(seed, **kw):
        tf = random_resized_crop_flip(16, generator=torch.Generator().manual_seed(seed), **kw)
        return [(x, y) for x, y in loader(str(tmp_path), batch_size=3, device="cpu", transform=tf)]

    a, b, c = run(1), run(1), run(2)
    assert [x.shape for x, _ in a] == [(3, 3, 16, 16), (3, 3, 16, 16), (1, 3, 16, 16)]
    assert all(x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1 for x, _ in a)
    assert all(torch.equal(p[0], q[0]) for p, q in zip(a, b)), "same generator seed, same crops"
    assert not all(torch.equal(p[0], q[0]) for p, q in zip(a, c))
    # scale=(1, 1), ratio=(w/h fits): the whole image, only resized and maybe flipped
    whole = run(3, scale=(1.0, 1.0), ratio=(0.01, 100.0))
    x = whole[0][0][2]  # record 2 is 8x8: resizing to 16x16 keeps the mean
    assert abs(float(x.mean()) - imgs[2].mean() / 255) < 0.02
    img = torch.from_numpy(imgs[6]).permute(2, 0, 1).float().div(255).unsqueeze(0)
    ref = torch.nn.functional.interpolate(img, size=(16, 16), mode="bilinear", align_corners=False)[0]
    got = whole[2][0][0]
    assert torch.allclose(got, ref, atol=1e-5) or torch.allclose(got, ref.flip(-1), atol=1e-5)
    flips = run(5, scale=(1.0, 1.0), ratio=(0.01, 100.0), flip=1.0)
    assert torch.allclose(flips[2][0][0], ref.flip(-1), atol=1e-5)


def test_dataset_num_records_is_gos_loader_len(torch, shards_dir):
    from packer_reader.torch import PackerIterableDataset

    ds = PackerIterableDataset(shards_dir, batch_size=10, drop_last=True, rank=1, world_size=3)
    assert len(ds) == 6 and ds.num_records() == 60  # rank 1 of 3 over 203 records: 68, 8 dropped


def test_loader_refuses_its_own_settings_from_kwargs(torch, shards_dir):
    from packer_reader.torch import loader

    with pytest.raises(TypeError, match="collate_fn"):
        loader(shards_dir, batch_size=8, device="cpu", collate_fn=lambda b: b)
