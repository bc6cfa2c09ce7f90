"""shard/ORDER.md "Mixtures": the Go reader's sequences, a transcription of the spec one integer at
a time, the proportions and exactly-once rules as property tests (seeded loops), the mixed loader
over real datasets with its state resumed on another world size, and `packer mix-plan` against
mix_plan."""
import json
import math
import os
import random
import shutil
import subprocess

import numpy as np
import pytest

import packer_reader
import shardwriter
from packer_reader import _order, mixture as mixmod

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
VECTORS = os.path.join(REPO, "shard", "testdata", "mix_vectors.json")
M = (1 << 64) - 1


# -- a transcription of ORDER.md "Mixtures", one integer at a time --------------------------------

def ref_splitmix(state):
    while True:
        state = (state + 0x9E3779B97F4A7C15) & M
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        yield z ^ (z >> 31)


class RefMixture:
    def __init__(self, weights, seed):
        total = 0.0
        for w in weights:
            total += w
        self.u = [math.floor((w / total) * 2 ** 20) for w in weights]
        self.nodes = []  # (lo, mid, hi, A, D, theta) in preorder; mid None for a leaf

        def build(lo, hi):
            i = len(self.nodes)
            self.nodes.append(None)
            if hi - lo == 1:
                self.nodes[i] = [lo, None, hi, 0, sum(self.u[lo:hi]), 0, -1, -1]
                return i
            mid = lo + (hi - lo) // 2
            self.nodes[i] = [lo, mid, hi, sum(self.u[lo:mid]), sum(self.u[lo:hi]), 0, 0, 0]
            self.nodes[i][6] = build(lo, mid)
            self.nodes[i][7] = build(mid, hi)
            return i
        build(0, len(weights))
        g = ref_splitmix(seed ^ 0x2545F4914F6CDD1D)
        for n in self.nodes:
            if n[1] is not None:
                n[5] = next(g) % n[4]
        g = ref_splitmix(seed ^ 0x9FB21C651E98DF25)
        self.seeds = [next(g) for _ in weights]

    def choose(self, x):
        n = self.nodes[0]
        y = x
        while n[1] is not None:
            A, D, th = n[3], n[4], n[5]
            c = (y * A + th) // D
            if ((y + 1) * A + th) // D > c:
                y, n = c, self.nodes[n[6]]
            else:
                y, n = y - c, self.nodes[n[7]]
        return n[0], y


def load_vectors():
    with open(VECTORS) as f:
        return json.load(f)


def mixture_of(v):
    return mixmod.Mixture(v["counts"], v["weights"], v["seed"], v["epoch_size"] or None, v["replacement"], v["shuffle"])


def test_go_vectors():
    """The Go reader's mixed sequences (shard/testdata/mix_vectors.json, written by the Go tests)
    are this reader's bit for bit: units, epoch size, batches, (source, record) of every
    position of the rank's share, and the state after the first batch."""
    vs = load_vectors()
    assert len(vs) >= 40
    for v in vs:
        m = mixture_of(v)
        assert m.units == v["units"], v
        assert m.epoch_size == v["size"], v
        src, rec = m.order(v["batch_size"], v["epoch"], v["rank"], v["world"], v["drop_last"], v["start"])
        assert src.tolist() == v["sources"], v
        assert rec.tolist() == v["records"], v
        plan = m.plan(v["batch_size"], v["rank"], v["world"], v["drop_last"], v["start"])
        assert plan.batches() == v["batches"]
        assert m.state(v["epoch"], plan.position_after(1)) == v["state"]
        assert m.restore(json.loads(json.dumps(v["state"]))) == (v["epoch"], v["state"]["position"])


