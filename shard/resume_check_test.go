package shard

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRestoreRefusesAnotherDatasetOrShuffle: a loader state carries the record count and the
// shuffle setting of the run that saved it, and a Loader restored from it over a dataset of
// another size, or with the other shuffle setting, is refused: its position would select
// other records than the ones not yet read (some twice, some never). A state without them (an
// earlier reader's) still restores.
func TestRestoreRefusesAnotherDatasetOrShuffle(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{3}, DType: Uint8, Layout: "hwc"}}
	small, err := OpenDataset(buildDataset(t, opts, randomRecords(opts, 97, 1), []int{50, 47}))
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	big, err := OpenDataset(buildDataset(t, opts, randomRecords(opts, 203, 2), []int{100, 103}))
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()

	l, err := small.NewLoader(LoaderOptions{BatchSize: 8, Shuffle: true, Seed: 3, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if !l.Next() {
			t.Fatal(l.Err())
		}
	}
	st := l.State()
	l.Close()
	b, _ := json.Marshal(st)
	var saved LoaderState
	if err := json.Unmarshal(b, &saved); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"records":97`) || !strings.Contains(string(b), `"shuffle":true`) {
		t.Fatalf("state %s does not carry the record count and shuffle setting", b)
	}

	for _, tc := range []struct {
		name string
		d    *Dataset
		opts LoaderOptions
		want string // "" when it must restore
	}{
		{"same", small, LoaderOptions{BatchSize: 5, Shuffle: true, World: 3}, ""},
		{"another dataset", big, LoaderOptions{BatchSize: 8, Shuffle: true}, "97 records"},
		{"unshuffled", small, LoaderOptions{BatchSize: 8}, "shuffle"},
	} {
		o := tc.opts
		if err := o.Restore(saved); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		l, err := tc.d.NewLoader(o)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else {
				l.Close()
			}
			continue
		}
		if err == nil {
			l.Close()
			t.Errorf("%s: a state of another run was restored", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.name, err, tc.want)
		}
	}

	// A state of an earlier reader, without the record count, restores as before.
	var old LoaderState
	if err := json.Unmarshal([]byte(`{"version":1,"order":2,"seed":3,"epoch":1,"position":32}`), &old); err != nil {
		t.Fatal(err)
	}
	o := LoaderOptions{BatchSize: 8}
	if err := o.Restore(old); err != nil {
		t.Fatal(err)
	}
	if l, err := big.NewLoader(o); err != nil {
		t.Errorf("a state without records: %v", err)
	} else {
		l.Close()
	}
}

// TestPositionIsTheStartToResumeFrom: Loader.Position says it is "the Start to resume from once
// the current batch has been processed". Under v2 (the default) Start is the global position,
// and Position counted this rank's records from Start instead: on 2 ranks, or after a resume,
// Start = Position re-read records. Under v2 it is the state's global position.
func TestPositionIsTheStartToResumeFrom(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{3}, DType: Uint8, Layout: "hwc"}}
	const n = 101
	d, err := OpenDataset(buildDataset(t, opts, randomRecords(opts, n, 3), []int{60, 41}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	seen := make([]int, n)
	var start int64
	for _, steps := range []int{3, 2, -1} { // stop after 3 steps, resume, stop after 2, resume to the end
		var pos []int64
		for r := range 2 {
			l, err := d.NewLoader(LoaderOptions{BatchSize: 8, Shuffle: true, Seed: 9, Rank: r, World: 2, DropLast: true, Start: start})
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; steps < 0 || k < steps; k++ {
				if !l.Next() {
					break
				}
				for _, x := range l.Batch().Indices {
					seen[x]++
				}
			}
			if err := l.Err(); err != nil {
				t.Fatal(err)
			}
			if p, s := l.Position(), l.State().Position; p != s {
				t.Errorf("start %d, rank %d: Position %d, the state's position %d", start, r, p, s)
			}
			pos = append(pos, l.Position())
			l.Close()
		}
		if pos[0] != pos[1] {
			t.Fatalf("ranks' positions %v differ", pos)
		}
		start = pos[0]
	}
	for x, c := range seen {
		if c > 1 {
			t.Fatalf("record %d read %d times across the resumes", x, c)
		}
	}
}

// TestRestoredStartIsForItsEpoch: options restored from a state and then reused for the next
// epoch (o.Epoch++ in the training loop, Start left as Restore set it) started that epoch at
// the old position, silently skipping its first records. A Start restored for one epoch used
// with another is refused; Start set again (0 for a whole epoch) reads it.
func TestRestoredStartIsForItsEpoch(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{3}, DType: Uint8, Layout: "hwc"}}
	d, err := OpenDataset(buildDataset(t, opts, randomRecords(opts, 50, 4), []int{50}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	o := LoaderOptions{BatchSize: 4, Shuffle: true}
	if err := o.Restore(LoaderState{Version: LoaderStateVersion, Order: OrderV2, Seed: 1, Epoch: 2, Position: 20, Records: 50, Shuffle: true}); err != nil {
		t.Fatal(err)
	}
	l, err := d.NewLoader(o)
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 30 {
		t.Errorf("restored epoch: %d records, want 30", l.Len())
	}
	l.Close()
	o.Epoch++
	if l, err := d.NewLoader(o); err == nil {
		l.Close()
		t.Fatalf("epoch 3 started at the position restored for epoch 2 (%d records)", l.Len())
	} else if !strings.Contains(err.Error(), "epoch 2") {
		t.Errorf("error %q does not name the state's epoch", err)
	}
	o.Start = 0
	if l, err := d.NewLoader(o); err != nil || l.Len() != 50 {
		t.Fatalf("epoch 3 from its start: %v", err)
	} else {
		l.Close()
	}
}
