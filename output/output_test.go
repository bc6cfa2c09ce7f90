package output

import (
	"errors"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestCheckSpec: a fixed-shape format refuses a varying shape, naming the format and the flags
// that fix it; a format of varying shapes, or a fixed spec, passes.
func TestCheckSpec(t *testing.T) {
	varying := shard.SampleSpec{Shape: []int{-1, -1, 3}, DType: shard.Uint8, Layout: "hwc"}
	fixed := shard.SampleSpec{Shape: []int{8, 8, 3}, DType: shard.Uint8, Layout: "hwc"}
	arr := Entry{Name: "arr", FixedShape: true}
	err := arr.CheckSpec(varying)
	if !errors.Is(err, ErrShapeNotFixed) || !strings.Contains(err.Error(), "--format arr") || !strings.Contains(err.Error(), "--crop") {
		t.Errorf("fixed-shape format, varying spec: %v", err)
	}
	if err := arr.CheckSpec(fixed); err != nil {
		t.Errorf("fixed-shape format, fixed spec: %v", err)
	}
	if err := (Entry{Name: "any"}).CheckSpec(varying); err != nil {
		t.Errorf("format of varying shapes: %v", err)
	}
}
