"""torchdata's StatefulDataLoader, the protocol issue 24 names for PackerIterableDataset: without
workers it takes the dataset's state_dict() in the trainer's process; with workers it takes each
worker's dataset state_dict() inside that worker, with the batches the worker sent, and on resume
hands each state back to the same worker (load_state_dict before the worker iterates). Either
way the resumed run must yield exactly the batches the uninterrupted run had left.

torchdata needs torch >= 2, which Debian bookworm does not ship (python3-torch is 1.13), so the
StatefulDataLoader tests skip here, saying why; they ran on a machine with torch 2.11 and
torchdata 0.11 (docs/bench/stateful-dataloader.txt). The refusal tests below need only torch."""

import pickle

import pytest

import packer_reader
from conftest import require_torch
from test_order_v2 import ids, ids_dataset


def stateful_dataloader():
    require_torch()
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except Exception as e:  # ImportError, or torchdata refusing an old torch
        pytest.skip("torchdata's StatefulDataLoader is not importable (%s: %s); it needs torch >= 2"
                    % (type(e).__name__, e))
    return StatefulDataLoader


@pytest.fixture(scope="module")
def ds203(tmp_path_factory):
    return ids_dataset(str(tmp_path_factory.mktemp("sdl203")), 203)


def make(path, drop):
    from packer_reader.torch import PackerIterableDataset

    return PackerIterableDataset(path, batch_size=8, shuffle=True, seed=5, epoch=1, drop_last=drop)


@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("workers", [0, 1, 2, 3])
def test_stateful_dataloader_resumes_exactly(ds203, workers, drop):
    """Stopped after 0, 1, 5 and all but one of its batches, a StatefulDataLoader over
    PackerIterableDataset saves its state (pickled, as a checkpoint would be), and a new one that
    loads it yields exactly the rest of the uninterrupted epoch, with 0 to 3 workers."""
    SDL = stateful_dataloader()
    from torch.utils.data import DataLoader

    whole = [ids(x.numpy()) for x, _ in DataLoader(make(ds203, drop), batch_size=None, num_workers=workers)]
    with packer_reader.open(ds203) as ds:
        assert sum(whole, []) == ds.order(shuffle=True, seed=5, epoch=1, batch_size=8, drop_last=drop).tolist()
    assert [ids(x.numpy()) for x, _ in SDL(make(ds203, drop), batch_size=None, num_workers=workers)] == whole
    for stop in (0, 1, 5, len(whole) - 1):
        dl = SDL(make(ds203, drop), batch_size=None, num_workers=workers)
        it = iter(dl)
        got = [ids(next(it)[0].numpy()) for _ in range(stop)]
        state = pickle.loads(pickle.dumps(dl.state_dict()))
        del it, dl
        again = SDL(make(ds203, drop), batch_size=None, num_workers=workers)
        again.load_state_dict(state)
        got += [ids(x.numpy()) for x, _ in again]
        assert got == whole, (workers, drop, stop)
        # The epoch after the resumed one is whole again.
        assert [ids(x.numpy()) for x, _ in again] == whole


def test_worker_state_refused_outside_its_worker(ds203):
    """A worker's state (what StatefulDataLoader snapshots inside a worker) counts only that
    worker's batches: loaded into the dataset in the trainer's process, it is refused, naming the
    loader's own state as the one to load."""
    require_torch()
    ds = make(ds203, False)
    worker_state = {"version": 1, "order": 2, "seed": 5, "epoch": 1, "position": 0, "worker": 1,
                    "num_workers": 2, "worker_batches": 3}
    with pytest.raises(ValueError, match="loaded by that worker"):
        ds.load_state_dict(worker_state)
    with pytest.raises(ValueError, match="worker_batches"):
        ds.load_state_dict(dict(worker_state, worker_batches=-1))
    assert ds.start == 0  # nothing was taken over
