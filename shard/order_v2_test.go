package shard

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// orderV2Vector is one golden ORDER.md v2 sequence, shared with the Python reader's tests
// through testdata/order_v2_vectors.json (PACKER_WRITE_VECTORS=1 rewrites the file from the
// Go implementation; the Python test then checks its own against it).
type orderV2Vector struct {
	N         int64   `json:"n"`
	BatchSize int     `json:"batch_size"`
	Shuffle   bool    `json:"shuffle"`
	Seed      uint64  `json:"seed"`
	Epoch     uint64  `json:"epoch"`
	Rank      int     `json:"rank"`
	World     int     `json:"world"`
	DropLast  bool    `json:"drop_last"`
	Start     int64   `json:"start"`
	Batches   int64   `json:"batches"`
	Expected  []int64 `json:"expected"`
	PermHead  []int64 `json:"perm_head"` // the permutation's first positions (up to 64)
}

// orderV2Cases returns the vectors' inputs: a few chosen ones, then random ones.
func orderV2Cases() []orderV2Vector {
	cs := []orderV2Vector{
		{N: 65, BatchSize: 32, Shuffle: true, Seed: 1, World: 2},
		{N: 65, BatchSize: 32, Shuffle: true, Seed: 1, Rank: 1, World: 2},
		{N: 63, BatchSize: 32, Shuffle: true, Seed: 1, Rank: 1, World: 2, DropLast: true},
		{N: 10, BatchSize: 4, Shuffle: true, Seed: 42, World: 1},
		{N: 1, BatchSize: 3, Shuffle: true, Seed: 7, Rank: 2, World: 3},
		{N: 0, BatchSize: 3, Shuffle: true, Seed: 7, World: 2},
		{N: 300, BatchSize: 64, Shuffle: false, Rank: 1, World: 2},
		{N: 1281167, BatchSize: 256, Shuffle: true, Seed: math.MaxUint64, Epoch: 3, Rank: 7, World: 8, Start: 1281167 - 3000},
		{N: 1 << 20, BatchSize: 16, Shuffle: true, Seed: 5, Rank: 0, World: 1, Start: 1<<20 - 40},
		{N: 1<<20 + 1, BatchSize: 16, Shuffle: true, Seed: 5, Rank: 0, World: 1, Start: 1<<20 - 40},
	}
	rng := rand.New(rand.NewPCG(24, 2))
	for range 60 {
		c := orderV2Vector{N: rng.Int64N(400), BatchSize: 1 + rng.IntN(20), Shuffle: rng.IntN(4) != 0,
			Seed: rng.Uint64(), Epoch: uint64(rng.IntN(5)), World: 1 + rng.IntN(5), DropLast: rng.IntN(2) == 0}
		c.Rank = rng.IntN(c.World)
		c.Start = rng.Int64N(c.N + 1)
		cs = append(cs, c)
	}
	for i := range cs {
		c := &cs[i]
		order, plan, err := EpochOrderV2(c.N, OrderV2Options{Shuffle: c.Shuffle, Seed: c.Seed, Epoch: c.Epoch, BatchSize: c.BatchSize,
			Rank: c.Rank, World: c.World, DropLast: c.DropLast, Start: c.Start})
		if err != nil {
			panic(err)
		}
		c.Expected, c.Batches = order, plan.Batches()
		p := NewPermutation(c.N, c.Seed, c.Epoch)
		c.PermHead = []int64{}
		for q := range min(c.N, 64) {
			c.PermHead = append(c.PermHead, p.At(q))
		}
	}
	return cs
}

