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

// Reading order versions (ORDER.md). OrderV2 is the default of LoaderOptions.Order.
const (
	OrderV1 = 1 // shard shuffle + shuffle buffer, a contiguous slice per rank (ORDER.md version 1)
	OrderV2 = 2 // keyed permutation of all records, global batches split among ranks
)

// FeistelRounds is the number of rounds of ORDER.md v2's permutation.
const FeistelRounds = 6

const v2KeyMul = 0xA0761D6478BD642F

// mix64 is the SplitMix64 output function (ORDER.md "Random numbers" without the state step).
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Permutation is ORDER.md v2's keyed bijection of [0, N) for one seed and epoch: a Feistel
// network over m-bit integers (2^m ≥ N) with cycle-walking.
type Permutation struct {
	n      uint64
	s, h   uint // low and high half widths, s + h = m
	lo, hi uint64
	keys   [FeistelRounds]uint64
}

// NewPermutation returns the permutation of [0, n) for seed and epoch (ORDER.md v2, step 1).
func NewPermutation(n int64, seed, epoch uint64) Permutation {
	p := Permutation{n: uint64(max(n, 0))}
	m := uint(2)
	for m < 64 && uint64(1)<<m < p.n {
		m++
	}
	p.s = m / 2
	p.h = m - p.s
	p.lo, p.hi = uint64(1)<<p.s-1, uint64(1)<<p.h-1
	g := SplitMix64{State: seed ^ (epoch * epochMul) ^ v2KeyMul}
	for i := range p.keys {
		p.keys[i] = g.Next()
	}
	return p
}

// round runs the Feistel network once over x < 2^m.
func (p *Permutation) round(x uint64) uint64 {
	for _, k := range p.keys {
		l, h := x&p.lo, x>>p.s
		h ^= mix64(l^k) & p.hi
		x = l<<p.h | h
	}
	return x
}

// At returns the record at position i (0 ≤ i < N) of the permuted sequence.
func (p *Permutation) At(i int64) int64 {
	x := p.round(uint64(i))
	for x >= p.n {
		x = p.round(x)
	}
	return int64(x)
}

// PlanV2 is one rank's share of an epoch under ORDER.md v2 (steps 2-4): the global batch size
// is BatchSize*World; from Start on, Full whole global batches, then a tail of Tail records
// (0 with DropLast), which is padded to TailPerRank*World records.
type PlanV2 struct {
	N, Start         int64
	BatchSize, World int
	Rank             int
	Full             int64 // whole global batches from Start
	Tail             int64 // records after them (before padding); 0 when dropped
	TailPerRank      int64 // records of each rank's last, short batch; 0 when none
}

// NewPlanV2 returns rank's plan for n records from global position start.
func NewPlanV2(n, start int64, batchSize, rank, world int, dropLast bool) (PlanV2, error) {
	if world == 0 {
		world = 1
	}
	if batchSize < 1 {
		return PlanV2{}, fmt.Errorf("shard: batch size %d, want ≥ 1", batchSize)
	}
	if world < 0 || rank < 0 || rank >= world {
		return PlanV2{}, fmt.Errorf("shard: rank %d of world %d: want 0 ≤ rank < world", rank, world)
	}
	if start < 0 || start > n {
		return PlanV2{}, fmt.Errorf("shard: start position %d outside the epoch's %d records", start, n)
	}
	g := int64(batchSize) * int64(world)
	p := PlanV2{N: n, Start: start, BatchSize: batchSize, World: world, Rank: rank}
	p.Full = (n - start) / g
	if !dropLast {
		p.Tail = n - start - p.Full*g
		p.TailPerRank = (p.Tail + int64(world) - 1) / int64(world)
	}
	return p, nil
}

// Batches returns the number of batches every rank yields.
func (p PlanV2) Batches() int64 {
	if p.Tail > 0 {
		return p.Full + 1
	}
	return p.Full
}

// Records returns the number of records this rank yields (padding included).
func (p PlanV2) Records() int64 { return p.Full*int64(p.BatchSize) + p.TailPerRank }

// positions calls fn with the global position (in [0, N + World)) of each record of the rank's
// share, in order; positions ≥ N are padding (ORDER.md v2 step 4).
func (p PlanV2) positions(fn func(q int64)) {
	g := int64(p.BatchSize) * int64(p.World)
	for j := range p.Full {
		a := p.Start + j*g + int64(p.Rank)*int64(p.BatchSize)
		for q := a; q < a+int64(p.BatchSize); q++ {
			fn(q)
		}
	}
	if p.TailPerRank > 0 {
		a := p.Start + p.Full*g + int64(p.Rank)*p.TailPerRank
		for q := a; q < a+p.TailPerRank; q++ {
			fn(q)
		}
	}
}

// StateAfter returns the global position once k batches of every rank are consumed: Start +
// k*BatchSize*World, or N once the last batch is.
func (p PlanV2) StateAfter(k int64) int64 {
	if k >= p.Batches() {
		return p.N
	}
	return p.Start + k*int64(p.BatchSize)*int64(p.World)
}

// OrderV2Options selects one rank's records for one epoch under ORDER.md v2.
type OrderV2Options struct {
	Shuffle   bool
	Seed      uint64
	Epoch     uint64
	BatchSize int
	Rank      int
	World     int   // 0 means 1
	DropLast  bool  // drop the last, partial global batch instead of padding it
	Start     int64 // global position to start from (LoaderState.Position)
}

// EpochOrderV2 returns the record indices one rank reads in one epoch under ORDER.md v2, in
// order, and its plan. Batches are consecutive runs of BatchSize indices; the last may be
// TailPerRank long.
func EpochOrderV2(n int64, o OrderV2Options) ([]int64, PlanV2, error) {
	p, err := NewPlanV2(n, o.Start, o.BatchSize, o.Rank, o.World, o.DropLast)
	if err != nil {
		return nil, p, err
	}
	perm := NewPermutation(n, o.Seed, o.Epoch)
	at := func(q int64) int64 {
		if o.Shuffle {
			return perm.At(q)
		}
		return q
	}
	out := make([]int64, 0, p.Records())
	p.positions(func(q int64) {
		if q >= n {
			q = (q - n) % n // padding repeats the epoch's sequence from its start
		}
		out = append(out, at(q))
	})
	return out, p, nil
}

// LoaderStateVersion is the version of LoaderState this package writes.
const LoaderStateVersion = 1

// LoaderState is where an epoch stands under ORDER.md v2, the same on every rank: restore it
// into a run with any number of ranks and workers (LoaderOptions.Restore) to continue the
// epoch with exactly the records not yet consumed.
type LoaderState struct {
	Version  int    `json:"version"`  // LoaderStateVersion
	Order    int    `json:"order"`    // OrderV2
	Seed     uint64 `json:"seed"`     // shuffle seed
	Epoch    uint64 `json:"epoch"`    // epoch number
	Position int64  `json:"position"` // records of the epoch's global sequence consumed by all ranks together
	// Records and Shuffle are the record count and shuffle setting of the run that saved the
	// state: a Loader restored from it over a dataset of another size, or with the other
	// shuffle setting, is refused (its position would select other records than the ones not
	// read yet). Records is 0 in a state of an earlier reader, which is not checked.
	Records int64 `json:"records"`
	Shuffle bool  `json:"shuffle"`
}
