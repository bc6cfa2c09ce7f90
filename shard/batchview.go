package shard

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// Typed views of a batch's data. The views share Data's memory (no copy): they are valid until
// the next call to Loader.Next, like Data itself. Records are stored little-endian; on a
// big-endian machine the views of multi-byte types are refused (decode Data with
// encoding/binary instead).

// DType returns the element type of the batch's records (the dataset's sample dtype).
func (b *Batch) DType() DType { return b.dtype }

// BatchShape returns the shape of the whole batch as one array, [B, sample shape...], for
// fixed-size records; for variable-size records (whose shapes differ: see Shape) it returns nil.
func (b *Batch) BatchShape() []int {
	if b.Dims != nil || b.v > 0 {
		return nil
	}
	return append([]int{b.Len()}, b.sample...)
}

// Uint8 returns Data as uint8 elements; it fails unless the dtype is uint8.
func (b *Batch) Uint8() ([]uint8, error) {
	if b.dtype != Uint8 {
		return nil, b.wrongType(Uint8)
	}
	return b.Data, nil
}

// Float16Bits returns Data as float16 elements, each as its IEEE 754 half-precision bits in a
// uint16 (Go has no float16 type); it fails unless the dtype is float16.
func (b *Batch) Float16Bits() ([]uint16, error) {
	if b.dtype != Float16 {
		return nil, b.wrongType(Float16)
	}
	return view[uint16](b.Data)
}

// Float32 returns Data as float32 elements; it fails unless the dtype is float32.
func (b *Batch) Float32() ([]float32, error) {
	if b.dtype != Float32 {
		return nil, b.wrongType(Float32)
	}
	return view[float32](b.Data)
}

func (b *Batch) wrongType(want DType) error {
	return fmt.Errorf("shard: the batch holds %s elements, not %s", b.dtype, want)
}

// littleEndian reports whether this machine stores numbers as the shards do.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// view reinterprets data as elements of type T, refusing a length or an address that is not a
// multiple of T's size and a big-endian machine.
func view[T uint16 | float32](data []byte) ([]T, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if !littleEndian {
		return nil, fmt.Errorf("shard: typed views need a little-endian machine; decode Data with encoding/binary")
	}
	if len(data) == 0 {
		return []T{}, nil
	}
	if len(data)%size != 0 || uintptr(unsafe.Pointer(&data[0]))%uintptr(size) != 0 {
		return nil, fmt.Errorf("shard: %d bytes at a misaligned address cannot be viewed as %d-byte elements", len(data), size)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&data[0])), len(data)/size), nil
}
