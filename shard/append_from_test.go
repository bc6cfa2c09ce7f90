package shard

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestAppendFromSameBytes joins the records of two source shards into one shard, record by
// record with AppendShape and in runs of random lengths with AppendFrom (the writer starting
// part-way into a checksum block), and checks the two files are the same bytes.
func TestAppendFromSameBytes(t *testing.T) {
	for _, tc := range roundTripCases {
		t.Run(tc.name, func(t *testing.T) {
			var srcs []*Reader
			var recs [][]testRecord
			for s, n := range []int{tc.n, tc.n/2 + 1} {
				rs := randomRecords(tc.opts, n, uint64(10+s))
				if tc.n == 0 {
					rs = nil
				}
				b := buildShard(t, tc.opts, rs)
				r, err := NewReader(bytes.NewReader(b), int64(len(b)), tc.name)
				if err != nil {
					t.Fatal(err)
				}
				srcs, recs = append(srcs, r), append(recs, rs)
			}
			opts := tc.opts
			opts.ShardIndex = 3
			var all []testRecord
			for _, rs := range recs {
				all = append(all, rs...)
			}
			want := buildShard(t, opts, all)
			rng := rand.New(rand.NewPCG(1, 2))
			for try := 0; try < 5; try++ {
				var buf bytes.Buffer
				w, err := NewWriter(&buf, opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range srcs {
					for i := 0; i < r.Len(); {
						j := min(r.Len(), i+1+rng.IntN(max(1, r.Len()/3)))
						off, n := r.DataRange(i, j)
						data, err := r.ReadRecords(i, j, make([]byte, n))
						if err != nil || int64(len(data)) != n || off < r.DataOffset() {
							t.Fatal(err)
						}
						if err := w.AppendFrom(r, i, j, data); err != nil {
							t.Fatal(err)
						}
						i = j
					}
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf.Bytes(), want) {
					t.Fatalf("try %d: AppendFrom wrote other bytes than AppendShape", try)
				}
			}
		})
	}
}

// TestAppendFromVersion1 appends a version-1 variable-size shard (no shapes) to a version-2
// writer: the records go one by one, their shapes derived, as AppendShape would.
func TestAppendFromVersion1(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{-1, 4, 3}, DType: Uint8, Layout: "hwc"}}
	recs := randomRecords(opts, 20, 3)
	v1 := opts
	v1.NoShapes = true
	b := buildShard(t, v1, recs)
	r, err := NewReader(bytes.NewReader(b), int64(len(b)), "v1")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, n := r.DataRange(0, r.Len())
	data, err := r.ReadRecords(0, r.Len(), make([]byte, n))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AppendFrom(r, 0, r.Len(), data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), buildShard(t, opts, recs)) {
		t.Fatal("AppendFrom of a version-1 shard wrote other bytes than AppendShape")
	}
	if err := w.AppendFrom(r, 0, 1, data[:1]); err == nil {
		t.Fatal("AppendFrom after Close succeeded")
	}
}
