package shard

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"testing"
)

// orderVector is one golden ORDER.md sequence. The same table is in testdata/order_vectors.json
// for the Python reader's tests. The values were computed by an independent Python
// transcription of ORDER.md.
type orderVector struct {
	NPerShard []int64 `json:"n_per_shard"`
	Shuffle   bool    `json:"shuffle"`
	Seed      uint64  `json:"seed"`
	Epoch     uint64  `json:"epoch"`
	Rank      int     `json:"rank"`
	World     int     `json:"world"`
	Buffer    int     `json:"buffer"`
	Expected  []int64 `json:"expected"`
}

var orderVectors = []orderVector{
	{[]int64{4, 3, 3}, true, 42, 0, 0, 2, 4, []int64{2, 0, 1, 3, 7}},
	{[]int64{4, 3, 3}, true, 42, 1, 0, 2, 4, []int64{9, 7, 4, 8, 5}},
	{[]int64{4, 3, 3}, true, 42, 0, 1, 2, 4, []int64{5, 6, 9, 8, 4}},
	{[]int64{4, 3, 3}, true, 42, 1, 1, 2, 4, []int64{1, 3, 2, 0, 6}},
	{[]int64{4, 3, 3}, false, 42, 0, 0, 3, 4096, []int64{0, 1, 2}},
	{[]int64{4, 3, 3}, false, 42, 0, 1, 3, 4096, []int64{3, 4, 5}},
	{[]int64{4, 3, 3}, false, 42, 0, 2, 3, 4096, []int64{6, 7, 8, 9}},
	{[]int64{4, 3, 3}, true, 42, 0, 0, 1, 100, []int64{1, 9, 0, 5, 7, 4, 6, 8, 3, 2}},
	{[]int64{4, 3, 3}, true, 7, 3, 0, 1, 1, []int64{7, 8, 9, 4, 5, 6, 0, 1, 2, 3}},
	{[]int64{5, 0, 7, 2, 6}, true, 18446744073709551615, 2, 0, 3, 3, []int64{14, 17, 15, 18, 19, 16}},
	{[]int64{5, 0, 7, 2, 6}, true, 18446744073709551615, 2, 1, 3, 3, []int64{5, 7, 9, 6, 8, 10, 11}},
	{[]int64{5, 0, 7, 2, 6}, true, 18446744073709551615, 2, 2, 3, 3, []int64{0, 3, 4, 2, 12, 13, 1}},
}

func (v orderVector) options() OrderOptions {
	return OrderOptions{Shuffle: v.Shuffle, Seed: v.Seed, Epoch: v.Epoch, Rank: v.Rank, World: v.World, Buffer: v.Buffer}
}

func TestOrderVectors(t *testing.T) {
	for i, v := range orderVectors {
		got, err := EpochOrder(v.NPerShard, v.options())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, v.Expected) {
			t.Errorf("vector %d: got %v, want %v", i, got, v.Expected)
		}
	}
	data, err := os.ReadFile("testdata/order_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file []orderVector
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(file, orderVectors) {
		t.Errorf("testdata/order_vectors.json differs from the table in order_test.go")
	}
}

func TestSplitMix64(t *testing.T) {
	// Reference values of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
	g := SplitMix64{}
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	for i, w := range want {
		if got := g.Next(); got != w {
			t.Errorf("value %d = %#x, want %#x", i, got, w)
		}
	}
}

// TestOrderCovers checks that the ranks of a world together read every record exactly once,
// with and without shuffle, and that a seed gives one order.
func TestOrderCovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for trial := 0; trial < 50; trial++ {
		counts := make([]int64, 1+rng.IntN(6))
		var n int64
		for i := range counts {
			counts[i] = int64(rng.IntN(40))
			n += counts[i]
		}
		world := 1 + rng.IntN(5)
		o := OrderOptions{Shuffle: trial%2 == 0, Seed: rng.Uint64(), Epoch: uint64(rng.IntN(3)), World: world, Buffer: 1 + rng.IntN(20)}
		seen := make([]int, n)
		for rank := 0; rank < world; rank++ {
			o.Rank = rank
			got, err := EpochOrder(counts, o)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := EpochOrder(counts, o)
			if !slices.Equal(got, again) {
				t.Fatalf("order is not deterministic")
			}
			lo, hi := RankRange(n, rank, world)
			if int64(len(got)) != hi-lo {
				t.Fatalf("rank %d has %d records, want %d", rank, len(got), hi-lo)
			}
			for _, x := range got {
				seen[x]++
			}
		}
		for x, c := range seen {
			if c != 1 {
				t.Fatalf("trial %d: record %d read %d times", trial, x, c)
			}
		}
	}
	if _, err := EpochOrder([]int64{3}, OrderOptions{Rank: 2, World: 2}); err == nil {
		t.Error("rank ≥ world accepted")
	}
}

// TestOrderEpochsDiffer checks that the shuffle changes with the epoch and the seed.
func TestOrderEpochsDiffer(t *testing.T) {
	counts := []int64{100, 100, 100}
	a, _ := EpochOrder(counts, OrderOptions{Shuffle: true, Seed: 1, Buffer: 50})
	b, _ := EpochOrder(counts, OrderOptions{Shuffle: true, Seed: 1, Epoch: 1, Buffer: 50})
	c, _ := EpochOrder(counts, OrderOptions{Shuffle: true, Seed: 2, Buffer: 50})
	if slices.Equal(a, b) || slices.Equal(a, c) {
		t.Error("epoch or seed does not change the order")
	}
}

func TestWorkerRank(t *testing.T) {
	seen := map[int]bool{}
	for rank := range 3 {
		for worker := range 4 {
			r, w := WorkerRank(rank, 3, worker, 4)
			if w != 12 || r < 0 || r >= w || seen[r] {
				t.Fatalf("WorkerRank(%d, 3, %d, 4) = %d, %d", rank, worker, r, w)
			}
			seen[r] = true
		}
	}
}
