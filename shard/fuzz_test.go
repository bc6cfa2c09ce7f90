package shard

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
)

// FuzzReader feeds arbitrary bytes to NewReader and Scan. They must never panic, must report
// bad bytes as *CorruptionError, and must not allocate more than the input's size allows (every
// length is checked against the file size). Whatever opens, reads and scans clean is rewritten
// through a Writer and must read back equal.
var fuzzRuns atomic.Int64

func FuzzReader(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.pks"))
	v2, _ := filepath.Glob(filepath.Join("testdata", "v2", "*.pks"))
	v3, _ := filepath.Glob(filepath.Join("testdata", fixtureDir, "*.pks"))
	paths = append(append(paths, v2...), v3...)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4<<20 {
			return
		}
		size := int64(len(data))
		// Everything the reader and Scan allocate is bounded by the input's size (plus fixed
		// costs), never by lengths read from it. ReadMemStats stops the world, so while fuzzing
		// only one input in 16 is measured; as a plain test, every seed is.
		var before runtime.MemStats
		fuzzing := flag.Lookup("test.fuzz") != nil && flag.Lookup("test.fuzz").Value.String() != ""
		measure := !fuzzing || fuzzRuns.Add(1)%16 == 1
		if measure {
			runtime.ReadMemStats(&before)
			defer func() {
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(64*size+(8<<20)); got > limit {
					t.Errorf("reading %d bytes allocated %d bytes, limit %d", size, got, limit)
				}
			}()
		}
		var faults []*CorruptionError
		if err := Scan(bytes.NewReader(data), size, "fuzz", func(e *CorruptionError) { faults = append(faults, e) }); err != nil {
			t.Fatalf("Scan returned a non-corruption error: %v", err)
		}
		r, err := NewReader(bytes.NewReader(data), size, "fuzz")
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("NewReader error %v is not a *CorruptionError", err)
			}
			if len(faults) == 0 {
				t.Fatalf("NewReader fails (%v) but Scan finds nothing", err)
			}
			return
		}
		recs := make([]testRecord, r.Len())
		clean := len(faults) == 0
		for i := range recs {
			d, err := r.Record(i)
			if err != nil {
				var ce *CorruptionError
				if !errors.As(err, &ce) {
					t.Fatalf("Record(%d) error %v is not a *CorruptionError", i, err)
				}
				if clean {
					t.Fatalf("Record(%d) fails (%v) but Scan finds nothing", i, err)
				}
				return
			}
			recs[i] = testRecord{data: d, label: r.Label(i), aux: r.Aux(i), meta: r.RecordMeta(i)}
			if r.HasShapes() {
				if recs[i].shape, err = r.RecordShape(i); err != nil {
					t.Fatalf("RecordShape(%d) of a shard that opened: %v", i, err)
				}
			}
		}
		if !clean {
			return
		}
		// Text and json contents are not covered by Scan (only by a verifier): a shard whose
		// values the writer would refuse is not rewritten.
		badValue := false
		if err := r.CheckFieldValues(func(*CorruptionError) { badValue = true }); err != nil {
			t.Fatalf("CheckFieldValues of a clean shard: %v", err)
		}
		if badValue {
			return
		}
		if measure {
			runtime.ReadMemStats(&before) // the rewrite's 4 MiB write buffer is not the reader's
		}
		// Rewrite and read back.
		extra := map[string]any{}
		for k, v := range r.Meta() {
			if !slices.Contains(reservedMetaKeys, k) {
				extra[k] = v
			}
		}
		opts := WriterOptions{Sample: r.Spec(), Label: r.LabelSpec(), Meta: extra, ShardIndex: r.ShardIndex(), HasMeta: r.HasRecordMeta(),
			NoShapes: r.Version() == 1 && r.VarSize(), Fields: r.Fields()}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, opts)
		if err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		for i, rec := range recs {
			meta := rec.meta
			if meta == nil && opts.HasMeta {
				meta = []byte{}
			}
			sample, fields, err := r.SplitFields(i, rec.data)
			if err != nil {
				t.Fatalf("SplitFields(%d) of a clean shard: %v", i, err)
			}
			if err := w.AppendFields(sample, rec.shape, rec.label, rec.aux, meta, fields); err != nil {
				t.Fatalf("rewrite: %v", err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		r2, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "rewritten")
		if err != nil {
			t.Fatalf("read rewritten shard: %v", err)
		}
		if r2.Version() != r.Version() || r2.HasShapes() != r.HasShapes() {
			t.Fatalf("rewritten shard is version %d (shapes %v), the input %d (shapes %v)", r2.Version(), r2.HasShapes(), r.Version(), r.HasShapes())
		}
		for i := range recs {
			recs[i].meta = bytes.Clone(recs[i].meta)
			if len(recs[i].meta) == 0 {
				recs[i].meta = nil
			}
		}
		checkRecords(t, r2, recs)
	})
}

// FuzzShapes writes a version-2 shard of images whose shapes come from the fuzz input, reads it
// back (every record at its shape), then damages one byte chosen by the input: the reader and
// Scan must not panic, must report *CorruptionError, and a shard that opens and scans clean
// must still give every record a shape consistent with its size.
func FuzzShapes(f *testing.F) {
	f.Add([]byte{2, 3, 1, 1, 7, 2}, uint16(0), byte(0), true)
	f.Add([]byte{1, 1, 5, 4, 3, 3, 9, 1}, uint16(4100), byte(1), false)
	f.Add([]byte{6, 6}, uint16(8200), byte(0x80), true)
	f.Fuzz(func(t *testing.T, dims []byte, pos uint16, mask byte, chw bool) {
		if len(dims) > 64 {
			dims = dims[:64]
		}
		spec := SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}
		if chw {
			spec = SampleSpec{Shape: []int{3, -1, -1}, DType: Float16, Layout: "chw"}
		}
		var recs []testRecord
		for i := 0; i+1 < len(dims); i += 2 {
			h, w := int(dims[i]%16)+1, int(dims[i+1]%16)+1
			shape := []int{h, w, 3}
			if chw {
				shape = []int{3, h, w}
			}
			d := make([]byte, h*w*3*spec.DType.Size())
			for k := range d {
				d[k] = byte(i + k)
			}
			recs = append(recs, testRecord{data: d, label: int64(i), shape: shape})
		}
		b := buildShard(t, WriterOptions{Sample: spec}, recs)
		r, err := NewReader(bytes.NewReader(b), int64(len(b)), "shapes")
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, r, recs)
		b[int(pos)%len(b)] ^= mask
		var faults []*CorruptionError
		if err := Scan(bytes.NewReader(b), int64(len(b)), "damaged", func(e *CorruptionError) { faults = append(faults, e) }); err != nil {
			t.Fatalf("Scan returned a non-corruption error: %v", err)
		}
		r, err = NewReader(bytes.NewReader(b), int64(len(b)), "damaged")
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) || len(faults) == 0 {
				t.Fatalf("NewReader: %v; Scan found %d faults", err, len(faults))
			}
			return
		}
		if len(faults) > 0 || !r.HasShapes() {
			return
		}
		for i := range r.Len() {
			sh, err := r.RecordShape(i)
			if err != nil {
				t.Fatalf("RecordShape(%d) of a clean shard: %v", i, err)
			}
			n := int64(r.Spec().DType.Size())
			for _, d := range sh {
				n *= int64(d)
			}
			if n != r.RecordLen(i) {
				t.Fatalf("record %d: shape %v, %d bytes", i, sh, r.RecordLen(i))
			}
		}
	})
}
