package shard

import "fmt"

// DefaultShuffleBuffer is the shuffle buffer size K used when OrderOptions.Buffer is 0 and
// shuffling is on (ORDER.md).
const DefaultShuffleBuffer = 4096

// OrderOptions selects one rank's record order for one epoch, as ORDER.md specifies.
type OrderOptions struct {
	Shuffle bool   // seeded shuffle of the shard order plus a shuffle buffer
	Seed    uint64 // shuffle seed
	Epoch   uint64 // epoch number, from 0
	Rank    int    // this reader's rank', 0 ≤ Rank < World (combine loader workers as ORDER.md says)
	World   int    // number of readers; 0 means 1
	Buffer  int    // shuffle buffer size K; 0 means DefaultShuffleBuffer
}

func (o *OrderOptions) normalize() error {
	if o.World == 0 {
		o.World = 1
	}
	if o.World < 0 || o.Rank < 0 || o.Rank >= o.World {
		return fmt.Errorf("shard: rank %d of world %d: want 0 ≤ rank < world", o.Rank, o.World)
	}
	if o.Buffer < 0 {
		return fmt.Errorf("shard: negative shuffle buffer %d", o.Buffer)
	}
	if o.Buffer == 0 {
		o.Buffer = DefaultShuffleBuffer
	}
	return nil
}

// SplitMix64 is the random generator of ORDER.md.
type SplitMix64 struct{ State uint64 }

// Next returns the next value of the sequence.
func (g *SplitMix64) Next() uint64 {
	g.State += 0x9E3779B97F4A7C15
	z := g.State
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Uniform returns Next() mod n, n ≥ 1.
func (g *SplitMix64) Uniform(n uint64) uint64 { return g.Next() % n }

const (
	epochMul = 0xD1B54A32D192ED03
	rankMul  = 0x8CB92BA72F3D8DD7
)

// shuffleInts runs ORDER.md's Fisher–Yates on s with g.
func shuffleInts[T any](s []T, g *SplitMix64) {
	for i := len(s) - 1; i >= 1; i-- {
		j := g.Uniform(uint64(i) + 1)
		s[i], s[j] = s[j], s[i]
	}
}

// ShardOrder returns the order in which the shards are read in an epoch (ORDER.md step 1).
func ShardOrder(numShards int, o OrderOptions) []int {
	order := make([]int, numShards)
	for i := range order {
		order[i] = i
	}
	if o.Shuffle {
		g := SplitMix64{State: o.Seed ^ (o.Epoch * epochMul)}
		shuffleInts(order, &g)
	}
	return order
}

// RankRange returns the slice [lo, hi) of the epoch's stream of n records that rank takes out
// of world (ORDER.md step 3).
func RankRange(n int64, rank, world int) (lo, hi int64) {
	return int64(mulDiv(uint64(rank), uint64(n), uint64(world))), int64(mulDiv(uint64(rank+1), uint64(n), uint64(world)))
}

// EpochOrder returns the record indices (numbered across shards, ORDER.md) that one rank reads
// in one epoch, in order, for shards holding counts[s] records each. Position p of the result
// is position p of ORDER.md, so resuming at p means continuing with result[p:].
// It holds this rank's indices and the shuffle buffer in memory, nothing more.
func EpochOrder(counts []int64, o OrderOptions) ([]int64, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	first := make([]int64, len(counts))
	var n int64
	for s, c := range counts {
		if c < 0 {
			return nil, fmt.Errorf("shard: shard %d has a negative record count %d", s, c)
		}
		first[s] = n
		n += c
	}
	lo, hi := RankRange(n, o.Rank, o.World)
	out := make([]int64, 0, hi-lo)
	// Walk the stream G (step 2) over [lo, hi) without materialising it.
	emitRange := func(fn func(x int64)) {
		var pos int64
		for _, s := range ShardOrder(len(counts), o) {
			a, b := max(lo, pos), min(hi, pos+counts[s])
			for g := a; g < b; g++ {
				fn(first[s] + g - pos)
			}
			pos += counts[s]
			if pos >= hi {
				return
			}
		}
	}
	if !o.Shuffle {
		emitRange(func(x int64) { out = append(out, x) })
		return out, nil
	}
	g := SplitMix64{State: o.Seed ^ (o.Epoch * epochMul) ^ ((uint64(o.Rank) + 1) * rankMul)}
	k := o.Buffer
	buf := make([]int64, 0, min(int64(k), hi-lo))
	emitRange(func(x int64) {
		if len(buf) < k {
			buf = append(buf, x)
			return
		}
		j := g.Uniform(uint64(k))
		out = append(out, buf[j])
		buf[j] = x
	})
	shuffleInts(buf, &g)
	return append(out, buf...), nil
}

// WorkerRank combines a rank of world with a loader worker of workers (for example PyTorch
// DataLoader workers) into the rank' and world' of ORDER.md: rank' = rank*workers + worker,
// world' = world*workers.
func WorkerRank(rank, world, worker, workers int) (rankP, worldP int) {
	return rank*workers + worker, world * workers
}
