"""shard/ORDER.md version 2: the keyed permutation, global batches split among ranks, the tail
rule, loader workers and the loader state; the same order as the Go reader, bit for bit."""

import json
import os

import numpy as np
import pytest

import packer_reader
import shardwriter
from conftest import CLASSES, SPEC, make_labels, require_torch
from packer_reader import _order

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTORS = os.path.join(REPO, "shard", "testdata", "order_v2_vectors.json")
M = (1 << 64) - 1


# -- a transcription of ORDER.md v2, one integer at a time -----------------------------------

def ref_perm(n, seed, epoch):
    m = 2
    while m < 64 and (1 << m) < n:
        m += 1
    s, h = m // 2, m - m // 2
    st = (seed ^ (epoch * 0xD1B54A32D192ED03) ^ 0xA0761D6478BD642F) & M
    keys = []
    for _ in range(6):
        st = (st + 0x9E3779B97F4A7C15) & M
        keys.append(mix(st))

    def F(x):
        for k in keys:
            lo, hi = x % (1 << s), x >> s
            hi ^= mix(lo ^ k) % (1 << h)
            x = (lo << h) | hi
        return x

    def P(q):
        x = F(q)
        while x >= n:
            x = F(x)
        return x
    return P


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def ref_rank(n, B, shuffle, seed, epoch, r, W, drop_last, start):
    """This rank's batches (lists of records)."""
    P = ref_perm(n, seed, epoch) if shuffle else (lambda q: q)
    G = B * W
    full = (n - start) // G
    T = n - start - full * G
    out = [[P(q) for q in range(start + j * G + r * B, start + j * G + (r + 1) * B)] for j in range(full)]
    if T > 0 and not drop_last:
        t = -(-T // W)
        a = start + full * G + r * t
        out.append([P(q if q < n else (q - n) % n) for q in range(a, a + t)])
    return out


def load_vectors():
    with open(VECTORS) as f:
        return json.load(f)


def test_go_vectors():
    """The Go reader's sequences (shard/testdata/order_v2_vectors.json, written by the Go
    tests) are this reader's, and the spec's, bit for bit."""
    vs = load_vectors()
    assert len(vs) >= 60
    for v in vs:
        got = _order.order_indices_v2(v["n"], v["batch_size"], v["shuffle"], v["seed"], v["epoch"], v["rank"],
                                      v["world"], v["drop_last"], v["start"])
        assert got.tolist() == v["expected"], v
        plan = _order.Plan(v["n"], v["start"], v["batch_size"], v["rank"], v["world"], v["drop_last"])
        assert plan.batches() == v["batches"]
        head = _order.Permutation(v["n"], v["seed"], v["epoch"]).at(np.arange(min(v["n"], 64)))
        assert head.tolist() == v["perm_head"]
        if v["n"] < 5000:
            ref = ref_rank(v["n"], v["batch_size"], v["shuffle"], v["seed"], v["epoch"], v["rank"], v["world"],
                           v["drop_last"], v["start"])
            assert [x for b in ref for x in b] == v["expected"], v
            assert len(ref) == v["batches"]
        else:
            P = ref_perm(v["n"], v["seed"], v["epoch"])
            assert [P(q) for q in range(len(v["perm_head"]))] == v["perm_head"]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 8, 9, 255, 256, 257, 4097])
def test_permutation_is_a_bijection(n):
    for seed in (0, 1, M):
        p = _order.Permutation(n, seed, 3).at(np.arange(n))
        assert sorted(p.tolist()) == list(range(n))


# -- quality -----------------------------------------------------------------------------------

PER_CLASS, CLASSES_N = 1281, 1000


