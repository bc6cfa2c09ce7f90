package shard

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// testRecord is one record to write in tests.
type testRecord struct {
	data  []byte
	label int64
	aux   []int64
	meta  []byte
	shape []int // the record's shape; nil lets the Writer derive it
}

// buildShard writes recs with opts into memory and returns the file bytes.
func buildShard(t testing.TB, opts WriterOptions, recs []testRecord) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.AppendShape(r.data, r.shape, r.label, r.aux, r.meta); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != w.Size() {
		t.Fatalf("wrote %d bytes, Size says %d", buf.Len(), w.Size())
	}
	return buf.Bytes()
}

// randomRecords makes n records for opts with a fixed seed.
func randomRecords(opts WriterOptions, n int, seed uint64) []testRecord {
	rng := rand.New(rand.NewPCG(seed, seed))
	recs := make([]testRecord, n)
	size := opts.Sample.Size()
	for i := range recs {
		sz := size
		var shape []int
		if sz < 0 {
			// Each -1 dimension gets its own value, 1 to 12.
			shape = slices.Clone(opts.Sample.Shape)
			sz = int64(opts.Sample.DType.Size())
			for k, v := range shape {
				if v < 0 {
					shape[k] = 1 + rng.IntN(12)
				}
				sz *= int64(shape[k])
			}
		}
		d := make([]byte, sz)
		for j := range d {
			d[j] = byte(rng.Uint32())
		}
		recs[i] = testRecord{data: d, label: int64(rng.IntN(100)) - 3, shape: shape}
		for range opts.Label.Aux {
			recs[i].aux = append(recs[i].aux, rng.Int64())
		}
		if opts.HasMeta && i%3 != 0 {
			recs[i].meta = []byte(fmt.Sprintf(`{"name":"img%d.png"}`, i))
		}
	}
	return recs
}

// checkRecords reads every record back from r and compares it with recs.
func checkRecords(t testing.TB, r *Reader, recs []testRecord) {
	t.Helper()
	if r.Len() != len(recs) {
		t.Fatalf("Len = %d, want %d", r.Len(), len(recs))
	}
	for i, want := range recs {
		got, err := r.Record(i)
		if err != nil {
			t.Fatalf("Record(%d): %v", i, err)
		}
		if !bytes.Equal(got, want.data) {
			t.Fatalf("Record(%d) differs", i)
		}
		if r.Label(i) != want.label {
			t.Fatalf("Label(%d) = %d, want %d", i, r.Label(i), want.label)
		}
		aux := r.Aux(i)
		if len(aux) != len(want.aux) {
			t.Fatalf("Aux(%d) = %v, want %v", i, aux, want.aux)
		}
		for c := range aux {
			if aux[c] != want.aux[c] {
				t.Fatalf("Aux(%d) = %v, want %v", i, aux, want.aux)
			}
		}
		if m := r.RecordMeta(i); !bytes.Equal(m, want.meta) {
			t.Fatalf("RecordMeta(%d) = %q, want %q", i, m, want.meta)
		}
		if want.shape != nil {
			if got, err := r.RecordShape(i); err != nil || !slices.Equal(got, want.shape) {
				t.Fatalf("RecordShape(%d) = %v, %v, want %v", i, got, err, want.shape)
			}
		}
	}
}

