package shard

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestMixDoc checks ORDER.md's "Mixtures" section against the constants.
func TestMixDoc(t *testing.T) {
	doc, err := os.ReadFile("ORDER.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i := strings.Index(text, "\n# Mixtures\n")
	if i < 0 {
		t.Fatal("ORDER.md has no section \"Mixtures\"")
	}
	sec := text[i:]
	if j := strings.Index(sec[1:], "\n# "); j >= 0 {
		sec = sec[:j+1]
	}
	for name, want := range map[string]uint64{"MIX_PHASE_KEY": mixPhaseKey, "MIX_SOURCE_KEY": mixSourceKey,
		"UNIT_BITS": MixUnitBits, "MAX_POSITIONS_BITS": 40, "STATE_MIXTURE": MixStateVersion} {
		m := regexp.MustCompile("`" + name + " = (0x[0-9A-F]+|[0-9]+)`").FindStringSubmatch(sec)
		if m == nil {
			t.Errorf("ORDER.md \"Mixtures\" does not define `%s = ...`", name)
			continue
		}
		got, err := strconv.ParseUint(m[1], 0, 64)
		if err != nil || got != want {
			t.Errorf("ORDER.md: %s = %s, the code has %#x", name, m[1], want)
		}
	}
	if MixMaxPositions != 1<<40 {
		t.Errorf("MixMaxPositions = %d", MixMaxPositions)
	}
}

// mixVector is one golden mixture sequence, shared with the Python reader's tests through
// testdata/mix_vectors.json (PACKER_WRITE_VECTORS=1 rewrites it from this implementation).
type mixVector struct {
	Counts      []int64   `json:"counts"`
	Weights     []float64 `json:"weights"`
	Seed        uint64    `json:"seed"`
	EpochSize   int64     `json:"epoch_size"` // asked for (0: default)
	Replacement bool      `json:"replacement"`
	Shuffle     bool      `json:"shuffle"`
	Epoch       uint64    `json:"epoch"`
	BatchSize   int       `json:"batch_size"`
	Rank        int       `json:"rank"`
	World       int       `json:"world"`
	DropLast    bool      `json:"drop_last"`
	Start       int64     `json:"start"`
	Units       []uint64  `json:"units"`
	Size        int64     `json:"size"` // the epoch size in effect
	Batches     int64     `json:"batches"`
	Sources     []int     `json:"sources"`
	Records     []int64   `json:"records"`
	State       MixState  `json:"state"` // after the first batch
}

func mixCases() []mixVector {
	cs := []mixVector{
		{Counts: []int64{100, 50}, Weights: []float64{0.7, 0.3}, Seed: 1, Replacement: true, Shuffle: true, BatchSize: 8, World: 2},
		{Counts: []int64{10, 20, 30}, Weights: []float64{1, 1, 1}, Seed: 3, Shuffle: true, BatchSize: 4, Rank: 1, World: 3},
		{Counts: []int64{7}, Weights: []float64{2}, Seed: 9, Replacement: true, EpochSize: 20, Epoch: 2, BatchSize: 3, World: 1},
		{Counts: []int64{1000, 5, 300, 40, 7}, Weights: []float64{0.5, 0.01, 0.29, 0.1, 0.1}, Seed: 1 << 63, EpochSize: 500, Replacement: true, Shuffle: true, Epoch: 5, BatchSize: 16, Rank: 3, World: 4, Start: 128},
	}
	rng := rand.New(rand.NewPCG(29, 3))
	for range 40 {
		k := 1 + rng.IntN(6)
		c := mixVector{Seed: rng.Uint64(), Replacement: rng.IntN(2) == 0, Shuffle: rng.IntN(4) != 0, Epoch: uint64(rng.IntN(4)),
			BatchSize: 1 + rng.IntN(12), World: 1 + rng.IntN(4), DropLast: rng.IntN(2) == 0}
		for range k {
			c.Counts = append(c.Counts, 1+rng.Int64N(120))
			c.Weights = append(c.Weights, 0.05+rng.Float64())
		}
		if c.Replacement && rng.IntN(2) == 0 {
			c.EpochSize = 1 + rng.Int64N(300)
		}
		c.Rank = rng.IntN(c.World)
		cs = append(cs, c)
	}
	for i := range cs {
		c := &cs[i]
		m, err := NewMixture(c.Counts, MixOptions{Weights: c.Weights, Seed: c.Seed, EpochSize: c.EpochSize, Replacement: c.Replacement, Shuffle: c.Shuffle})
		if err != nil {
			panic(err)
		}
		c.Units, c.Size = m.Units(), m.EpochSize()
		if i >= 4 {
			c.Start = rand.New(rand.NewPCG(uint64(i), 1)).Int64N(c.Size + 1)
		}
		refs, plan, err := m.Order(MixOrderOptions{Epoch: c.Epoch, BatchSize: c.BatchSize, Rank: c.Rank, World: c.World, DropLast: c.DropLast, Start: c.Start})
		if err != nil {
			panic(err)
		}
		c.Batches = plan.Batches()
		c.Sources, c.Records = []int{}, []int64{}
		for _, r := range refs {
			c.Sources = append(c.Sources, r.Source)
			c.Records = append(c.Records, r.Record)
		}
		if c.State, err = m.State(c.Epoch, plan.StateAfter(1)); err != nil {
			panic(err)
		}
	}
	return cs
}

func TestMixVectors(t *testing.T) {
	cs := mixCases()
	if os.Getenv("PACKER_WRITE_VECTORS") == "1" {
		var b bytes.Buffer
		b.WriteString("[\n")
		for i, c := range cs {
			line, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
			if i < len(cs)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString("]\n")
		if err := os.WriteFile("testdata/mix_vectors.json", b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile("testdata/mix_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file []mixVector
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(file, cs) {
		t.Errorf("testdata/mix_vectors.json differs from the mixture order this code computes")
	}
	// Written down by hand from the first run, so that rewriting the file cannot hide a change.
	if got := cs[2].Records[:6]; !slices.Equal(got, []int64{5, 6, 0, 1, 2, 3}) {
		t.Errorf("one unshuffled source, epoch 2: %v", got)
	}
	if got := cs[0].Units; !slices.Equal(got, []uint64{734003, 314572}) {
		t.Errorf("units of 0.7, 0.3: %v", got)
	}
}

// prefixDeviation returns max - min over x in [x0, x1] of count(k, x) - x·u_k/U: every window
// of consecutive positions in that range deviates from its share by at most that.
func prefixDeviation(m *Mixture, k int, x0, x1 uint64) float64 {
	f := float64(m.units[k]) / float64(m.total)
	lo, hi := 1e300, -1e300
	c := 0 // draws of k in [x0, x): relative to x0, so that the products stay exact enough
	for x := x0; x <= x1; x++ {
		if x > x0 {
			if s, _ := m.choose(x - 1); s == k {
				c++
			}
		}
		d := float64(c) - float64(x-x0)*f
		lo, hi = min(lo, d), max(hi, d)
	}
	return hi - lo
}

// TestMixProportions (property): for random weights of 1-9 sources and random seeds, every
// window of consecutive stream positions draws each source's share give or take less than its
// depth in the split tree (ceil(log2 K) at most: 1 for 2 sources, 2 for 3-4, 3 for 5-8, 4 for
// 9); choose and count agree (the ordinal of a draw is the count of the source's earlier draws).
func TestMixProportions(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 29))
	for it := range 150 {
		k := 1 + rng.IntN(9)
		w := make([]float64, k)
		counts := make([]int64, k)
		for i := range w {
			w[i] = 0.001 + rng.Float64()*float64(1+rng.IntN(50))
			counts[i] = 1 + rng.Int64N(1000)
		}
		m, err := NewMixture(counts, MixOptions{Weights: w, Seed: rng.Uint64(), Replacement: true})
		if err != nil {
			t.Fatal(err)
		}
		x0 := uint64(rng.Int64N(MixMaxPositions - 5000))
		const span = 3000
		depthMax := 0
		for s := range k {
			d := m.Depth(s)
			depthMax = max(depthMax, d)
			if dev := prefixDeviation(m, s, x0, x0+span); d == 0 && dev != 0 || d > 0 && dev >= float64(d) {
				t.Fatalf("it %d: source %d of %d (depth %d, units %v): windows deviate by up to %.3f", it, s, k, d, m.units, dev)
			}
		}
		if bound := bitsLen(k - 1); depthMax > bound {
			t.Fatalf("it %d: depth %d for %d sources, want ≤ %d", it, depthMax, k, bound)
		}
		for x := x0; x < x0+200; x++ {
			s, o := m.choose(x)
			if m.count(s, x) != o || m.count(s, x+1) != o+1 {
				t.Fatalf("it %d: position %d: source %d ordinal %d, counts %d→%d", it, x, s, o, m.count(s, x), m.count(s, x+1))
			}
		}
	}
}

func bitsLen(n int) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
}

// TestMixBatchProportions: in every batch of every rank (B consecutive positions), each
// source's count is within its depth of B·share.
func TestMixBatchProportions(t *testing.T) {
	m, err := NewMixture([]int64{5000, 300, 2000}, MixOptions{Weights: []float64{0.6, 0.1, 0.3}, Seed: 8, EpochSize: 40000, Replacement: true, Shuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	const B = 64
	for r := range 4 {
		refs, plan, err := m.Order(MixOrderOptions{Epoch: 1, BatchSize: B, Rank: r, World: 4, DropLast: true})
		if err != nil {
			t.Fatal(err)
		}
		for j := range plan.Full {
			var n [3]int
			for _, x := range refs[j*B : (j+1)*B] {
				n[x.Source]++
			}
			for s := range 3 {
				want := float64(B) * float64(m.units[s]) / float64(m.total)
				if d := float64(n[s]) - want; d <= -float64(m.Depth(s)) || d >= float64(m.Depth(s)) {
					t.Fatalf("rank %d batch %d: source %d has %d records, want %.2f ± <%d", r, j, s, n[s], want, m.Depth(s))
				}
			}
		}
	}
}

// TestMixExactlyOnce (property): with replacement, each source epoch of each source draws each
// of its records exactly once, across consecutive mixture epochs read on varying world sizes;
// without, a mixture epoch draws no record twice and each source's share of it.
func TestMixExactlyOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 29))
	for it := range 60 {
		k := 1 + rng.IntN(4)
		counts, w := make([]int64, k), make([]float64, k)
		for i := range counts {
			counts[i], w[i] = 1+rng.Int64N(60), 0.1+rng.Float64()
		}
		repl := rng.IntN(2) == 0
		m, err := NewMixture(counts, MixOptions{Weights: w, Seed: rng.Uint64(), Replacement: repl, Shuffle: rng.IntN(3) != 0})
		if err != nil {
			t.Fatal(err)
		}
		drawn := make([][]int64, k) // per source, the records in draw order
		for e := range uint64(4) {
			b := 1 + rng.IntN(9)
			world := 1 + rng.IntN(3)
			perEpoch := make([][]int64, k)
			// the global sequence: batch j of rank 0, of rank 1, ... (drop-last: no padding)
			var all [][]MixRef
			var plan PlanV2
			for r := range world {
				refs, p, err := m.Order(MixOrderOptions{Epoch: e, BatchSize: b, Rank: r, World: world, DropLast: true})
				if err != nil {
					t.Fatal(err)
				}
				all, plan = append(all, refs), p
			}
			for j := range plan.Full {
				for r := range world {
					for _, x := range all[r][j*int64(b) : (j+1)*int64(b)] {
						perEpoch[x.Source] = append(perEpoch[x.Source], x.Record)
					}
				}
			}
			// the dropped tail, from rank 0 of one rank: positions after the full batches
			for q := plan.Full * int64(b) * int64(world); q < m.EpochSize(); q++ {
				x, err := m.At(e, q)
				if err != nil {
					t.Fatal(err)
				}
				perEpoch[x.Source] = append(perEpoch[x.Source], x.Record)
			}
			for s := range k {
				if !repl {
					if !distinct(perEpoch[s]) || int64(len(perEpoch[s])) != int64(m.count(s, uint64(m.EpochSize()))) || int64(len(perEpoch[s])) > counts[s] {
						t.Fatalf("it %d epoch %d source %d: %d records drawn, distinct %v", it, e, s, len(perEpoch[s]), distinct(perEpoch[s]))
					}
				}
				drawn[s] = append(drawn[s], perEpoch[s]...)
			}
		}
		if repl {
			for s := range k {
				d := drawn[s]
				for a := int64(0); a+counts[s] <= int64(len(d)); a += counts[s] {
					pass := slices.Clone(d[a : a+counts[s]])
					slices.Sort(pass)
					for i, x := range pass {
						if x != int64(i) {
							t.Fatalf("it %d source %d: source epoch %d is not every record once", it, s, a/counts[s])
						}
					}
				}
			}
		}
	}
}

func distinct(s []int64) bool {
	c := slices.Clone(s)
	slices.Sort(c)
	return len(slices.Compact(c)) == len(s)
}

// TestMixElasticResume: a mixture read on w1 ranks stops after k batches; its state, through
// JSON, resumes the epoch on w2 ranks; together they read the epoch's positions exactly once
// (plus the padding of the last batch).
func TestMixElasticResume(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 29))
	for it := range 100 {
		counts := []int64{1 + rng.Int64N(200), 1 + rng.Int64N(200), 1 + rng.Int64N(200)}
		m, err := NewMixture(counts, MixOptions{Weights: []float64{0.2 + rng.Float64(), 0.2 + rng.Float64(), 0.2 + rng.Float64()},
			Seed: rng.Uint64(), Replacement: rng.IntN(2) == 0, Shuffle: true})
		if err != nil {
			t.Fatal(err)
		}
		e := uint64(rng.IntN(3))
		b, w1, w2 := 1+rng.IntN(16), 1+rng.IntN(4), 1+rng.IntN(4)
		drop := rng.IntN(2) == 0
		seen := map[MixRef]int{}
		read := func(start int64, world int, stop int64) int64 {
			var p PlanV2
			for r := range world {
				refs, plan, err := m.Order(MixOrderOptions{Epoch: e, BatchSize: b, Rank: r, World: world, DropLast: drop, Start: start})
				if err != nil {
					t.Fatal(err)
				}
				p = plan
				for i, x := range refs {
					if int64(i/b) < stop {
						seen[x]++
					}
				}
			}
			return p.StateAfter(min(stop, p.Batches()))
		}
		p0, _ := NewPlanV2(m.EpochSize(), 0, b, 0, w1, drop)
		k := rng.Int64N(p0.Batches() + 1)
		pos := read(0, w1, k)
		st, err := m.State(e, pos)
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(st)
		var back MixState
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		e2, start, err := m.Restore(back)
		if err != nil || e2 != e || start != pos {
			t.Fatalf("it %d: restore: %v %d %d", it, err, e2, start)
		}
		read(start, w2, 1<<62)
		want := map[MixRef]int{}
		for q := range m.EpochSize() {
			x, _ := m.At(e, q)
			want[x]++
		}
		var missing, extra int
		for x, n := range want {
			missing += max(0, n-seen[x])
		}
		for x, n := range seen {
			extra += max(0, n-want[x])
		}
		g := int64(b) * int64(max(w1, w2))
		if drop && (extra != 0 || int64(missing) >= g) || !drop && (missing != 0 || extra >= max(w1, w2)) {
			t.Fatalf("it %d (b=%d w=%d→%d k=%d drop=%v): %d missing, %d extra", it, b, w1, w2, k, drop, missing, extra)
		}
	}
}