def median_distinct(seq, B):
    k = seq.size // B
    cls = (seq[:k * B] // PER_CLASS).reshape(k, B)
    cls.sort(axis=1)
    distinct = 1 + (np.diff(cls, axis=1) != 0).sum(axis=1)
    return float(np.median(distinct))


def test_quality_imagenet_shaped():
    """ImageNet-1k's shape in class order (1000 x 1281 records): a rank's batches of 256 hold
    at least 0.95 of the distinct classes of a uniform permutation's, with 1 rank and with 8."""
    n = PER_CLASS * CLASSES_N
    ref = median_distinct(np.random.default_rng(0).permutation(n), 256)
    assert 215 <= ref <= 235
    for world in (1, 8):
        for rank in (0, world - 1):
            seq = _order.order_indices_v2(n, 256, True, seed=3, epoch=1, rank=rank, world=world)
            got = median_distinct(seq, 256)
            assert got >= 0.95 * ref, (world, rank, got, ref)
    # version 1 with ~1783 records per shard: the defect version 2 removes
    counts = [1783] * (n // 1783) + [n % 1783]
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]]).tolist()
    v1 = _order.order_indices(counts, firsts, True, 3, 0, 0, 1, 4096)
    assert median_distinct(v1, 256) < 0.5 * ref