func TestOrderV2Vectors(t *testing.T) {
	cs := orderV2Cases()
	if os.Getenv("PACKER_WRITE_VECTORS") == "1" {
		b := []byte("[\n")
		for i, c := range cs { // one vector a line
			line, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, line...)
			if i < len(cs)-1 {
				b = append(b, ',')
			}
			b = append(b, '\n')
		}
		b = append(b, "]\n"...)
		if err := os.WriteFile("testdata/order_v2_vectors.json", b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile("testdata/order_v2_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file []orderV2Vector
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(file, cs) {
		t.Errorf("testdata/order_v2_vectors.json differs from the order this code computes")
	}
	// Golden values written down by hand from the first run, so a change of the permutation
	// cannot go unnoticed by rewriting the file.
	if got := cs[3].Expected; !slices.Equal(got, []int64{5, 0, 1, 4, 6, 7, 9, 2, 3, 8}) {
		t.Errorf("N=10 seed 42: %v", got)
	}
}

// TestPermutationBijection: every position maps to a distinct record, for sizes around powers
// of two, and a seed and an epoch each change the order.
func TestPermutationBijection(t *testing.T) {
	sizes := []int64{0, 1, 2, 3, 4, 5, 7, 8, 9, 100, 255, 256, 257, 1000, 4095, 4096, 4097, 65537}
	for _, n := range sizes {
		for _, seed := range []uint64{0, 1, math.MaxUint64} {
			p := NewPermutation(n, seed, 2)
			seen := make([]bool, n)
			for i := range n {
				x := p.At(i)
				if x < 0 || x >= n || seen[x] {
					t.Fatalf("n=%d seed=%d: position %d gives %d (repeated or out of range)", n, seed, i, x)
				}
				seen[x] = true
			}
		}
	}
	a, b, c := NewPermutation(1000, 1, 0), NewPermutation(1000, 2, 0), NewPermutation(1000, 1, 1)
	same := func(p, q Permutation) bool {
		for i := range int64(1000) {
			if p.At(i) != q.At(i) {
				return false
			}
		}
		return true
	}
	if same(a, b) || same(a, c) {
		t.Fatal("another seed or epoch gave the same permutation")
	}
}

// imagenetClass is the class of record i of the ImageNet-shaped, class-sorted layout.
const imagenetPerClass, imagenetClasses = 1281, 1000

// medianDistinct returns the median number of distinct classes over the batches of size b cut
// from seq (the last partial batch left out).
func medianDistinct(seq []int64, b int) float64 {
	var ds []int
	seen := make([]int, imagenetClasses)
	for i := range seen {
		seen[i] = -1
	}
	for j := 0; j+b <= len(seq); j += b {
		d := 0
		for _, x := range seq[j : j+b] {
			c := x / imagenetPerClass
			if seen[c] != j {
				seen[c] = j
				d++
			}
		}
		ds = append(ds, d)
	}
	sort.Ints(ds)
	return float64(ds[len(ds)/2])
}

// TestOrderV2Quality: on ImageNet-1k's shape written in class order (1000 classes x 1281
// records), the batches of 256 of a rank hold at least 0.95 of the distinct classes of a
// uniform permutation's, with 1 rank and with 8; version 1 (shuffle buffer) does not, which is
// why version 2 exists.
func TestOrderV2Quality(t *testing.T) {
	if testing.Short() {
		t.Skip("1.28M indices")
	}
	n := int64(imagenetPerClass * imagenetClasses)
	uni := make([]int64, n)
	for i := range uni {
		uni[i] = int64(i)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	rng.Shuffle(len(uni), func(i, j int) { uni[i], uni[j] = uni[j], uni[i] })
	ref := medianDistinct(uni, 256)
	if ref < 215 || ref > 235 {
		t.Fatalf("uniform reference %v, expected about 226", ref)
	}
	for _, world := range []int{1, 8} {
		for _, rank := range []int{0, world - 1} {
			seq, _, err := EpochOrderV2(n, OrderV2Options{Shuffle: true, Seed: 3, Epoch: 1, BatchSize: 256, Rank: rank, World: world})
			if err != nil {
				t.Fatal(err)
			}
			got := medianDistinct(seq, 256)
			t.Logf("v2 rank %d of %d: median %v distinct classes per batch of 256 (uniform %v)", rank, world, got, ref)
			if got < 0.95*ref {
				t.Errorf("v2 rank %d of %d: median %v distinct classes, want ≥ 0.95 × %v", rank, world, got, ref)
			}
		}
	}
	// Version 1 on the same layout, 1783 records per shard: the defect v2 fixes.
	var counts []int64
	for left := n; left > 0; left -= 1783 {
		counts = append(counts, min(left, 1783))
	}
	v1, err := EpochOrder(counts, OrderOptions{Shuffle: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("v1: median %v distinct classes per batch of 256", medianDistinct(v1, 256))
	if got := medianDistinct(v1, 256); got > 0.5*ref {
		t.Errorf("v1 gave a median of %v: the quality check no longer tells v1 from v2", got)
	}
}

// TestOrderV2ClassPositions is a statistical test of the order: over the epoch cut in 10 equal
// parts, the records of each of the 1000 classes of the class-sorted layout fall in each part
// as a uniform permutation's would (chi-square over the 1000 x 10 table, 9000 degrees of
// freedom: mean 9000, standard deviation 134; the test allows 6 deviations), and each
// class's mean position is near the middle.
func TestOrderV2ClassPositions(t *testing.T) {
	if testing.Short() {
		t.Skip("1.28M indices")
	}
	n := int64(imagenetPerClass * imagenetClasses)
	for _, seed := range []uint64{0, 99} {
		seq, _, err := EpochOrderV2(n, OrderV2Options{Shuffle: true, Seed: seed, BatchSize: 256, World: 1})
		if err != nil {
			t.Fatal(err)
		}
		const parts = 10
		table := make([][parts]float64, imagenetClasses)
		sum := make([]float64, imagenetClasses)
		for p, x := range seq {
			c := x / imagenetPerClass
			table[c][int64(p)*parts/n]++
			sum[c] += float64(p)
		}
		exp := float64(imagenetPerClass) / parts
		chi := 0.0
		for c := range table {
			for _, o := range table[c] {
				chi += (o - exp) * (o - exp) / exp
			}
		}
		dof := float64(imagenetClasses * (parts - 1))
		if math.Abs(chi-dof) > 6*math.Sqrt(2*dof) {
			t.Errorf("seed %d: chi-square %.0f for %v degrees of freedom", seed, chi, dof)
		}
		// A class's mean position: uniform sampling without replacement of 1281 of n positions.
		sd := math.Sqrt(float64(n*n)/12/imagenetPerClass) * math.Sqrt(1-float64(imagenetPerClass)/float64(n))
		worst := 0.0
		for c := range sum {
			worst = max(worst, math.Abs(sum[c]/imagenetPerClass-float64(n-1)/2)/sd)
		}
		if worst > 5 { // the largest of 1000 normals is about 3.2
			t.Errorf("seed %d: a class's mean position is %.1f standard deviations off the middle", seed, worst)
		}
		t.Logf("seed %d: chi-square %.0f (dof %v), worst class mean %.2f sd", seed, chi, dof, worst)
	}
}

// TestOrderV2Property: random sizes, batch sizes, worlds, drop-last and stop points. Every rank
// yields the same number of batches; an epoch run to its end, or stopped after k whole global
// batches and resumed from the state on another world size, reads every record exactly once
// (plus the padding of the last batch, fewer than World repeats, without drop-last; less the
// dropped tail, fewer than one global batch, with it).
func TestOrderV2Property(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 24))
	for it := range 400 {
		n := rng.Int64N(600)
		b := 1 + rng.IntN(40)
		w1, w2 := 1+rng.IntN(8), 1+rng.IntN(8)
		drop := rng.IntN(2) == 0
		shuffle := rng.IntN(5) != 0
		seed, epoch := rng.Uint64(), uint64(rng.IntN(4))
		seen := make([]int, n)
		// First run on w1 ranks, stopped after k batches (every rank at the same step).
		plan0, err := NewPlanV2(n, 0, b, 0, w1, drop)
		if err != nil {
			t.Fatal(err)
		}
		k := rng.Int64N(plan0.Batches() + 1)
		pos := int64(0)
		run := func(start int64, w int, stop int64) int64 {
			var nb int64 = -1
			var st int64
			for r := range w {
				seq, p, err := EpochOrderV2(n, OrderV2Options{Shuffle: shuffle, Seed: seed, Epoch: epoch, BatchSize: b, Rank: r, World: w, DropLast: drop, Start: start})
				if err != nil {
					t.Fatal(err)
				}
				if nb >= 0 && p.Batches() != nb {
					t.Fatalf("it %d: rank %d has %d batches, rank 0 %d", it, r, p.Batches(), nb)
				}
				nb = p.Batches()
				if int64(len(seq)) != p.Records() {
					t.Fatalf("it %d: %d records, Records() %d", it, len(seq), p.Records())
				}
				take := min(stop, nb)
				// batches: B each, the last TailPerRank
				cnt := min(int64(len(seq)), take*int64(b))
				for _, x := range seq[:cnt] {
					seen[x]++
				}
				st = p.StateAfter(take)
			}
			return st
		}
		pos = run(0, w1, k)
		run(pos, w2, math.MaxInt64)
		extra, missing := 0, 0
		for _, c := range seen {
			if c == 0 {
				missing++
			} else {
				extra += c - 1
			}
		}
		g1, g2 := int64(b*w1), int64(b*w2)
		if drop {
			if extra != 0 || int64(missing) >= max(g1, g2) {
				t.Fatalf("it %d (n=%d b=%d w=%d→%d k=%d): %d repeated, %d missing", it, n, b, w1, w2, k, extra, missing)
			}
			tail := (n - pos) % g2 // dropped by the resumed run
			if k == plan0.Batches() {
				tail = n % g1 // by the first run, which went to the end
			}
			if int64(missing) != tail {
				t.Fatalf("it %d: %d missing, want the dropped tail %d", it, missing, tail)
			}
		} else if missing != 0 || extra >= max(w1, w2) {
			t.Fatalf("it %d (n=%d b=%d w=%d→%d k=%d): %d repeated, %d missing", it, n, b, w1, w2, k, extra, missing)
		}
	}
}

// TestLoaderV2Evenness is the DDP hang of issue 24 through real Loaders: 65 records, batch 32,
// 2 ranks gave rank 0 one batch and rank 1 two under v1 (rank 1 then waits forever in its
// allreduce); 63 with drop-last gave 0 and 1. Under v2 both ranks yield the same number of
// batches of the same sizes.
func TestLoaderV2Evenness(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{3}, DType: Uint8, Layout: "hwc"}}
	for _, c := range []struct {
		n     int
		drop  bool
		sizes []int // every rank's batch sizes under v2
	}{{65, false, []int{32, 1}}, {63, true, nil}, {63, false, []int{32}}, {64, false, []int{32}}} {
		recs := randomRecords(opts, c.n, 1)
		dir := buildDataset(t, opts, recs, []int{c.n / 2, c.n - c.n/2})
		d, err := OpenDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		var all []int64
		for r := range 2 {
			o := LoaderOptions{BatchSize: 32, Shuffle: true, Seed: 1, Rank: r, World: 2, DropLast: c.drop}
			idx, sizes := runLoader(t, d, recs, o)
			if !slices.Equal(sizes, c.sizes) {
				t.Errorf("n=%d drop=%v rank %d: batches %v, want %v", c.n, c.drop, r, sizes, c.sizes)
			}
			l, err := d.NewLoader(o)
			if err != nil {
				t.Fatal(err)
			}
			if l.Batches() != int64(len(c.sizes)) {
				t.Errorf("n=%d rank %d: Batches() %d, yielded %d", c.n, r, l.Batches(), len(c.sizes))
			}
			l.Close()
			all = append(all, idx...)
			// v1, kept under OrderV1, still splits records, not batches.
			o.Order = OrderV1
			_, v1 := runLoader(t, d, recs, o)
			t.Logf("n=%d drop=%v rank %d: v1 batches %v, v2 %v", c.n, c.drop, r, v1, sizes)
		}
		slices.Sort(all)
		if !c.drop {
			if int64(len(slices.Compact(slices.Clone(all)))) != int64(c.n) {
				t.Errorf("n=%d: %d distinct records of %d", c.n, len(slices.Compact(slices.Clone(all))), c.n)
			}
		}
		d.Close()
	}
}

// TestLoaderV2ElasticResume: 2 ranks stop after 3 batches; the state of either resumes the
// epoch on 1 and on 3 ranks through real Loaders, and every record is read exactly once.
func TestLoaderV2ElasticResume(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{5}, DType: Uint8, Layout: "hwc"}}
	const n = 203
	recs := randomRecords(opts, n, 2)
	dir := buildDataset(t, opts, recs, []int{70, 70, 63})
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, w2 := range []int{1, 3} {
		seen := make([]int, n)
		var states []LoaderState
		for r := range 2 {
			l, err := d.NewLoader(LoaderOptions{BatchSize: 8, Shuffle: true, Seed: 11, Epoch: 2, Rank: r, World: 2, DropLast: true})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if !l.Next() {
					t.Fatal("epoch ended early")
				}
				for _, x := range l.Batch().Indices {
					seen[x]++
				}
			}
			states = append(states, l.State())
			l.Close()
		}
		if states[0] != states[1] || states[0].Position != 3*8*2 {
			t.Fatalf("states %+v", states)
		}
		b, _ := json.Marshal(states[1])
		var st LoaderState
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		var last LoaderState
		for r := range w2 {
			o := LoaderOptions{BatchSize: 8, Shuffle: true, Rank: r, World: w2, DropLast: true}
			if err := o.Restore(st); err != nil {
				t.Fatal(err)
			}
			idx, _ := runLoader(t, d, recs, o)
			for _, x := range idx {
				seen[x]++
			}
			l, _ := d.NewLoader(o)
			for l.Next() {
			}
			last = l.State()
			l.Close()
		}
		if last.Position != n {
			t.Errorf("state after the epoch: %+v, want position %d", last, n)
		}
		missing := 0
		for x, c := range seen {
			if c > 1 {
				t.Fatalf("w2=%d: record %d read %d times", w2, x, c)
			}
			if c == 0 {
				missing++
			}
		}
		// drop-last leaves out the last partial global batch of the resumed run
		if want := (n - 48) % (8 * w2); missing != want {
			t.Errorf("w2=%d: %d records never read, want the dropped tail %d", w2, missing, want)
		}
	}
	o := LoaderOptions{BatchSize: 8}
	if err := o.Restore(LoaderState{Version: 9, Order: OrderV2}); err == nil {
		t.Error("a state of an unknown version was accepted")
	}
	if err := o.Restore(LoaderState{Version: LoaderStateVersion, Order: OrderV1}); err == nil {
		t.Error("a v1 state was accepted")
	}
}