func TestMixRefusals(t *testing.T) {
	for _, c := range []struct {
		counts []int64
		o      MixOptions
		want   string
	}{
		{[]int64{1, 2}, MixOptions{Weights: []float64{1}}, "1 mixture weights for 2 sources"},
		{[]int64{1, 2}, MixOptions{Weights: []float64{1, 0}}, "weight 1 is 0"},
		{[]int64{1, 2}, MixOptions{Weights: []float64{1, -1}}, "weight 1 is -1"},
		{[]int64{1, 2}, MixOptions{Weights: []float64{1, 1e-9}}, "below 2^-20"},
		{[]int64{0, 2}, MixOptions{Weights: []float64{1, 1}}, "source 0 has 0 records"},
		{[]int64{10, 10}, MixOptions{Weights: []float64{1, 1}, EpochSize: 21}, "draws 11 records from source"},
		{[]int64{10}, MixOptions{Weights: []float64{1}, EpochSize: 1 << 41, Replacement: true}, "over the limit"},
	} {
		_, err := NewMixture(c.counts, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %+v: %v, want %q", c.counts, c.o, err, c.want)
		}
	}
	m, _ := NewMixture([]int64{10, 10}, MixOptions{Weights: []float64{1, 1}, Seed: 4})
	if m.EpochSize() != 20 {
		t.Errorf("equal weights, 10+10 records, no replacement: epoch %d, want 20", m.EpochSize())
	}
	st, _ := m.State(0, 6)
	other, _ := NewMixture([]int64{10, 10}, MixOptions{Weights: []float64{1, 2}, Seed: 4})
	if _, _, err := other.Restore(st); err == nil || !strings.Contains(err.Error(), "weights") {
		t.Errorf("state of other weights: %v", err)
	}
	st.Sources[1].Drawn++
	if _, _, err := m.Restore(st); err == nil || !strings.Contains(err.Error(), "cursor of source 1") {
		t.Errorf("tampered cursor: %v", err)
	}
}

