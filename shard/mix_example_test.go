package shard_test

import (
	"fmt"

	"github.com/packer-dev/packer/shard"
)

// A mixture of a 1000-record and a 300-record dataset at 0.7/0.3, read by 2 ranks in batches
// of 10: each batch holds exactly 7 and 3 records of them (two sources deviate from their
// share by less than one record in any window), and a state saved after a step resumes on
// another number of ranks.
func ExampleMixture() {
	m, err := shard.NewMixture([]int64{1000, 300}, shard.MixOptions{Weights: []float64{0.7, 0.3}, Seed: 1, Replacement: true, Shuffle: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	refs, plan, err := m.Order(shard.MixOrderOptions{BatchSize: 10, Rank: 0, World: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	n := [2]int{}
	for _, r := range refs[:10] {
		n[r.Source]++
	}
	fmt.Println("epoch", m.EpochSize(), "batches per rank", plan.Batches(), "first batch", n)
	st, _ := m.State(0, plan.StateAfter(3)) // after 3 steps of 2 ranks
	epoch, start, err := m.Restore(st)
	fmt.Println("resume at", epoch, start, err, "cursors", st.Sources[0].Drawn, st.Sources[1].Drawn)
	// Output:
	// epoch 1300 batches per rank 65 first batch [7 3]
	// resume at 0 60 <nil> cursors 42 18
}
