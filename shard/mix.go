package shard

import (
	"fmt"
	"math"
	"slices"
)

// Mixture constants (ORDER.md, "Mixtures"). A test checks them against ORDER.md.
const (
	// MixUnitBits: weights are quantised to whole units of 2^-MixUnitBits of their total.
	MixUnitBits = 20
	// MixMaxPositions bounds a mixture's stream positions (2^40), so that every product of
	// the source choice fits in 64 bits.
	MixMaxPositions = int64(1) << 40
	// MixStateVersion is the "mixture" value of a MixState this package writes.
	MixStateVersion = 1

	mixPhaseKey  = 0x2545F4914F6CDD1D // phase generator: SplitMix64 from seed ^ mixPhaseKey
	mixSourceKey = 0x9FB21C651E98DF25 // source seeds: SplitMix64 from seed ^ mixSourceKey
)

// MixOptions selects a weighted mixture of K sources (ORDER.md, "Mixtures").
type MixOptions struct {
	// Weights holds one positive weight per source; only their ratios matter. Each is
	// quantised to units of 2^-20 of the total; a weight below that is refused.
	Weights []float64
	Seed    uint64
	// EpochSize is the number of records of one mixture epoch (all ranks together). 0 means
	// the default: the sources' record count summed with Replacement, the longest epoch in
	// which no source runs out without it.
	EpochSize int64
	// Replacement: a source drawn past its end starts its next source epoch (its v2 order
	// with the next epoch number), and a mixture epoch continues where the last one stopped.
	// Without it, every mixture epoch reads each source from the start of its own epoch (the
	// mixture's epoch number), at most once: the epoch may not be longer than the first
	// source to run out allows.
	Replacement bool
	// Shuffle reads every source in its v2 shuffled order (a keyed permutation per source
	// epoch); without it, in record order.
	Shuffle bool
}

// mixNode is a node of the mixture's split tree: sources [lo, hi); an inner node sends a
// share a/d of its positions to its left child (sources [lo, mid)).
type mixNode struct {
	lo, mid, hi int
	a, d, theta uint64
	left, right int // children's indices in Mixture.nodes; -1 for a leaf
	depth       int
}

// Mixture is ORDER.md's weighted mixture of K sources: which source each position of the
// mixture's stream draws from, and which of its records.
type Mixture struct {
	opts   MixOptions
	counts []int64
	units  []uint64
	total  uint64
	nodes  []mixNode // preorder; nodes[0] is the root
	leaf   []int     // node index of each source's leaf
	seeds  []uint64  // each source's v2 seed
	size   int64     // epoch size
}

// MixRef is one record of a mixture: its source and its record number in that source.
type MixRef struct {
	Source int
	Record int64
}

// MixUnits returns the quantised weights of ORDER.md "Mixtures" step 1.
func MixUnits(weights []float64) ([]uint64, error) {
	if len(weights) == 0 {
		return nil, fmt.Errorf("shard: a mixture needs at least one source")
	}
	var total float64
	for k, w := range weights {
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("shard: mixture weight %d is %v, want a finite number > 0", k, w)
		}
		total += w
	}
	if math.IsInf(total, 0) {
		return nil, fmt.Errorf("shard: mixture weights sum to infinity")
	}
	units := make([]uint64, len(weights))
	for k, w := range weights {
		u := math.Floor(float64(w/total) * (1 << MixUnitBits))
		if u < 1 {
			return nil, fmt.Errorf("shard: mixture weight %d (%v) is below 2^-%d of the total %v", k, w, MixUnitBits, total)
		}
		units[k] = uint64(u)
	}
	return units, nil
}

