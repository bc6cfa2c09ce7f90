package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestInspectFieldValues: inspect shows text cut to a line, JSON compacted, arrays with their
// shape (a variable first dimension from the value's length, an image's height and width from
// the record's sample) and first values, bytes with their length and first bytes.
func TestInspectFieldValues(t *testing.T) {
	f32 := func(v ...float32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return b
	}
	hwc := shard.SampleSpec{Shape: []int{3, 2, 3}, DType: "uint8", Layout: "hwc"}
	long := strings.Repeat("ü", fieldTextMax+5)
	cases := []struct {
		f    shard.Field
		b    []byte
		want string
	}{
		{shard.Field{Kind: shard.KindText}, []byte("a cat"), `"a cat"`},
		{shard.Field{Kind: shard.KindText}, []byte(long), `"` + long[:2*fieldTextMax] + `"…`},
		{shard.Field{Kind: shard.KindJSON}, []byte(`{"a": [1, 2],  "b": "<x>"}`), `{"a":[1,2],"b":"<x>"}`},
		{shard.Field{Kind: shard.KindBytes}, []byte{0xde, 0xad}, "2 bytes dead"},
		{shard.Field{Kind: shard.KindBytes}, nil, "0 bytes"},
		{shard.Field{Kind: shard.KindNDArray, DType: "float32", Shape: []int{-1, 4}}, f32(1, 2, 3.5, 4, 5, 6, 7, 8, 9, 10, 11, 12), "[3 4] [1 2 3.5 4 5 6 7 8]…"},
		{shard.Field{Kind: shard.KindNDArray, DType: "float32", Shape: []int{-1, 4}}, nil, "[0 4] []"},
		{shard.Field{Kind: shard.KindNDArray, DType: "int64", Shape: []int{-1}}, binary.LittleEndian.AppendUint64(nil, math.MaxUint64), "[1] [-1]"},
		{shard.Field{Kind: shard.KindImage, DType: "uint8", Shape: []int{-1, -1, 1}}, []byte{1, 2, 3, 4, 5, 6}, "[3 2 1] [1 2 3 4 5 6]"},
		{shard.Field{Kind: shard.KindImage, DType: "uint8", Shape: []int{1, -1, -1}}, []byte{1, 2, 3, 4, 5, 6}, "[1 3 2] [1 2 3 4 5 6]"},
	}
	for _, c := range cases {
		v := valueOf(c.f, c.b, hwc)
		if got := v.String(); got != c.want {
			t.Errorf("%s %v: %s, want %s", c.f.Kind, c.b, got, c.want)
		}
		if _, err := json.Marshal(v); err != nil {
			t.Errorf("%s: %v", c.f.Kind, err)
		}
	}
	nan := valueOf(shard.Field{Kind: shard.KindNDArray, DType: "float64", Shape: []int{-1}}, binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN())), hwc)
	if b, err := json.Marshal(nan); err != nil || !strings.Contains(string(b), `"NaN"`) {
		t.Errorf("NaN: %s, %v", b, err)
	}
	if got := describeField(shard.Field{Kind: shard.KindNDArray, DType: "int64", Shape: []int{-1}, RowsOf: "boxes"}); got != "ndarray int64 [-1], rows of boxes" {
		t.Errorf("describeField: %s", got)
	}
	rf := recordFields{{"zeta", valueOf(shard.Field{Kind: shard.KindText}, []byte("z"), hwc)}, {"alpha", valueOf(shard.Field{Kind: shard.KindJSON}, []byte("[1]"), hwc)}}
	if b, err := json.Marshal(rf); err != nil || string(b) != `{"zeta":{"text":"z","bytes":1},"alpha":{"json":[1],"bytes":3}}` {
		t.Errorf("record fields as JSON: %s, %v", b, err)
	}
}
