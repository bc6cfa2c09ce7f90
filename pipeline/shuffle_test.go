package pipeline

import (
	"slices"
	"testing"
)

// TestBuildOrder pins the build order of --shuffle (docs/decisions.md): ORDER.md v2's
// permutation with the build's seed and epoch 2^64-1. python/tests/test_build_order.py pins
// the same values from the Python reader's Permutation, so the two stay one specification.
// Every order is a bijection of [0, N).
func TestBuildOrder(t *testing.T) {
	for _, c := range []struct {
		n    int64
		seed uint64
		want []int64
	}{
		{20, 5, []int64{0, 14, 5, 11, 1, 18, 4, 19, 7, 15, 10, 17, 8, 9, 16, 3, 2, 6, 13, 12}},
		{7, 1<<64 - 1, []int64{3, 1, 2, 6, 4, 0, 5}},
	} {
		if got := BuildOrder(c.n, c.seed); !slices.Equal(got, c.want) {
			t.Errorf("BuildOrder(%d, %d) = %v, want %v", c.n, c.seed, got, c.want)
		}
	}
	for _, n := range []int64{0, 1, 2, 3, 5, 1000, 4097} {
		seen := make([]bool, n)
		for _, k := range BuildOrder(n, 42) {
			if k < 0 || k >= n || seen[k] {
				t.Fatalf("BuildOrder(%d, 42) is not a permutation: %d", n, k)
			}
			seen[k] = true
		}
	}
}
