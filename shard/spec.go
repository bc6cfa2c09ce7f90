package shard

import "fmt"

// DType names an element type of sample data.
type DType string

// The element types a sample may have.
const (
	Uint8   DType = "uint8"
	Float16 DType = "float16"
	Float32 DType = "float32"
)

// Size returns the size in bytes of one element, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case Uint8:
		return 1
	case Float16:
		return 2
	case Float32:
		return 4
	}
	return 0
}

// SampleSpec describes one sample: its shape, element type and axis layout.
// A shape dimension of -1 marks a dimension that varies between records.
type SampleSpec struct {
	Shape  []int  `json:"shape"`
	DType  DType  `json:"dtype"`
	Layout string `json:"layout"`
}

// Fixed reports whether every record of this spec has the same size.
func (s SampleSpec) Fixed() bool {
	for _, d := range s.Shape {
		if d < 0 {
			return false
		}
	}
	return true
}

// Size returns the byte size of one record, or -1 when the spec is not fixed.
func (s SampleSpec) Size() int64 {
	if !s.Fixed() {
		return -1
	}
	n := int64(s.DType.Size())
	for _, d := range s.Shape {
		n *= int64(d)
	}
	return n
}

// Validate reports whether the spec is well formed.
func (s SampleSpec) Validate() error {
	if s.DType.Size() == 0 {
		return fmt.Errorf("shard: unknown dtype %q", s.DType)
	}
	if len(s.Shape) == 0 || len(s.Shape) > 8 {
		return fmt.Errorf("shard: shape %v must have 1 to 8 dimensions", s.Shape)
	}
	n := int64(s.DType.Size())
	for _, d := range s.Shape {
		if d == 0 || d < -1 {
			return fmt.Errorf("shard: invalid dimension %d in shape %v", d, s.Shape)
		}
		if d > 0 {
			n *= int64(d)
			if n > MaxRecordSize {
				return fmt.Errorf("shard: shape %v exceeds the record size limit %d", s.Shape, MaxRecordSize)
			}
		}
	}
	return nil
}

// LabelSpec describes the labels stored with each record.
type LabelSpec struct {
	DType string   `json:"dtype"`
	Aux   []string `json:"aux"`
}