// NewMixture returns the mixture of sources holding counts[k] records each.
func NewMixture(counts []int64, o MixOptions) (*Mixture, error) {
	if len(o.Weights) != len(counts) {
		return nil, fmt.Errorf("shard: %d mixture weights for %d sources", len(o.Weights), len(counts))
	}
	units, err := MixUnits(o.Weights)
	if err != nil {
		return nil, err
	}
	for k, c := range counts {
		if c < 1 {
			return nil, fmt.Errorf("shard: mixture source %d has %d records, want ≥ 1", k, c)
		}
	}
	m := &Mixture{opts: o, counts: slices.Clone(counts), units: units, leaf: make([]int, len(counts))}
	m.opts.Weights = slices.Clone(o.Weights)
	for _, u := range units {
		m.total += u
	}
	m.build(0, len(units), 0)
	g := SplitMix64{State: o.Seed ^ mixPhaseKey}
	for i := range m.nodes {
		if n := &m.nodes[i]; n.left >= 0 {
			n.theta = g.Next() % n.d
		}
	}
	g = SplitMix64{State: o.Seed ^ mixSourceKey}
	m.seeds = make([]uint64, len(counts))
	for k := range m.seeds {
		m.seeds[k] = g.Next()
	}
	if err := m.setSize(o.EpochSize); err != nil {
		return nil, err
	}
	return m, nil
}

// build appends the subtree of sources [lo, hi) in preorder and returns its root's index.
func (m *Mixture) build(lo, hi, depth int) int {
	i := len(m.nodes)
	m.nodes = append(m.nodes, mixNode{lo: lo, hi: hi, left: -1, right: -1, depth: depth})
	for k := lo; k < hi; k++ {
		m.nodes[i].d += m.units[k]
	}
	if hi-lo == 1 {
		m.leaf[lo] = i
		return i
	}
	mid := lo + (hi-lo)/2
	for k := lo; k < mid; k++ {
		m.nodes[i].a += m.units[k]
	}
	m.nodes[i].mid = mid
	l := m.build(lo, mid, depth+1)
	r := m.build(mid, hi, depth+1)
	m.nodes[i].left, m.nodes[i].right = l, r
	return i
}

func (m *Mixture) setSize(size int64) error {
	var sum int64
	for _, c := range m.counts {
		sum += c
	}
	if size < 0 {
		return fmt.Errorf("shard: mixture epoch size %d is negative", size)
	}
	if m.opts.Replacement {
		if size == 0 {
			size = sum
		}
		if size > MixMaxPositions {
			return fmt.Errorf("shard: mixture epoch size %d is over the limit 2^40", size)
		}
		m.size = size
		return nil
	}
	most := m.maxEpoch(sum)
	if size == 0 {
		size = most
	}
	if size > most {
		for k, c := range m.counts {
			if n := int64(m.count(k, uint64(size))); n > c {
				return fmt.Errorf("shard: a mixture epoch of %d records without replacement draws %d records from source %d, which has %d (at most %d records an epoch)", size, n, k, c, most)
			}
		}
	}
	m.size = size
	return nil
}

