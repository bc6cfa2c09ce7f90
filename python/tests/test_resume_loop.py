"""Resuming inside the usual training loop: a state loaded before
``for epoch in range(start_epoch, epochs): loader.set_epoch(epoch)`` continues the loaded epoch
from its position (set_epoch of that same epoch keeps it); set_epoch of another epoch starts
that one from its start."""

import json

import numpy as np
import pytest

import packer_reader
from conftest import require_torch
from test_order_v2 import ids, ids_dataset


@pytest.fixture(scope="module")
def ds97(tmp_path_factory):
    return ids_dataset(str(tmp_path_factory.mktemp("n97")), 97)


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_loader_set_epoch_after_load_keeps_the_position(ds97, workers):
    require_torch()
    from packer_reader.torch import loader

    n, B = 97, 8
    ld = loader(ds97, batch_size=B, shuffle=True, seed=5, device="cpu", num_workers=workers)
    ld.set_epoch(3)
    seen = []
    for k, (x, _) in enumerate(ld):
        seen += ids(x.numpy())
        if k == 4:
            break
    state = json.loads(json.dumps(ld.state_dict()))
    assert state["epoch"] == 3 and state["position"] == 5 * B

    again = loader(ds97, batch_size=B, shuffle=True, seed=5, device="cpu", num_workers=workers)
    again.load_state_dict(state)
    for epoch in range(3, 5):  # the trainer's loop, started at the checkpoint's epoch
        again.set_epoch(epoch)
        if epoch == 3:
            assert len(again) == -(-(n - 5 * B) // B)
        got = [i for x, _ in again for i in ids(x.numpy())]
        if epoch == 3:
            seen += got
            assert sorted(seen) == list(range(n)), "epoch 3 not read exactly once"  # one rank: no padding
        else:
            assert sorted(got) == list(range(n))  # epoch 4 whole


def test_torch_dataset_set_epoch_after_load_keeps_the_position(ds97):
    require_torch()
    from packer_reader.torch import PackerIterableDataset

    n, B = 97, 10
    full = [ids(x.numpy()) for x, _ in PackerIterableDataset(ds97, batch_size=B, shuffle=True, seed=2, epoch=1)]
    d = PackerIterableDataset(ds97, batch_size=B, shuffle=True, seed=2)
    d.load_state_dict({"version": 1, "order": 2, "seed": 2, "epoch": 1, "position": 3 * B})
    d.set_epoch(1)
    assert [ids(x.numpy()) for x, _ in d] == full[3:]
    d.set_epoch(1)  # the resumed pass ran out: the epoch again, whole
    assert [ids(x.numpy()) for x, _ in d] == full
    d.load_state_dict({"version": 1, "order": 2, "seed": 2, "epoch": 1, "position": 3 * B})
    d.set_epoch(2)  # another epoch: from its start
    assert sorted(i for x, _ in d for i in ids(x.numpy())) == list(range(n))


def test_mix_loader_set_epoch_after_load_keeps_the_position(ds97, tmp_path):
    other = ids_dataset(str(tmp_path / "n41"), 41)
    m = packer_reader.mix([ds97, other], weights=[2, 1], seed=7, epoch_size=120)
    ld = m.loader(8, epoch=2)
    seen = []
    for k, b in enumerate(ld):
        seen += list(zip(b.sources.tolist(), b.indices.tolist()))
        if k == 3:
            break
    state = json.loads(json.dumps(ld.state_dict()))
    again = m.loader(8)
    again.load_state_dict(state)
    again.set_epoch(2)
    for b in again:
        seen += list(zip(b.sources.tolist(), b.indices.tolist()))
    src, rec = m.at(2, np.arange(120))
    assert sorted(seen) == sorted(zip(src.tolist(), rec.tolist()))
    again.set_epoch(2)  # that pass ran out: the whole epoch again
    assert sum(len(b.indices) for b in again) == 120


def test_state_of_another_dataset_or_shuffle_is_refused(ds97, tmp_path):
    """A state carries the record count and shuffle setting of the run that saved it: loaded
    over a dataset of another size, or with the other shuffle setting, its position would select
    other records than the ones not read yet, so it is refused. A state without them (an
    earlier reader's, or Go's before) still loads."""
    require_torch()
    from packer_reader.torch import PackerIterableDataset, loader

    big = ids_dataset(str(tmp_path / "n203"), 203)
    ld = loader(ds97, batch_size=8, shuffle=True, seed=1, device="cpu")
    for k, _ in enumerate(ld):
        if k == 2:
            break
    st = json.loads(json.dumps(ld.state_dict()))
    assert st["records"] == 97 and st["shuffle"] is True
    loader(ds97, batch_size=4, shuffle=True, device="cpu", world_size=3, rank=1).load_state_dict(st)
    with pytest.raises(ValueError, match="97 records"):
        loader(big, batch_size=8, shuffle=True, device="cpu").load_state_dict(st)
    with pytest.raises(ValueError, match="shuffle"):
        PackerIterableDataset(ds97, batch_size=8).load_state_dict(st)
    old = {k: v for k, v in st.items() if k not in ("records", "shuffle")}
    PackerIterableDataset(big, batch_size=8).load_state_dict(old)


def test_epochs_of_the_whole_u64_range(ds97):
    """Epochs are u64 (Go's LoaderState.Epoch): a state of epoch 2^63 + 1 (Go's) loads and reads
    that epoch's order; a negative or fractional epoch is a ValueError/TypeError naming it,
    never a bare overflow from the shared tensor nor another epoch's order."""
    require_torch()
    from packer_reader.torch import PackerIterableDataset

    e = (1 << 63) + 1
    d = PackerIterableDataset(ds97, batch_size=10, shuffle=True, seed=3)
    d.load_state_dict({"version": 1, "order": 2, "seed": 3, "epoch": e, "position": 20})
    assert d.epoch == e and d.state_dict()["epoch"] == e
    with packer_reader.open(ds97) as ds:
        want = ds.order(shuffle=True, seed=3, epoch=e, batch_size=10, start=20)
    assert [i for x, _ in d for i in ids(x.numpy())] == want.tolist()
    d.set_epoch((1 << 64) - 1)
    assert d.epoch == (1 << 64) - 1
    assert PackerIterableDataset(ds97, batch_size=10, epoch=e).epoch == e
    with pytest.raises(ValueError, match="epoch"):
        d.set_epoch(-1)
    with pytest.raises(ValueError, match="epoch"):
        d.set_epoch(1 << 64)
    with pytest.raises(TypeError, match="epoch"):
        d.set_epoch(1.5)


@pytest.mark.parametrize("key,value", [("position", 10.9), ("position", True), ("position", "10"),
                                       ("seed", 2.5), ("seed", "3"), ("seed", -1), ("epoch", "2"), ("records", 97.0)])
def test_damaged_state_is_refused(ds97, key, value):
    """A state whose numbers are not integers of their range (an edited or damaged checkpoint)
    is refused naming the key, as Go's JSON decoding and the mixture's restore refuse them,
    instead of being rounded to another position or seed."""
    require_torch()
    from packer_reader.torch import PackerIterableDataset

    d = PackerIterableDataset(ds97, batch_size=10, shuffle=True, seed=3)
    st = {"version": 1, "order": 2, "seed": 3, "epoch": 0, "position": 20, "records": 97, "shuffle": True}
    d.load_state_dict(dict(st))
    st[key] = value
    with pytest.raises((TypeError, ValueError), match=key):
        d.load_state_dict(st)
