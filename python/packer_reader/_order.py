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
