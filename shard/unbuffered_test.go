package shard

import (
	"bytes"
	"testing"
)

// countingWriter counts the Write calls it gets, so a test can tell whether a Writer wrote
// through its own buffer.
type countingWriter struct {
	bytes.Buffer
	calls int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.calls++
	return c.Buffer.Write(p)
}

// TestUnbufferedSameBytes writes the same records, fixed-size and variable-size, with and
// without the Writer's own buffer: the files must be identical, and without the buffer each
// record's bytes must reach the underlying writer in one call of their own.
func TestUnbufferedSameBytes(t *testing.T) {
	for _, spec := range []SampleSpec{{Shape: []int{3000}, DType: Uint8}, {Shape: []int{-1, 3}, DType: Uint8}} {
		var out [2]countingWriter
		for i, unbuffered := range []bool{false, true} {
			w, err := NewWriter(&out[i], WriterOptions{Sample: spec, HasMeta: true, Unbuffered: unbuffered})
			if err != nil {
				t.Fatal(err)
			}
			for r := range 50 {
				n := 3000
				if !spec.Fixed() {
					n = 3 * (1 + r*17%101)
				}
				d := bytes.Repeat([]byte{byte(r)}, n)
				if err := w.Append(d, int64(r), nil, []byte(`{"r":1}`)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
			t.Fatalf("%v: unbuffered shard differs from buffered (%d and %d bytes)", spec.Shape, out[0].Len(), out[1].Len())
		}
		if out[1].calls < 50 || out[0].calls >= 50 {
			t.Fatalf("%v: %d writes buffered, %d unbuffered", spec.Shape, out[0].calls, out[1].calls)
		}
	}
}
