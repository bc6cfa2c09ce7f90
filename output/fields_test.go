package output

import (
	"errors"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestCheckFields: what every format refuses of a schema, and a format without FieldCheck
// refusing any field.
func TestCheckFields(t *testing.T) {
	raw := shard.EncodingRaw
	e := Entry{Name: "x", FieldCheck: func(f shard.Field) error {
		if f.Name == "no" {
			return errors.New("not here")
		}
		return nil
	}}
	ok := shard.Field{Name: "mask", Kind: shard.KindImage, DType: "uint8", Shape: []int{1, -1, -1}, Encoding: raw}
	if err := e.CheckFields([]shard.Field{ok}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]shard.Field{
		"a name must be":                       {Name: "Caption", Kind: shard.KindText, Encoding: raw},
		"the name is reserved":                 {Name: "label", Kind: shard.KindText, Encoding: raw},
		`unknown kind "tensor"`:                {Name: "t", Kind: "tensor", Encoding: raw},
		`dtype "float16"`:                      {Name: "t", Kind: shard.KindNDArray, DType: "float16", Shape: []int{2}, Encoding: raw},
		`an image field is uint8, not "int32"`: {Name: "m", Kind: shard.KindImage, DType: "int32", Shape: []int{-1, -1, 1}, Encoding: raw},
		"an image field's shape":               {Name: "m", Kind: shard.KindImage, DType: "uint8", Shape: []int{-1, 4, 1}, Encoding: raw},
		"the name is used twice":               ok,
		"not here":                             {Name: "no", Kind: shard.KindBytes, Encoding: raw},
	}
	for want, f := range cases {
		err := e.CheckFields([]shard.Field{ok, f})
		if !errors.Is(err, ErrFieldNotHeld) || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), `--format x: field "`+f.Name+`"`) {
			t.Errorf("%+v: %v, want %q", f, err, want)
		}
	}
	if err := (Entry{Name: "y"}).CheckFields([]shard.Field{ok}); !errors.Is(err, ErrFieldNotHeld) {
		t.Errorf("a format without FieldCheck: %v", err)
	}
	if err := (Entry{Name: "y"}).CheckFields(nil); err != nil {
		t.Errorf("no fields: %v", err)
	}
}