var roundTripCases = []struct {
	name string
	opts WriterOptions
	n    int
}{
	{"fixed", WriterOptions{Sample: SampleSpec{Shape: []int{32, 32, 3}, DType: Uint8, Layout: "hwc"}}, 1000},
	{"fixed-big-records", WriterOptions{Sample: SampleSpec{Shape: []int{300, 1000}, DType: Float32, Layout: "hwc"}}, 5},
	{"fixed-aux", WriterOptions{Sample: SampleSpec{Shape: []int{3, 5}, DType: Float16, Layout: "chw"}, Label: LabelSpec{DType: "int64", Aux: []string{"coarse_label", "x"}}}, 300},
	{"var", WriterOptions{Sample: SampleSpec{Shape: []int{-1, 8, 8, 3}, DType: Uint8, Layout: "thwc"}}, 60},
	{"var-meta-aux", WriterOptions{Sample: SampleSpec{Shape: []int{-1}, DType: Uint8, Layout: "hwc"}, Label: LabelSpec{Aux: []string{"a"}}, HasMeta: true, ShardIndex: 7,
		Meta: map[string]any{"dataset": map[string]any{"source": "x", "b": []int{1, 2}}}}, 40},
	{"var-hw", WriterOptions{Sample: SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}, HasMeta: true}, 50},
	{"var-chw-float16", WriterOptions{Sample: SampleSpec{Shape: []int{3, -1, -1}, DType: Float16, Layout: "chw"}, Label: LabelSpec{Aux: []string{"a"}}}, 30},
	{"var-clip-hw", WriterOptions{Sample: SampleSpec{Shape: []int{4, -1, -1, 3}, DType: Uint8, Layout: "thwc"}}, 20},
	{"var-empty", WriterOptions{Sample: SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}}, 0},
	{"empty", WriterOptions{Sample: SampleSpec{Shape: []int{4}, DType: Uint8, Layout: "hwc"}}, 0},
	{"fixed-meta", WriterOptions{Sample: SampleSpec{Shape: []int{4}, DType: Uint8, Layout: "hwc"}, HasMeta: true}, 10},
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range roundTripCases {
		t.Run(tc.name, func(t *testing.T) {
			recs := randomRecords(tc.opts, tc.n, 1)
			data := buildShard(t, tc.opts, recs)
			if len(data)%Align != 0 {
				t.Fatalf("file size %d is not aligned", len(data))
			}
			r, err := NewReader(bytes.NewReader(data), int64(len(data)), tc.name)
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, r, recs)
			if r.ShardIndex() != tc.opts.ShardIndex {
				t.Errorf("ShardIndex = %d", r.ShardIndex())
			}
			if tc.opts.Meta != nil && r.Meta()["dataset"] == nil {
				t.Errorf("meta lost: %s", r.MetaJSON())
			}
			// Whole-range read equals the concatenation.
			off, n := r.DataRange(0, r.Len())
			if off != r.DataOffset() || n != r.DataSize() {
				t.Errorf("DataRange = %d, %d", off, n)
			}
			all, err := r.ReadRecords(0, r.Len(), make([]byte, n))
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			for _, rec := range recs {
				want = append(want, rec.data...)
			}
			if !bytes.Equal(all, want) {
				t.Errorf("ReadRecords differs")
			}
			// The same input gives the same bytes.
			if again := buildShard(t, tc.opts, recs); !bytes.Equal(again, data) {
				t.Errorf("writer is not deterministic")
			}
			var faults []*CorruptionError
			if err := Scan(bytes.NewReader(data), int64(len(data)), tc.name, func(e *CorruptionError) { faults = append(faults, e) }); err != nil || len(faults) > 0 {
				t.Errorf("Scan: %v %v", err, faults)
			}
		})
	}
}

func TestWriterErrors(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{4}, DType: Uint8, Layout: "hwc"}, Label: LabelSpec{Aux: []string{"a"}}}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]byte{1, 2, 3}, 0, []int64{1}, nil); err == nil {
		t.Error("short record accepted")
	}
	if err := w.Append([]byte{1, 2, 3, 4}, 0, nil, nil); err == nil {
		t.Error("missing aux accepted")
	}
	if err := w.Append([]byte{1, 2, 3, 4}, 0, []int64{1}, []byte("x")); err == nil {
		t.Error("meta without HasMeta accepted")
	}
	if err := w.Append([]byte{1, 2, 3, 4}, 0, []int64{1}, nil); err != nil {
		t.Errorf("valid append after argument errors: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]byte{1, 2, 3, 4}, 0, []int64{1}, nil); err == nil {
		t.Error("append after close accepted")
	}
	bad := []WriterOptions{
		{Sample: SampleSpec{Shape: []int{4}, DType: "int8"}},
		{Sample: SampleSpec{Shape: []int{4}, DType: Uint8}, Label: LabelSpec{DType: "int32"}},
		{Sample: SampleSpec{Shape: []int{4}, DType: Uint8}, Meta: map[string]any{"sample": 1}},
		{Sample: SampleSpec{Shape: []int{4}, DType: Uint8}, Label: LabelSpec{Aux: make([]string, MaxAux+1)}},
	}
	for i, o := range bad {
		if _, err := NewWriter(&buf, o); err == nil {
			t.Errorf("bad options %d accepted", i)
		}
	}
	// The first write error sticks.
	fw := &failWriter{after: 5000}
	w, err = NewWriter(fw, WriterOptions{Sample: SampleSpec{Shape: []int{1 << 20}, DType: Uint8}})
	if err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, 1<<20)
	var first error
	for i := 0; i < 10 && first == nil; i++ {
		first = w.Append(rec, 0, nil, nil)
	}
	if first == nil {
		t.Fatal("no write error")
	}
	if err := w.Close(); err != first {
		t.Errorf("Close = %v, want the first error %v", err, first)
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.after {
		return 0, fmt.Errorf("disk full")
	}
	f.after -= len(p)
	return len(p), nil
}
