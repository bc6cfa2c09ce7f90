"""The reading order of shard/ORDER.md: SplitMix64, shard shuffle, rank split, shuffle buffer."""

import numpy as np

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
EPOCH_MUL = 0xD1B54A32D192ED03
RANK_MUL = 0x8CB92BA72F3D8DD7


class SplitMix64:
    """SplitMix64 over unsigned 64-bit integers with wrap-around (ORDER.md, "Random numbers")."""

    __slots__ = ("state",)

    def __init__(self, state):
        self.state = state & M64

    def next(self):
        self.state = (self.state + GAMMA) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def uniform(self, n):
        return self.next() % n

    def block(self, count):
        """The next ``count`` outputs as a NumPy uint64 array (same values as count next() calls).
        SplitMix64's state advances by a constant, so the outputs can be computed at once."""
        if count <= 0:
            return np.zeros(0, dtype=np.uint64)
        with np.errstate(over="ignore"):
            k = np.arange(1, count + 1, dtype=np.uint64)
            z = np.uint64(self.state) + k * np.uint64(GAMMA)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
        self.state = (self.state + count * GAMMA) & M64
        return z


def shard_generator(seed, epoch):
    return SplitMix64((seed ^ (epoch * EPOCH_MUL)) & M64)


def buffer_generator(seed, epoch, rank):
    return SplitMix64((seed ^ (epoch * EPOCH_MUL) ^ ((rank + 1) * RANK_MUL)) & M64)


def fisher_yates(items, gen):
    """In-place Fisher-Yates: for i from len-1 down to 1, j = uniform(i+1), swap i and j."""
    for i in range(len(items) - 1, 0, -1):
        j = gen.uniform(i + 1)
        items[i], items[j] = items[j], items[i]
    return items


def shard_order(num_shards, shuffle, seed, epoch):
    order = list(range(num_shards))
    if shuffle:
        fisher_yates(order, shard_generator(seed, epoch))
    return order


def rank_bounds(n, rank, world):
    """Stream positions [lo, hi) taken by rank of world (ORDER.md step 3)."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError("need world_size >= 1 and 0 <= rank < world_size, got rank=%r world_size=%r" % (rank, world))
    return (rank * n) // world, ((rank + 1) * n) // world


def stream_segments(shard_counts, shard_firsts, order, lo, hi):
    """The stream positions [lo, hi) as a list of (first_record, count) runs of consecutive
    record indices, following the shard order."""
    out = []
    pos = 0
    for s in order:
        n = shard_counts[s]
        a, b = max(lo, pos), min(hi, pos + n)
        if a < b:
            out.append((shard_firsts[s] + a - pos, b - a))
        pos += n
        if pos >= hi:
            break
    return out


def shuffled_indices(segments, buffer_size, seed, epoch, rank):
    """The emitted indices of ORDER.md step 4 for this rank's slice given as runs, as a NumPy
    int64 array."""
    if buffer_size < 1:
        raise ValueError("buffer_size must be >= 1")
    if segments:
        L = np.concatenate([np.arange(f, f + c, dtype=np.int64) for f, c in segments])
    else:
        L = np.zeros(0, dtype=np.int64)
    n = L.size
    K = buffer_size
    gen = buffer_generator(seed, epoch, rank)
    out = np.empty(n, dtype=np.int64)
    if n > K:
        js = (gen.block(n - K) % np.uint64(K)).tolist()
        buf = L[:K].tolist()
        rest = L[K:].tolist()
        o = [0] * (n - K)
        for t in range(n - K):
            j = js[t]
            o[t] = buf[j]
            buf[j] = rest[t]
        out[: n - K] = o
    else:
        buf = L.tolist()
    m = len(buf)
    if m > 1:
        r = gen.block(m - 1)  # draws for i = m-1 .. 1
        mods = np.arange(m, 1, -1, dtype=np.uint64)
        js = (r % mods).tolist()
        for t, i in enumerate(range(m - 1, 0, -1)):
            j = js[t]
            buf[i], buf[j] = buf[j], buf[i]
    out[n - m:] = buf
    return out


def order_indices(shard_counts, shard_firsts, shuffle=False, seed=0, epoch=0, rank=0, world=1, buffer_size=4096):
    """Every record index this rank' emits in the epoch, in order, as a NumPy int64 array."""
    n = int(sum(shard_counts))
    order = shard_order(len(shard_counts), shuffle, seed, epoch)
    lo, hi = rank_bounds(n, rank, world)
    segs = stream_segments(shard_counts, shard_firsts, order, lo, hi)
    if shuffle:
        return shuffled_indices(segs, buffer_size, seed, epoch, rank)
    if not segs:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([np.arange(f, f + c, dtype=np.int64) for f, c in segs])


# -- version 2 (ORDER.md v2) ----------------------------------------------------------------

ORDER_V1 = 1
ORDER_V2 = 2
FEISTEL_ROUNDS = 6
V2_KEY_MUL = 0xA0761D6478BD642F
STATE_VERSION = 1


