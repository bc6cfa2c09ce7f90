package shard

import (
	"strings"
	"testing"
)

// TestLabelTallyNoClass: -1 is a record without a class in a dataset with fields (COCO,
// captions) and a fault in one without; other negative labels are faults either way.
func TestLabelTallyNoClass(t *testing.T) {
	plain := &Manifest{Classes: []string{"a", "b"}, ClassCounts: []int64{1, 0}}
	fields := &Manifest{Classes: []string{"a", "b"}, ClassCounts: []int64{1, 0}, Fields: []Field{{Name: "caption", Kind: KindText, Encoding: EncodingRaw}}}
	for _, c := range []struct {
		m      *Manifest
		labels []int64
		fault  string
	}{
		{plain, []int64{0, -1}, "1 labels are outside [0, 2)"},
		{fields, []int64{0, -1, -1}, ""},
		{fields, []int64{0, -2}, "the first at record 1 (label -2)"},
	} {
		tally := NewLabelTally(c.m)
		tally.Add(0, c.labels)
		got := strings.Join(tally.Faults(c.m), "; ")
		if c.fault == "" && got != "" || !strings.Contains(got, c.fault) {
			t.Errorf("labels %v (fields %d): faults %q, want %q", c.labels, len(c.m.Fields), got, c.fault)
		}
	}
}
