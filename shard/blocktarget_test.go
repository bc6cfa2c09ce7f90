package shard

import (
	"bytes"
	"testing"
)

// TestWriterBlockTarget: WriterOptions.BlockTarget sets k = max(1, floor(target / record
// size)) (0: BlockTarget), and every record reads back checked; a flipped byte in the last
// block is found.
func TestWriterBlockTarget(t *testing.T) {
	for _, c := range []struct{ target, k int64 }{{0, BlockTarget / 100}, {300, 3}, {299, 2}, {1, 1}, {4096, 40}} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, WriterOptions{Sample: SampleSpec{Shape: []int{100}, DType: Uint8}, BlockTarget: c.target})
		if err != nil {
			t.Fatal(err)
		}
		const n = 50
		for i := range n {
			if err := w.Append(bytes.Repeat([]byte{byte(i)}, 100), 0, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), "t.pks")
		if err != nil {
			t.Fatal(err)
		}
		if r.BlockRecords() != c.k {
			t.Fatalf("target %d: block_records %d, want %d", c.target, r.BlockRecords(), c.k)
		}
		if err := r.VerifyRecords(0, n); err != nil {
			t.Fatalf("target %d: %v", c.target, err)
		}
		rec, err := r.Record(n - 1)
		if err != nil || rec[0] != n-1 {
			t.Fatalf("target %d: record %d: %v %v", c.target, n-1, rec[:1], err)
		}
		bad := bytes.Clone(data)
		bad[bytes.LastIndex(bad, bytes.Repeat([]byte{n - 1}, 100))] ^= 1
		r, err = NewReader(bytes.NewReader(bad), int64(len(bad)), "t.pks")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.VerifyRecords(n-1, n); err == nil {
			t.Fatalf("target %d: a flipped byte in the last record passed the check", c.target)
		}
	}
}