// TestMixLoader reads a mixture of two datasets of different record shapes through
// MixLoader, on 2 ranks, and checks every record's bytes and label against the source.
func TestMixLoader(t *testing.T) {
	optsA := WriterOptions{Sample: SampleSpec{Shape: []int{4}, DType: Uint8, Layout: "hwc"}}
	optsB := WriterOptions{Sample: SampleSpec{Shape: []int{-1, 3}, DType: Uint8, Layout: "hwc"}}
	recsA, recsB := randomRecords(optsA, 37, 1), randomRecords(optsB, 11, 2)
	a, err := OpenDataset(buildDataset(t, optsA, recsA, []int{20, 17}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenDataset(buildDataset(t, optsB, recsB, []int{11}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := NewMixture([]int64{37, 11}, MixOptions{Weights: []float64{3, 1}, Seed: 6, EpochSize: 60, Replacement: true, Shuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	recs := [][]testRecord{recsA, recsB}
	var nb []int64
	for r := range 2 {
		o := MixOrderOptions{Epoch: 1, BatchSize: 8, Rank: r, World: 2}
		l, err := NewMixLoader(m, []*Dataset{a, b}, o)
		if err != nil {
			t.Fatal(err)
		}
		want, _, _ := m.Order(o)
		i := 0
		for l.Next() {
			bt := l.Batch()
			for j := range bt.Len() {
				x := want[i]
				i++
				src := recs[x.Source][x.Record]
				if bt.Sources[j] != x.Source || bt.Indices[j] != x.Record || !bytes.Equal(bt.Records[j], src.data) || bt.Labels[j] != src.label {
					t.Fatalf("rank %d record %d: got source %d record %d", r, i, bt.Sources[j], bt.Indices[j])
				}
			}
		}
		if l.Err() != nil || i != len(want) {
			t.Fatalf("rank %d: %v, %d of %d records", r, l.Err(), i, len(want))
		}
		st, err := l.State()
		if err != nil || st.Position != 60 {
			t.Fatalf("rank %d: end state %+v %v", r, st, err)
		}
		nb = append(nb, l.Batches())
	}
	if nb[0] != nb[1] {
		t.Errorf("ranks yield %v batches", nb)
	}
	if _, err := NewMixLoader(m, []*Dataset{b, a}, MixOrderOptions{BatchSize: 8}); err == nil || !strings.Contains(err.Error(), "11 records") {
		t.Errorf("datasets swapped: %v", err)
	}
}
