"""shard/ORDER.md: SplitMix64, shard shuffle, rank split, shuffle buffer, resume."""

import json
import os

import pytest

from packer_reader import _order

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTORS = os.path.join(REPO, "shard", "testdata", "order_vectors.json")
M = (1 << 64) - 1


class Ref:
    """SplitMix64 straight from ORDER.md, one draw at a time."""

    def __init__(self, s):
        self.s = s & M

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        return z ^ (z >> 31)

    def uniform(self, n):
        return self.next() % n


def ref_order(counts, shuffle, seed, epoch, rank, world, K):
    S = len(counts)
    firsts = [sum(counts[:s]) for s in range(S)]
    N = sum(counts)
    order = list(range(S))
    base = (seed ^ (epoch * 0xD1B54A32D192ED03)) & M
    if shuffle:
        g = Ref(base)
        for i in range(S - 1, 0, -1):
            j = g.uniform(i + 1)
            order[i], order[j] = order[j], order[i]
    G = [firsts[s] + k for s in order for k in range(counts[s])]
    L = G[(rank * N) // world:((rank + 1) * N) // world]
    if not shuffle:
        return L
    g = Ref(base ^ (((rank + 1) * 0x8CB92BA72F3D8DD7) & M))
    buf, out = [], []
    for x in L:
        if len(buf) < K:
            buf.append(x)
        else:
            j = g.uniform(K)
            out.append(buf[j])
            buf[j] = x
    for i in range(len(buf) - 1, 0, -1):
        j = g.uniform(i + 1)
        buf[i], buf[j] = buf[j], buf[i]
    return out + buf


def test_splitmix64_known_values():
    g = _order.SplitMix64(0)
    assert [g.next() for _ in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    g1, g2 = _order.SplitMix64(12345), _order.SplitMix64(12345)
    assert g1.block(100).tolist() == [g2.next() for _ in range(100)]
    assert g1.state == g2.state


@pytest.mark.parametrize("counts", [[10], [7, 7, 7, 3], [1, 50, 2, 33, 9], [0, 5, 0, 6]])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("world", [1, 2, 3, 8])
@pytest.mark.parametrize("K", [1, 4, 4096])
def test_matches_reference(counts, shuffle, world, K):
    firsts = [sum(counts[:s]) for s in range(len(counts))]
    N = sum(counts)
    seen = []
    for rank in range(world):
        for seed, epoch in [(0, 0), (7, 3), (M, 1)]:
            got = _order.order_indices(counts, firsts, shuffle, seed, epoch, rank, world, K).tolist()
            assert got == ref_order(counts, shuffle, seed, epoch, rank, world, K)
        seen += _order.order_indices(counts, firsts, shuffle, 5, 2, rank, world, K).tolist()
    assert sorted(seen) == list(range(N)), "every record exactly once across ranks"


def test_shuffle_depends_on_seed_and_epoch():
    counts, firsts = [100] * 5, [100 * i for i in range(5)]
    a = _order.order_indices(counts, firsts, True, 1, 0, 0, 1, 64)
    assert a.tolist() == _order.order_indices(counts, firsts, True, 1, 0, 0, 1, 64).tolist()
    assert a.tolist() != _order.order_indices(counts, firsts, True, 2, 0, 0, 1, 64).tolist()
    assert a.tolist() != _order.order_indices(counts, firsts, True, 1, 1, 0, 1, 64).tolist()
    assert sorted(a.tolist()) == list(range(500))


def _get(case, *names, default=None):
    for n in names:
        if n in case:
            return case[n]
    return default


def test_golden_vectors():
    """Golden sequences written by the Go side (shard/testdata/order_vectors.json)."""
    if not os.path.exists(VECTORS):
        pytest.skip("shard/testdata/order_vectors.json is not there yet (written by the Go shard reader's "
                    "tests); the reference implementation test above covers ORDER.md meanwhile")
    with open(VECTORS) as f:
        doc = json.load(f)
    cases = doc.get("cases", doc.get("vectors")) if isinstance(doc, dict) else doc
    assert isinstance(cases, list) and cases, "no cases in %s" % VECTORS
    checked = 0
    for case in cases:
        if "splitmix64" in case or "outputs" in case and "state" in case:
            st = _get(case, "seed", "state")
            g = _order.SplitMix64(int(st))
            outs = _get(case, "splitmix64", "outputs")
            assert [g.next() for _ in outs] == [int(x) for x in outs], case
            checked += 1
            continue
        counts = _get(case, "n_per_shard", "shard_counts", "shards", "counts")
        assert counts is not None, "unknown case layout: %r" % sorted(case)
        firsts = [sum(counts[:s]) for s in range(len(counts))]
        want = _get(case, "order", "expected", "indices", "sequence", "want")
        assert want is not None, "unknown case layout: %r" % sorted(case)
        start = int(_get(case, "start", "position", default=0))
        got = _order.order_indices(counts, firsts, bool(_get(case, "shuffle", default=False)),
                                   int(_get(case, "seed", default=0)), int(_get(case, "epoch", default=0)),
                                   int(_get(case, "rank", default=0)),
                                   int(_get(case, "world", "world_size", default=1)),
                                   int(_get(case, "buffer", "buffer_size", default=4096))).tolist()[start:]
        if want and isinstance(want[0], list):  # batches
            got_b = [got[p:p + len(want[0])] for p in range(0, len(got), len(want[0]))]
            assert got_b[:len(want)] == want, case
        else:
            assert got == [int(x) for x in want], case
        checked += 1
    assert checked == len(cases)