def test_spec_transcription():
    """The reader's vectorised choice and record mapping equal the spec read literally."""
    rng = random.Random(29)
    for _ in range(60):
        k = rng.randint(1, 9)
        weights = [rng.uniform(0.01, 5) for _ in range(k)]
        counts = [rng.randint(1, 50) for _ in range(k)]
        seed = rng.getrandbits(64)
        repl = rng.random() < 0.5
        m = mixmod.Mixture(counts, weights, seed, None, repl, True)
        ref = RefMixture(weights, seed)
        assert m.units == ref.u and m.source_seeds == ref.seeds
        x0 = rng.randrange(0, (1 << 40) - 500) if repl else 0
        xs = list(range(x0, x0 + 300))
        src, o = m.choose(np.array(xs, dtype=np.uint64))
        assert [(int(a), int(b)) for a, b in zip(src, o)] == [ref.choose(x) for x in xs]
        # records: source epoch = draw // N_k, position = draw % N_k in that epoch's permutation
        if repl and m.epoch_size <= x0:
            continue
        e = 1 if repl else 3
        if repl and (e + 1) * m.epoch_size > (1 << 40):
            continue
        s2, r2 = m.at(e, np.arange(m.epoch_size))
        for p in range(0, m.epoch_size, 7):
            ks, d = ref.choose((e * m.epoch_size if repl else 0) + p)
            n = counts[ks]
            se, i = (d // n, d % n) if repl else (e, d)
            assert (s2[p], r2[p]) == (ks, _order.Permutation(n, ref.seeds[ks], se).at([i])[0])


def test_property_proportions():
    """For random weights of 1-9 sources, every window of consecutive stream positions draws
    each source's share give or take less than its depth (at most ceil(log2 K))."""
    rng = random.Random(7)
    for it in range(120):
        k = rng.randint(1, 9)
        weights = [rng.uniform(0.001, 1) * rng.randint(1, 50) for _ in range(k)]
        m = mixmod.Mixture([1000] * k, weights, rng.getrandbits(64), None, True)
        x0 = rng.randrange(0, (1 << 40) - 5000)
        src, _ = m.choose(np.arange(x0, x0 + 4000, dtype=np.uint64))
        assert max(m.depths) <= max(0, math.ceil(math.log2(k)))
        for s in range(k):
            c = np.concatenate([[0], np.cumsum(src == s)])
            dev = c - np.arange(c.size) * m.shares[s]  # max - min bounds every window's deviation
            spread = dev.max() - dev.min()
            if m.depths[s] == 0:
                assert spread < 1e-9
            else:
                assert spread < m.depths[s], (it, s, k, spread, m.depths[s])


def test_property_batches_per_rank():
    """Every batch of every rank holds B*share records of each source within less than the depth;
    i.i.d. draws would miss that bound in most batches."""
    m = mixmod.Mixture([5000, 300, 2000], [0.6, 0.1, 0.3], seed=8, epoch_size=40000)
    B = 64
    for r in range(4):
        src, _ = m.order(B, epoch=1, rank=r, world_size=4, drop_last=True)
        per = src.reshape(-1, B)
        for s in range(3):
            dev = np.abs((per == s).sum(axis=1) - B * m.shares[s])
            assert dev.max() < m.depths[s], (r, s, dev.max())


def test_property_exactly_once():
    """With replacement each source epoch of each source reads each record once, over
    consecutive mixture epochs; without, no record twice in an epoch and each source's share."""
    rng = random.Random(11)
    for it in range(40):
        k = rng.randint(1, 4)
        counts = [rng.randint(1, 60) for _ in range(k)]
        weights = [rng.uniform(0.1, 1.1) for _ in range(k)]
        repl = rng.random() < 0.5
        m = mixmod.Mixture(counts, weights, rng.getrandbits(64), None, repl, rng.random() < 0.7)
        drawn = [[] for _ in range(k)]
        for e in range(4):
            src, rec = m.at(e, np.arange(m.epoch_size))
            for s in range(k):
                got = rec[src == s].tolist()
                if not repl:
                    assert len(set(got)) == len(got) == m.count(s, m.epoch_size) <= counts[s]
                drawn[s].extend(got)
        if repl:
            for s in range(k):
                d, n = drawn[s], counts[s]
                for a in range(0, len(d) - n + 1, n):
                    assert sorted(d[a:a + n]) == list(range(n)), (it, s)


def test_refusals():
    with pytest.raises(ValueError, match="1 mixture weights for 2 sources"):
        mixmod.Mixture([1, 2], [1])
    with pytest.raises(ValueError, match="weight 1 is 0"):
        mixmod.Mixture([1, 2], [1, 0])
    with pytest.raises(ValueError, match="below 2\\^-20"):
        mixmod.Mixture([1, 2], [1, 1e-9])
    with pytest.raises(ValueError, match="draws 11 records from source"):
        mixmod.Mixture([10, 10], [1, 1], epoch_size=21, replacement=False)
    m = mixmod.Mixture([10, 10], [1, 1], seed=4, replacement=False)
    assert m.epoch_size == 20
    st = m.state(0, 6)
    with pytest.raises(ValueError, match="units"):
        mixmod.Mixture([10, 10], [1, 2], seed=4, replacement=False).restore(st)
    st["sources"][1]["drawn"] += 1
    with pytest.raises(ValueError, match="cursor of source 1"):
        m.restore(st)


# -- over real datasets -----------------------------------------------------------------------

def write(dirpath, n, shape, seed, label_base=0):
    imgs = np.random.default_rng(seed).integers(0, 256, (n,) + shape, dtype=np.uint8)
    labels = [(label_base + i) % 3 for i in range(n)]
    spec = {"shape": list(shape), "dtype": "uint8", "layout": "hwc"}
    shardwriter.write_dataset(str(dirpath), list(imgs), labels, ["a", "b", "c"], spec, shard_size=len(imgs[0].tobytes()) * 13)
    return imgs, labels


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    out = []
    for name, n, seed in (("a", 71, 1), ("b", 23, 2), ("c", 40, 3)):
        imgs, labels = write(root / name, n, (2, 3, 3), seed, seed)
        out.append((str(root / name), imgs, labels))
    return out


def test_loader_reads_the_order(sources):
    paths = [p for p, _, _ in sources]
    m = packer_reader.mix(paths, weights=[0.5, 0.2, 0.3], seed=3, epoch_size=150)
    ref = mixmod.Mixture([71, 23, 40], [0.5, 0.2, 0.3], seed=3, epoch_size=150)
    for r in range(2):
        loader = m.loader(16, rank=r, world_size=2, epoch=2)
        src, rec = ref.order(16, 2, r, 2)
        got_s, got_r = [], []
        for b in loader:
            for i in range(len(b.labels)):
                imgs, labels = sources[b.sources[i]][1], sources[b.sources[i]][2]
                assert np.array_equal(b.images[i], imgs[b.indices[i]])
                assert b.labels[i] == labels[b.indices[i]]
            got_s.extend(b.sources.tolist())
            got_r.extend(b.indices.tolist())
        assert got_s == src.tolist() and got_r == rec.tolist()
        assert loader.state_dict()["position"] == 150


@pytest.mark.parametrize("w1,w2,k,drop", [(2, 3, 2, False), (3, 1, 1, True), (1, 4, 4, False), (4, 2, 0, False)])
def test_resume_on_another_world_size(sources, w1, w2, k, drop):
    """A run on w1 ranks stops after k batches; the state of any rank, through JSON, resumes the
    epoch on w2 ranks; together they read every position of the epoch once (plus padding)."""
    paths = [p for p, _, _ in sources]
    m = packer_reader.mix(paths, weights=[3, 1, 2], seed=9, epoch_size=130)
    seen = []
    states = []
    for r in range(w1):
        loader = m.loader(8, rank=r, world_size=w1, drop_last=drop, epoch=1)
        if k:
            for j, b in enumerate(loader):  # a batch handed out counts as consumed
                seen.extend(zip(b.sources.tolist(), b.indices.tolist()))
                if j + 1 == k:
                    break
        states.append(json.dumps(loader.state_dict()))
    assert len(set(states)) == 1
    n_resumed = []
    for r in range(w2):
        loader = m.loader(8, rank=r, world_size=w2, drop_last=drop)
        loader.load_state_dict(json.loads(states[0]))
        n_resumed.append(len(loader))
        for b in loader:
            seen.extend(zip(b.sources.tolist(), b.indices.tolist()))
    assert len(set(n_resumed)) == 1
    src, rec = m.at(1, np.arange(130))
    want = {}
    for x in zip(src.tolist(), rec.tolist()):
        want[x] = want.get(x, 0) + 1
    got = {}
    for x in seen:
        got[x] = got.get(x, 0) + 1
    missing = sum(max(0, c - got.get(x, 0)) for x, c in want.items())
    extra = sum(max(0, c - want.get(x, 0)) for x, c in got.items())
    if drop:
        assert extra == 0 and missing < 8 * max(w1, w2)
    else:
        assert missing == 0 and extra < max(w1, w2)


def test_different_shapes_need_collate(tmp_path):
    write(tmp_path / "small", 10, (2, 2, 3), 1)
    write(tmp_path / "big", 12, (4, 4, 3), 2)
    paths = [str(tmp_path / "small"), str(tmp_path / "big")]
    with pytest.raises(ValueError, match="collate"):
        packer_reader.mix(paths, weights=[1, 1])

    def collate(items):  # pad every image to 4x4
        out = np.zeros((len(items), 4, 4, 3), np.uint8)
        for i, (_, _, (img, _)) in enumerate(items):
            out[i, :img.shape[0], :img.shape[1]] = img
        return out, [s for s, _, _ in items]
    m = packer_reader.mix(paths, weights=[1, 1], collate=collate, replacement=False)
    batches = list(m.loader(4))
    assert sum(len(s) for _, s in batches) == m.epoch_size
    assert m.epoch_size in (20, 21)  # 10 of the small source, 10 or 11 of the big one
    assert all(abs(s.count(0) - len(s) / 2) < 1 for _, s in batches)


def test_mix_plan_summary():
    s = packer_reader.mix_plan([1000, 500], [0.7, 0.3], seed=1, epoch_size=2000, batch_size=100, world_size=4)
    a, b = s["sources"]
    assert a["drawn"] + b["drawn"] == 2000
    assert abs(a["drawn"] - 1400) < 1 and abs(a["fraction"] - 0.7) < 1e-3
    assert a["passes"] == a["drawn"] / 1000
    assert s["batches_per_rank"] == 5
    assert 69 <= a["batch_min"] <= a["batch_max"] <= 71
    assert "epoch 0: 2000 records" in mixmod.format_summary(s, ["a", "b"])


@pytest.fixture(scope="module")
def packer_bin(tmp_path_factory):
    path = os.environ.get("PACKER_BIN")
    if path:
        return path
    if shutil.which("go") is None:
        pytest.fail("Go is needed to build packer for the cross-language tests (or set PACKER_BIN)")
    out = str(tmp_path_factory.mktemp("bin") / "packer")
    subprocess.run(["go", "build", "-o", out, "./cmd/packer"], cwd=REPO, check=True)
    return out


def test_mix_plan_cli_matches(sources, packer_bin):
    """`packer mix-plan --json` (Go) and mix_plan (Python) report the same mixture."""
    paths = [p for p, _, _ in sources]
    for args, kw in ((["--weights", "0.5,0.2,0.3", "--seed", "3", "--epoch-size", "500", "--ranks", "2", "--batch-size", "16"],
                      dict(weights=[0.5, 0.2, 0.3], seed=3, epoch_size=500, world_size=2, batch_size=16)),
                     (["--weights", "1,1,1", "--no-replacement", "--epoch", "2"],
                      dict(weights=[1, 1, 1], replacement=False, epoch=2))):
        res = subprocess.run([packer_bin, "mix-plan", *paths, "--json", *args], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        got = json.loads(res.stdout)
        want = packer_reader.mix_plan(paths, **kw)
        assert got == json.loads(json.dumps(want)), (got, want)
        text = subprocess.run([packer_bin, "mix-plan", *paths, *args], capture_output=True, text=True).stdout
        assert text.strip() == mixmod.format_summary(want, paths).strip()