// TestLoaderV2CountsAfterRestore: a Loader restored from a state saved mid-epoch reports, through
// Batches and Len before its first batch, exactly what it then yields on every rank, and a Loader
// of the next epoch the whole epoch's counts. Random N, batch size, ranks before and after, drop
// last, shuffle and stop points, through real Loaders.
func TestLoaderV2CountsAfterRestore(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{2}, DType: Uint8, Layout: "hwc"}}
	rng := rand.New(rand.NewPCG(24, 1))
	for _, n := range []int{1, 7, 64, 131, 250} {
		recs := randomRecords(opts, n, uint64(n))
		d, err := OpenDataset(buildDataset(t, opts, recs, []int{n - n/3, n / 3}[:1+min(1, n/3)]))
		if err != nil {
			t.Fatal(err)
		}
		for it := range 12 {
			b := 1 + rng.IntN(20)
			w1, w2 := 1+rng.IntN(4), 1+rng.IntN(4)
			drop, shuffle := rng.IntN(2) == 0, rng.IntN(4) != 0
			seed, epoch := rng.Uint64(), uint64(rng.IntN(3))
			base := LoaderOptions{BatchSize: b, Shuffle: shuffle, Seed: seed, Epoch: epoch, DropLast: drop, Prefetch: 2}
			// The first run, on w1 ranks, stops after k batches of every rank.
			first := base
			first.World = w1
			l0, err := d.NewLoader(first)
			if err != nil {
				t.Fatal(err)
			}
			k := rng.Int64N(l0.Batches() + 1)
			for range k {
				if !l0.Next() {
					t.Fatalf("n=%d it %d: epoch ended before batch %d of %d", n, it, k, l0.Batches())
				}
			}
			st := l0.State()
			l0.Close()
			counts := func(o LoaderOptions, what string) {
				t.Helper()
				l, err := d.NewLoader(o)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				wantB, wantN := l.Batches(), l.Len()
				var gotB, gotN int64
				for l.Next() {
					gotB++
					bt := l.Batch()
					gotN += int64(bt.Len())
				}
				if err := l.Err(); err != nil {
					t.Fatal(err)
				}
				if gotB != wantB || gotN != wantN {
					t.Errorf("n=%d it %d (b=%d w=%d→%d drop=%v k=%d, %s, rank %d of %d): Batches %d Len %d, yielded %d batches of %d records",
						n, it, b, w1, w2, drop, k, what, o.Rank, o.World, wantB, wantN, gotB, gotN)
				}
			}
			for r := range w2 {
				o := base
				o.Rank, o.World = r, w2
				if err := o.Restore(st); err != nil {
					t.Fatal(err)
				}
				counts(o, "restored")
				next := base
				next.Rank, next.World, next.Epoch = r, w2, epoch+1
				counts(next, "next epoch")
			}
		}
		d.Close()
	}
}