def _mix64(z):
    """SplitMix64's output function over a NumPy uint64 array."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class Permutation:
    """The keyed bijection of [0, n) of ORDER.md v2 for one seed and epoch: a Feistel network
    over m-bit integers (2^m >= n, m >= 2) with cycle-walking."""

    def __init__(self, n, seed, epoch):
        self.n = max(int(n), 0)
        m = 2
        while m < 64 and (1 << m) < self.n:
            m += 1
        self.s = m // 2
        self.h = m - self.s
        g = SplitMix64((seed ^ (epoch * EPOCH_MUL) ^ V2_KEY_MUL) & M64)
        self.keys = [g.next() for _ in range(FEISTEL_ROUNDS)]

    def _rounds(self, x):
        s, h = np.uint64(self.s), np.uint64(self.h)
        lo_mask, hi_mask = np.uint64((1 << self.s) - 1), np.uint64((1 << self.h) - 1)
        for k in self.keys:
            lo, hi = x & lo_mask, x >> s
            hi = hi ^ (_mix64(lo ^ np.uint64(k)) & hi_mask)
            x = (lo << h) | hi
        return x

    def at(self, positions):
        """The records at the given positions (int array, each in [0, n)) as an int64 array."""
        x = self._rounds(np.asarray(positions, dtype=np.uint64))
        n = np.uint64(self.n)
        out = x.copy()
        walk = np.nonzero(out >= n)[0]
        while walk.size:
            y = self._rounds(out[walk])
            out[walk] = y
            walk = walk[y >= n]
        return out.astype(np.int64)


class Plan:
    """One rank's share of an epoch under ORDER.md v2 (steps 2-4), from global position
    ``start``: ``full`` whole global batches of ``batch_size * world`` records, then (unless
    dropped) a tail of ``tail`` records padded to ``tail_per_rank * world``."""

    def __init__(self, n, start, batch_size, rank, world, drop_last):
        n, start, B, rank, world = int(n), int(start), int(batch_size), int(rank), int(world)
        if B < 1:
            raise ValueError("batch_size must be >= 1")
        if world < 1 or not 0 <= rank < world:
            raise ValueError("need world_size >= 1 and 0 <= rank < world_size, got rank=%r world_size=%r" % (rank, world))
        if not 0 <= start <= n:
            raise ValueError("start position %d outside the epoch's %d records" % (start, n))
        self.n, self.start, self.batch_size, self.rank, self.world = n, start, B, rank, world
        g = B * world
        self.full = (n - start) // g
        self.tail = 0 if drop_last else n - start - self.full * g
        self.tail_per_rank = -(-self.tail // world)

    def batches(self):
        return self.full + (1 if self.tail > 0 else 0)

    def records(self):
        return self.full * self.batch_size + self.tail_per_rank

    def position_after(self, k):
        """Global position once k batches of every rank are consumed."""
        if k >= self.batches():
            return self.n
        return self.start + k * self.batch_size * self.world

    def batch_positions(self, j):
        """Global positions of this rank's batch j (padding: >= n) as an int64 array."""
        B, W, r = self.batch_size, self.world, self.rank
        if j < self.full:
            a = self.start + j * B * W + r * B
            return np.arange(a, a + B, dtype=np.int64)
        t = self.tail_per_rank
        a = self.start + self.full * B * W + r * t
        return np.arange(a, a + t, dtype=np.int64)


def v2_batch_indices(plan, perm, shuffle, j):
    """Record indices of this rank's batch j under ORDER.md v2."""
    q = plan.batch_positions(j)
    n = plan.n
    if q.size and q[-1] >= n:
        q = np.where(q >= n, (q - n) % max(n, 1), q)
    if shuffle:
        return perm.at(q)
    return q


_AT_CHUNK = 1 << 20  # positions per Permutation.at call in v2_batches_indices


def v2_batches_indices(plan, perm, shuffle, js):
    """[v2_batch_indices(plan, perm, shuffle, j) for j in js], the same arrays, computed with
    one Permutation.at call per _AT_CHUNK positions instead of one per batch (for small batches
    NumPy's cost per call outweighs the arithmetic: 100000 records in batches of 256 took 0.2 s
    one batch at a time, 0.015 s at once)."""
    js = list(js)
    out = []
    i = 0
    while i < len(js):
        qs = []
        size = 0
        while i < len(js) and (not qs or size < _AT_CHUNK):
            q = plan.batch_positions(js[i])
            qs.append(q)
            size += q.size
            i += 1
        q = np.concatenate(qs)
        n = plan.n
        if q.size and q.max() >= n:
            q = np.where(q >= n, (q - n) % max(n, 1), q)
        x = perm.at(q) if shuffle else q
        out.extend(np.split(x, np.cumsum([a.size for a in qs[:-1]], dtype=np.int64)))
    return out


def order_indices_v2(n, batch_size, shuffle=False, seed=0, epoch=0, rank=0, world=1, drop_last=False, start=0):
    """Every record index this rank reads in the epoch under ORDER.md v2, in order (int64)."""
    plan = Plan(n, start, batch_size, rank, world, drop_last)
    perm = Permutation(n, seed, epoch)
    parts = [v2_batch_indices(plan, perm, shuffle, j) for j in range(plan.batches())]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