// maxEpoch returns the largest L ≤ sum for which no source's share of the first L positions
// exceeds its record count (the shares grow with L, so a binary search finds it).
func (m *Mixture) maxEpoch(sum int64) int64 {
	fits := func(l int64) bool {
		for k, c := range m.counts {
			if int64(m.count(k, uint64(l))) > c {
				return false
			}
		}
		return true
	}
	lo, hi := int64(1), min(sum, MixMaxPositions) // L = 1 always fits: one record of one source
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// choose returns the source of stream position x and its ordinal among that source's
// positions (ORDER.md "Mixtures" step 3).
func (m *Mixture) choose(x uint64) (int, uint64) {
	n := &m.nodes[0]
	for n.left >= 0 {
		c := (x*n.a + n.theta) / n.d
		if ((x+1)*n.a+n.theta)/n.d > c {
			x, n = c, &m.nodes[n.left]
		} else {
			x, n = x-c, &m.nodes[n.right]
		}
	}
	return n.lo, x
}

// count returns how many of the stream positions [0, x) draw from source k.
func (m *Mixture) count(k int, x uint64) uint64 {
	n := &m.nodes[0]
	for n.left >= 0 {
		c := (x*n.a + n.theta) / n.d
		if k < n.mid {
			x, n = c, &m.nodes[n.left]
		} else {
			x, n = x-c, &m.nodes[n.right]
		}
	}
	return x
}

// Sources returns the number of sources.
func (m *Mixture) Sources() int { return len(m.counts) }

// Counts returns each source's record count.
func (m *Mixture) Counts() []int64 { return slices.Clone(m.counts) }

// Units returns the quantised weights; source k's share of the stream is Units()[k]/Σ Units().
func (m *Mixture) Units() []uint64 { return slices.Clone(m.units) }

// EpochSize returns the number of records of one mixture epoch, all ranks together.
func (m *Mixture) EpochSize() int64 { return m.size }

// Depth returns source k's depth in the split tree: every window of n consecutive positions of
// the stream draws n·Units[k]/ΣUnits records of source k, give or take less than Depth(k).
func (m *Mixture) Depth(k int) int { return m.nodes[m.leaf[k]].depth }

// base returns the stream position of epoch's first position, checking that the epoch's
// positions stay below MixMaxPositions.
func (m *Mixture) base(epoch uint64) (uint64, error) {
	if !m.opts.Replacement {
		return 0, nil
	}
	if epoch >= uint64(MixMaxPositions/m.size) {
		return 0, fmt.Errorf("shard: mixture epoch %d of %d records is past stream position 2^40", epoch, m.size)
	}
	return epoch * uint64(m.size), nil
}

// record returns the record that source k's draw number o gives in mixture epoch epoch.
func (m *Mixture) record(k int, o uint64, epoch uint64) int64 {
	n := uint64(m.counts[k])
	e, i := epoch, o
	if m.opts.Replacement {
		e, i = o/n, o%n
	}
	if !m.opts.Shuffle {
		return int64(i)
	}
	p := NewPermutation(int64(n), m.seeds[k], e)
	return p.At(int64(i))
}

// At returns the record at position p (0 ≤ p < EpochSize) of mixture epoch epoch.
func (m *Mixture) At(epoch uint64, p int64) (MixRef, error) {
	if p < 0 || p >= m.size {
		return MixRef{}, fmt.Errorf("shard: position %d outside the mixture epoch's %d records", p, m.size)
	}
	b, err := m.base(epoch)
	if err != nil {
		return MixRef{}, err
	}
	k, o := m.choose(b + uint64(p))
	return MixRef{Source: k, Record: m.record(k, o, epoch)}, nil
}

// MixOrderOptions selects one rank's share of a mixture epoch: ORDER.md v2 steps 2-5 over the
// mixture epoch's positions.
type MixOrderOptions struct {
	Epoch     uint64
	BatchSize int
	Rank      int
	World     int // 0 means 1
	DropLast  bool
	Start     int64 // global position to start from (MixState.Position)
}

// Order returns the records one rank reads in one mixture epoch, in order, and its plan:
// batches are consecutive runs of BatchSize refs, the last may be TailPerRank long.
func (m *Mixture) Order(o MixOrderOptions) ([]MixRef, PlanV2, error) {
	p, err := NewPlanV2(m.size, o.Start, o.BatchSize, o.Rank, o.World, o.DropLast)
	if err != nil {
		return nil, p, err
	}
	b, err := m.base(o.Epoch)
	if err != nil {
		return nil, p, err
	}
	out := make([]MixRef, 0, p.Records())
	p.positions(func(q int64) {
		if q >= m.size {
			q = (q - m.size) % m.size // padding repeats the epoch's first positions
		}
		k, d := m.choose(b + uint64(q))
		out = append(out, MixRef{Source: k, Record: m.record(k, d, o.Epoch)})
	})
	return out, p, nil
}

// MixSourceState is one source's cursor in a MixState.
type MixSourceState struct {
	Records  int64  `json:"records"`  // the source's record count
	Drawn    int64  `json:"drawn"`    // draws from the source so far (with replacement: over all mixture epochs)
	Epoch    uint64 `json:"epoch"`    // source epoch of the next draw
	Position int64  `json:"position"` // position of the next draw in that source epoch's order
}

// MixState is where a mixture epoch stands, the same on every rank: ORDER.md's loader state
// plus the mixture's parameters and each source's cursor. Restore it into a run with any
// number of ranks (Mixture.Restore).
type MixState struct {
	Version     int              `json:"version"` // LoaderStateVersion
	Order       int              `json:"order"`   // OrderV2
	Mixture     int              `json:"mixture"` // MixStateVersion
	Seed        uint64           `json:"seed"`
	Epoch       uint64           `json:"epoch"`
	Position    int64            `json:"position"` // positions of the mixture epoch consumed by all ranks together
	EpochSize   int64            `json:"epoch_size"`
	Replacement bool             `json:"replacement"`
	Shuffle     bool             `json:"shuffle"`
	Units       []uint64         `json:"units"`
	Sources     []MixSourceState `json:"sources"`
}

// State returns the state of mixture epoch epoch once position positions are consumed.
func (m *Mixture) State(epoch uint64, position int64) (MixState, error) {
	if position < 0 || position > m.size {
		return MixState{}, fmt.Errorf("shard: position %d outside the mixture epoch's %d records", position, m.size)
	}
	b, err := m.base(epoch)
	if err != nil {
		return MixState{}, err
	}
	s := MixState{Version: LoaderStateVersion, Order: OrderV2, Mixture: MixStateVersion, Seed: m.opts.Seed, Epoch: epoch,
		Position: position, EpochSize: m.size, Replacement: m.opts.Replacement, Shuffle: m.opts.Shuffle, Units: m.Units()}
	for k, c := range m.counts {
		d := m.count(k, b+uint64(position))
		src := MixSourceState{Records: c, Drawn: int64(d), Epoch: epoch, Position: int64(d)}
		if m.opts.Replacement {
			src.Epoch, src.Position = d/uint64(c), int64(d%uint64(c))
		}
		s.Sources = append(s.Sources, src)
	}
	return s, nil
}

// Restore checks that s is a state of this mixture (same seed, weights, sources, epoch size
// and options, and cursors that agree with its position) and returns its epoch and the global
// position to start from (MixOrderOptions.Epoch and Start).
func (m *Mixture) Restore(s MixState) (epoch uint64, start int64, err error) {
	if s.Version != LoaderStateVersion || s.Order != OrderV2 || s.Mixture != MixStateVersion {
		return 0, 0, fmt.Errorf("shard: mixture state version %d/order %d/mixture %d, this reader knows %d/%d/%d",
			s.Version, s.Order, s.Mixture, LoaderStateVersion, OrderV2, MixStateVersion)
	}
	switch {
	case s.Seed != m.opts.Seed:
		err = fmt.Errorf("seed %d, the mixture's is %d", s.Seed, m.opts.Seed)
	case !slices.Equal(s.Units, m.units):
		err = fmt.Errorf("weights (units %v), the mixture's are %v", s.Units, m.units)
	case s.EpochSize != m.size:
		err = fmt.Errorf("epoch size %d, the mixture's is %d", s.EpochSize, m.size)
	case s.Replacement != m.opts.Replacement || s.Shuffle != m.opts.Shuffle:
		err = fmt.Errorf("replacement %v shuffle %v, the mixture's are %v %v", s.Replacement, s.Shuffle, m.opts.Replacement, m.opts.Shuffle)
	case len(s.Sources) != len(m.counts):
		err = fmt.Errorf("%d sources, the mixture has %d", len(s.Sources), len(m.counts))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("shard: the mixture state is another mixture's: %w", err)
	}
	want, err := m.State(s.Epoch, s.Position)
	if err != nil {
		return 0, 0, err
	}
	for k, src := range s.Sources {
		if src != want.Sources[k] {
			return 0, 0, fmt.Errorf("shard: the mixture state's cursor of source %d (%+v) is not the one of its position %d (%+v)", k, src, s.Position, want.Sources[k])
		}
	}
	return s.Epoch, s.Position, nil
}

// MixSourceSummary is one source's line of a MixSummary.
type MixSourceSummary struct {
	Records  int64   `json:"records"`
	Weight   float64 `json:"weight"`
	Units    uint64  `json:"units"`
	Share    float64 `json:"share"`    // Units / ΣUnits
	Depth    int     `json:"depth"`    // deviation bound in any window of consecutive positions
	Drawn    int64   `json:"drawn"`    // records drawn from the source in the epoch
	Fraction float64 `json:"fraction"` // Drawn / EpochSize
	Passes   float64 `json:"passes"`   // Drawn / Records
	BatchMin *int    `json:"batch_min,omitempty"`
	BatchMax *int    `json:"batch_max,omitempty"`
}

// MixSummary is the realised mixture of one epoch (ORDER.md "Introspection"): what
// `packer mix-plan` prints. With a batch size, BatchMin and BatchMax of each source are the
// fewest and most of its records in one whole batch of any rank.
type MixSummary struct {
	Epoch          uint64             `json:"epoch"`
	EpochSize      int64              `json:"epoch_size"`
	Seed           uint64             `json:"seed"`
	Replacement    bool               `json:"replacement"`
	Shuffle        bool               `json:"shuffle"`
	Sources        []MixSourceSummary `json:"sources"`
	BatchSize      int                `json:"batch_size,omitempty"`
	WorldSize      int                `json:"world_size,omitempty"`
	BatchesPerRank *int64             `json:"batches_per_rank,omitempty"`
}

// Summary returns the realised mixture of epoch; batchSize 0 leaves out the per-batch counts.
func (m *Mixture) Summary(epoch uint64, batchSize, world int, dropLast bool) (MixSummary, error) {
	x0, err := m.base(epoch)
	if err != nil {
		return MixSummary{}, err
	}
	s := MixSummary{Epoch: epoch, EpochSize: m.size, Seed: m.opts.Seed, Replacement: m.opts.Replacement, Shuffle: m.opts.Shuffle}
	x1 := x0 + uint64(m.size)
	for k, c := range m.counts {
		drawn := int64(m.count(k, x1) - m.count(k, x0))
		s.Sources = append(s.Sources, MixSourceSummary{Records: c, Weight: m.opts.Weights[k], Units: m.units[k],
			Share: float64(m.units[k]) / float64(m.total), Depth: m.Depth(k), Drawn: drawn,
			Fraction: float64(drawn) / float64(m.size), Passes: float64(drawn) / float64(c)})
	}
	if batchSize == 0 {
		return s, nil
	}
	plan, err := NewPlanV2(m.size, 0, batchSize, 0, world, dropLast)
	if err != nil {
		return MixSummary{}, err
	}
	nb := plan.Batches()
	s.BatchSize, s.WorldSize, s.BatchesPerRank = batchSize, plan.World, &nb
	if plan.Full == 0 {
		return s, nil
	}
	lo, hi := make([]int, len(m.counts)), make([]int, len(m.counts))
	for k := range lo {
		lo[k] = batchSize
	}
	n := make([]int, len(m.counts))
	full := uint64(plan.Full) * uint64(batchSize) * uint64(plan.World)
	for p := range full { // every rank's whole batches: runs of batchSize positions
		k, _ := m.choose(x0 + p)
		n[k]++
		if (p+1)%uint64(batchSize) == 0 {
			for k := range n {
				lo[k], hi[k], n[k] = min(lo[k], n[k]), max(hi[k], n[k]), 0
			}
		}
	}
	for k := range s.Sources {
		s.Sources[k].BatchMin, s.Sources[k].BatchMax = &lo[k], &hi[k]
	}
	return s, nil
}