def test_class_positions_are_uniform():
    """Statistical test: the records of each class fall into the 10 tenths of the epoch as under
    a uniform permutation (chi-square, 9000 degrees of freedom, within 6 standard deviations)."""
    n = PER_CLASS * CLASSES_N
    for seed in (0, 99):
        seq = _order.order_indices_v2(n, 256, True, seed=seed)
        part = (np.arange(n) * 10) // n
        table = np.zeros((CLASSES_N, 10))
        np.add.at(table, (seq // PER_CLASS, part), 1)
        exp = PER_CLASS / 10
        chi = ((table - exp) ** 2 / exp).sum()
        dof = CLASSES_N * 9
        assert abs(chi - dof) < 6 * np.sqrt(2 * dof), (seed, chi)


# -- ranks, tail, workers, resume: indices ----------------------------------------------------

def test_property_exactly_once_and_equal_counts():
    """Random N, batch size, worlds, worker counts, drop_last and stop points: every rank yields
    the same number of batches; workers taking every nw-th batch give the rank's batches; a run
    stopped after k steps and resumed from its state on another world reads every record
    exactly once (plus fewer than W pad repeats, or less the dropped tail)."""
    rng = np.random.default_rng(24)
    for it in range(300):
        n = int(rng.integers(0, 500))
        B = int(rng.integers(1, 30))
        w1, w2 = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        nw = int(rng.integers(1, 5))
        drop = bool(rng.integers(0, 2))
        seed = int(rng.integers(0, 1 << 63)) * 2 + 1
        plan0 = _order.Plan(n, 0, B, 0, w1, drop)
        k = int(rng.integers(0, plan0.batches() + 1))
        seen = np.zeros(n, dtype=np.int64)
        counts = set()
        for r in range(w1):
            p = _order.Plan(n, 0, B, r, w1, drop)
            counts.add(p.batches())
            perm = _order.Permutation(n, seed, 1)
            batches = [_order.v2_batch_indices(p, perm, True, j) for j in range(p.batches())]
            # workers: worker w takes batches w, w+nw, ...; round-robin gives them back in order
            per_worker = [batches[w::nw] for w in range(nw)]
            rr = [per_worker[j % nw][j // nw] for j in range(len(batches))]
            assert all(np.array_equal(a, b) for a, b in zip(rr, batches))
            for b in batches[:k]:
                np.add.at(seen, b, 1)
        assert len(counts) == 1, it
        pos = plan0.position_after(k)
        counts = set()
        for r in range(w2):
            seq = _order.order_indices_v2(n, B, True, seed, 1, r, w2, drop, pos)
            counts.add(_order.Plan(n, pos, B, r, w2, drop).batches())
            np.add.at(seen, seq, 1)
        assert len(counts) == 1, it
        extra = int((seen[seen > 1] - 1).sum())
        missing = int((seen == 0).sum())
        if drop:
            tail = n % (B * w1) if k == plan0.batches() else (n - pos) % (B * w2)
            assert extra == 0 and missing == tail, (it, extra, missing, tail)
        else:
            assert missing == 0 and extra < max(w1, w2), (it, extra, missing)


# -- through the readers ------------------------------------------------------------------------

def ids_dataset(d, n):
    """n records of 4x5x3 uint8 whose first two bytes carry the record number."""
    imgs = np.zeros((n, 4, 5, 3), dtype=np.uint8)
    imgs.reshape(n, -1)[:, 0] = np.arange(n) & 255
    imgs.reshape(n, -1)[:, 1] = np.arange(n) >> 8
    shardwriter.write_dataset(d, list(imgs), make_labels(n), CLASSES, SPEC, shard_size=30 * 60, block_records=7)
    return d


def ids(x):
    flat = np.asarray(x).reshape(len(x), -1).astype(np.int64)
    return (flat[:, 0] | (flat[:, 1] << 8)).tolist()


@pytest.fixture(scope="module")
def ds300(tmp_path_factory):
    return ids_dataset(str(tmp_path_factory.mktemp("n300")), 300)


def test_batches_do_not_depend_on_workers(ds300):
    """Issue 24: 300 records, batch 64 gave [64,64,64,64,44] with 0 workers, [..,22,22] with 2 and
    [..,11,11,11,11] with 4. Under v2, 0, 1, 2 and 4 workers give the same batches."""
    torch = require_torch()
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset, loader

    runs = {}
    for nw in (0, 1, 2, 4):
        ds = PackerIterableDataset(ds300, batch_size=64, shuffle=True, seed=8)
        runs[nw] = [ids(x.numpy()) for x, _ in DataLoader(ds, batch_size=None, num_workers=nw)]
        assert len(ds) == len(runs[nw])
        ld = loader(ds300, batch_size=64, shuffle=True, seed=8, device="cpu", num_workers=nw)
        assert [ids(x.numpy()) for x, _ in ld] == runs[nw] and len(ld) == len(runs[nw])
    assert [len(b) for b in runs[0]] == [64, 64, 64, 64, 44]
    for nw in (1, 2, 4):
        assert runs[nw] == runs[0], nw
    with packer_reader.open(ds300) as pds:
        assert sum(runs[0], []) == pds.order(shuffle=True, seed=8).tolist()
    assert torch is not None


@pytest.mark.parametrize("n,drop,sizes", [(65, False, [32, 1]), (63, True, []), (63, False, [32]), (64, False, [32])])
def test_ranks_yield_the_same_batches(tmp_path, n, drop, sizes):
    """Issue 24: 65 records, batch 32, 2 ranks gave rank 0 one batch and rank 1 two (a DDP hang);
    63 with drop_last gave 0 and 1. Under v2 every rank yields the same batch sizes, with 0 and
    2 workers, and len() says so."""
    require_torch()
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    d = ids_dataset(str(tmp_path), n)
    seen = []
    for r in range(2):
        for nw in (0, 2):
            ds = PackerIterableDataset(d, batch_size=32, shuffle=True, seed=1, rank=r, world_size=2, drop_last=drop)
            got = [ids(x.numpy()) for x, _ in DataLoader(ds, batch_size=None, num_workers=nw)]
            assert [len(b) for b in got] == sizes, (r, nw)
            assert len(ds) == len(sizes) and ds.num_records() == sum(sizes)
        seen += sum(got, [])
    if not drop:
        assert sorted(set(seen)) == list(range(n))


@pytest.fixture(scope="module")
def ds203(tmp_path_factory):
    return ids_dataset(str(tmp_path_factory.mktemp("n203")), 203)


@pytest.mark.parametrize("drop", [True, False])
def test_elastic_resume(ds203, drop):
    """2 ranks with 2 workers each stop after 3 batches; the state saved by either rank resumes
    the epoch on 1 rank (0 workers) and on 3 ranks (3 workers): every record exactly once (plus
    the padding of the last batch, or less the dropped tail)."""
    require_torch()
    from packer_reader.torch import loader

    n, B = 203, 8
    for w2, nw2 in ((1, 0), (3, 3)):
        seen = np.zeros(n, dtype=np.int64)
        states = []
        for r in range(2):
            ld = loader(ds203, batch_size=B, shuffle=True, seed=11, epoch=2, device="cpu", num_workers=2,
                        rank=r, world_size=2, drop_last=drop)
            for k, (x, _) in enumerate(ld):
                np.add.at(seen, ids(x.numpy()), 1)
                if k == 2:
                    break
            states.append(json.loads(json.dumps(ld.state_dict())))
        assert states[0] == states[1] == {"version": 1, "order": 2, "seed": 11, "epoch": 2, "position": 48,
                                         "records": n, "shuffle": True}
        last = None
        for r in range(w2):
            ld = loader(ds203, batch_size=B, shuffle=True, device="cpu", num_workers=nw2, rank=r, world_size=w2,
                        drop_last=drop)
            ld.load_state_dict(states[1])
            got = [ids(x.numpy()) for x, _ in ld]
            for b in got:
                np.add.at(seen, b, 1)
            last = ld.state_dict()
        assert last["position"] == n
        extra, missing = int((seen[seen > 1] - 1).sum()), int((seen == 0).sum())
        if drop:
            assert extra == 0 and missing == (n - 48) % (B * w2), (w2, extra, missing)
        else:
            assert missing == 0 and extra < w2, (w2, extra, missing)


def test_loaded_seed_reaches_persistent_workers(ds203):
    """A state loaded after persistent workers started (they hold their own copy of the
    dataset) changes their seed too, as set_epoch changes their epoch."""
    require_torch()
    from packer_reader.torch import loader

    ld = loader(ds203, batch_size=10, shuffle=True, seed=1, device="cpu", num_workers=2)
    assert ld.persistent_workers
    list(ld)  # starts the workers
    ld.load_state_dict({"version": 1, "order": 2, "seed": (1 << 64) - 5, "epoch": 3, "position": 40})
    got = [ids(x.numpy()) for x, _ in ld]
    with packer_reader.open(ds203) as ds:
        want = ds.order(shuffle=True, seed=(1 << 64) - 5, epoch=3, batch_size=10, start=40)
    assert sum(got, []) == want.tolist()
    assert ld.state_dict() == {"version": 1, "order": 2, "seed": (1 << 64) - 5, "epoch": 3, "position": 203,
                               "records": 203, "shuffle": True}


def test_dataset_state_dict_without_workers(ds203):
    require_torch()
    from packer_reader.torch import PackerIterableDataset

    ds = PackerIterableDataset(ds203, batch_size=10, shuffle=True, seed=4, rank=1, world_size=2)
    it = iter(ds)
    for _ in range(4):
        next(it)
    st = ds.state_dict()
    assert st["position"] == 80
    full = [ids(x.numpy()) for x, _ in PackerIterableDataset(ds203, batch_size=10, shuffle=True, seed=4, rank=1,
                                                                world_size=2)]
    again = PackerIterableDataset(ds203, batch_size=10, shuffle=True, seed=0, rank=1, world_size=2)
    again.load_state_dict(st)
    assert [ids(x.numpy()) for x, _ in again] == full[4:]
    with pytest.raises(ValueError, match="version"):
        again.load_state_dict({"version": 7, "order": 2, "seed": 1, "epoch": 0, "position": 0})
    with pytest.raises(ValueError, match="outside"):
        again.load_state_dict({"version": 1, "order": 2, "seed": 1, "epoch": 0, "position": 204})


def test_dataset_state_dict_refused_with_workers(ds203):
    """With DataLoader workers the dataset object in the trainer's process sees no batch: its
    state_dict() would say nothing was consumed, and a resume would read those batches again.
    It refuses, naming the loader's state_dict(), which counts in the trainer's process."""
    require_torch()
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    ds = PackerIterableDataset(ds203, batch_size=10, shuffle=True, seed=4)
    for k, _ in enumerate(DataLoader(ds, batch_size=None, num_workers=2)):
        if k == 3:
            break
    with pytest.raises(ValueError, match="loader"):
        ds.state_dict()
    for _ in ds:  # read in this process again: exact again
        pass
    assert ds.state_dict()["position"] == 203


def test_v1_still_available(ds203):
    with packer_reader.open(ds203) as ds:
        a = np.concatenate([y for _, y in ds.batches(8, shuffle=True, seed=3, order_version=1)])
        assert np.array_equal(a, ds.labels[ds.order(shuffle=True, seed=3, order_version=1)])
        with pytest.raises(ValueError, match="order_version"):
            ds.batches(8, order_version=3)


@pytest.fixture(scope="module")
def ids_sets(tmp_path_factory):
    return {n: ids_dataset(str(tmp_path_factory.mktemp("n%d" % n)), n) for n in (1, 9, 64, 131)}


def test_len_after_a_restored_position(ids_sets):
    """Random N, batch size, ranks before and after, worker counts, drop_last and stop points:
    after load_state_dict(), len() of loader() and of PackerIterableDataset is what each rank
    then yields for the rest of the epoch, and once that pass has run out, the whole epoch's
    count (the next pass, with or without set_epoch, reads the whole epoch)."""
    require_torch()
    from packer_reader.torch import PackerIterableDataset, loader

    rng = np.random.default_rng(2424)
    for it in range(28):
        n = [1, 9, 64, 131][it % 4]
        path = ids_sets[n]
        B = int(rng.integers(1, 20))
        w1, w2 = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        nw = [0, 0, 1, 2][int(rng.integers(0, 4))] if it < 12 else 0
        drop, shuffle = bool(rng.integers(0, 2)), bool(rng.integers(0, 4))
        seed, epoch = int(rng.integers(0, 1 << 62)), int(rng.integers(0, 3))
        kw = dict(batch_size=B, shuffle=shuffle, drop_last=drop)
        first = PackerIterableDataset(path, seed=seed, epoch=epoch, rank=0, world_size=w1, **kw)
        k = int(rng.integers(0, len(first) + 1))
        got = iter(first)
        for _ in range(k):
            next(got)
        state = first.state_dict()
        full = [len(PackerIterableDataset(path, rank=r, world_size=w2, **kw)) for r in range(w2)]
        for r in range(w2):
            case = (it, n, B, w1, w2, nw, drop, k, r)
            objs = [PackerIterableDataset(path, rank=r, world_size=w2, **kw),
                    loader(path, device="cpu", num_workers=nw, rank=r, world_size=w2, **kw)]
            for obj in objs:
                obj.load_state_dict(state)
                want = len(obj)
                assert want == sum(1 for _ in obj), case + (type(obj).__name__,)
                assert obj.state_dict()["position"] == n, case
                # the restored pass ran out: the next pass reads the whole epoch
                assert len(obj) == full[r] == sum(1 for _ in obj), case + ("again",)
                obj.set_epoch(epoch + 1)
                assert len(obj) == full[r] == sum(1 for _ in obj), case + ("next epoch",)


def test_batches_indices_at_once_equal_one_by_one(monkeypatch):
    # the reader computes many batches' indices in one Permutation.at call (v2_batches_indices);
    # they are the arrays v2_batch_indices gives batch by batch, tails and padding included
    rng = np.random.default_rng(24)
    for it in range(200):
        n = int(rng.integers(0, 2000))
        B, world = int(rng.integers(1, 200)), int(rng.integers(1, 5))
        rank, drop = int(rng.integers(0, world)), bool(rng.integers(0, 2))
        shuffle = bool(rng.integers(0, 2))
        p = _order.Plan(n, int(rng.integers(0, n + 1)), B, rank, world, drop)
        perm = _order.Permutation(n, int(rng.integers(0, 1 << 62)), it)
        js = list(range(int(rng.integers(0, 3)), p.batches(), int(rng.integers(1, 4))))
        monkeypatch.setattr(_order, "_AT_CHUNK", int(rng.integers(1, 3000)))
        got = _order.v2_batches_indices(p, perm, shuffle, js)
        want = [_order.v2_batch_indices(p, perm, shuffle, j) for j in js]
        assert len(got) == len(want), it
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, want)), it
