package pipeline

// A build-time order (Options.Shuffle): the records are written in a seeded permutation of the
// source's inputs rather than in source order, so that a dataset of a class-ordered folder is
// well mixed even for a consumer that reads its shards in order (a sequential pass over a cold
// disk, WebDataset-style tools, ORDER.md version 1).

import (
	"context"
	"encoding/json"
	"math"
	"strconv"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
)

// ShuffleEpoch is the epoch argument of the build order's permutation: the permutation of
// ORDER.md version 2 step 1 (shard.NewPermutation) for the build's seed and this epoch, one no
// reader's epoch counter reaches, so that a reader's shuffle with the same seed is not the
// build's permutation again.
const ShuffleEpoch = math.MaxUint64

// Shuffle asks Build to write the records in a seeded permutation of the source's inputs.
type Shuffle struct {
	Seed uint64
}

// ShuffleSpec is how a shuffled build records its order in the manifest: the member "shuffle"
// of the source spec, {"seed": S}. A build without Shuffle records nothing, so its manifest
// is the one it always was.
const ShuffleSpec = "shuffle"

// BuildOrder returns the build order of n inputs for seed: position i of the dataset holds the
// input that the source enumerated at order[i]. It is shard.NewPermutation(n, seed,
// ShuffleEpoch).At(i) for each i, the whole specification of --shuffle.
func BuildOrder(n int64, seed uint64) []int64 {
	p := shard.NewPermutation(n, seed, ShuffleEpoch)
	order := make([]int64, n)
	for i := range order {
		order[i] = p.At(int64(i))
	}
	return order
}

// shuffled wraps src so that it enumerates its inputs in the build order of seed. The inputs
// are listed whole first (names, paths, labels, and the bytes an enumerator reads itself, such
// as CIFAR's and IDX's records, are held in memory), then emitted in the permuted order with
// their positions (Item.Seq) renumbered. Everything positional downstream (a part's range, the
// resume journal's count of inputs done, the listing digests) sees the permuted sequence, so
// parts, merge and resume give the bytes of a one-machine build with the same seed.
func shuffled(src source.Source, sh Shuffle) source.Source {
	s := &shuffleSource{src: src, seed: sh.Seed}
	if d, ok := src.(source.DirectSource); ok {
		return &shuffleDirect{shuffleSource: s, d: d}
	}
	return s
}

type shuffleSource struct {
	src  source.Source
	seed uint64
}

// shuffleDirect is a shuffleSource over a DirectSource, which stays one.
type shuffleDirect struct {
	*shuffleSource
	d source.DirectSource
}

var (
	_ source.PlannedSource = (*shuffleSource)(nil)
	_ source.DirectSource  = (*shuffleDirect)(nil)
)

func (d *shuffleDirect) FrameShape() (w, h, c int) { return d.d.FrameShape() }
func (d *shuffleDirect) DecodeTo(ctx context.Context, it source.Item, pix []byte) (source.Clip, error) {
	return d.d.DecodeTo(ctx, it, pix)
}

func (s *shuffleSource) PlanDecode(p source.DecodePlan) {
	if ps, ok := s.src.(source.PlannedSource); ok {
		ps.PlanDecode(p)
	}
}

// Info is the source's, with {"seed": S} under ShuffleSpec in its spec.
func (s *shuffleSource) Info() source.SourceInfo {
	i := s.src.Info()
	spec := make(map[string]any, len(i.Spec)+1)
	for k, v := range i.Spec {
		spec[k] = v
	}
	spec[ShuffleSpec] = map[string]any{"seed": json.Number(strconv.FormatUint(s.seed, 10))}
	i.Spec = spec
	return i
}

func (s *shuffleSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	return s.src.Decode(ctx, it, emit)
}

func (s *shuffleSource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	var items []source.Item
	if err := s.src.Enumerate(ctx, func(it source.Item) error {
		items = append(items, it)
		return nil
	}); err != nil {
		return err
	}
	p := shard.NewPermutation(int64(len(items)), s.seed, ShuffleEpoch)
	for i := range items {
		if err := ctx.Err(); err != nil {
			return err
		}
		it := items[p.At(int64(i))]
		it.Seq = int64(i)
		if err := emit(it); err != nil {
			return err
		}
	}
	return nil
}
