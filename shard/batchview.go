package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// Typed views of a batch's data. The views share Data's memory (no copy): they are valid until
// the next call to Loader.Next, like Data itself. Records are stored little-endian; on a
// big-endian machine the views of multi-byte types are refused (decode Data with
// encoding/binary instead).

// DType returns the element type of the batch's records (the dataset's sample dtype).
func (b *Batch) DType() DType { return b.dtype }

// BatchShape returns the shape of the whole batch as one array, [B, sample shape...], for
// fixed-size records; for variable-size records (whose shapes differ: see Shape) and records
// with fields it returns nil.
func (b *Batch) BatchShape() []int {
	if b.Dims != nil || b.v > 0 || b.fields != nil {
		return nil
	}
	return append([]int{b.Len()}, b.sample...)
}

// Uint8 returns Data as uint8 elements; it fails unless the dtype is uint8, and for records
// with fields (whose Data is not an array: see Sample).
func (b *Batch) Uint8() ([]uint8, error) {
	if b.dtype != Uint8 {
		return nil, b.wrongType(Uint8)
	}
	if b.fields != nil {
		return nil, errFieldsView
	}
	return b.Data, nil
}

// Float16Bits returns Data as float16 elements, each as its IEEE 754 half-precision bits in a
// uint16 (Go has no float16 type); it fails unless the dtype is float16.
func (b *Batch) Float16Bits() ([]uint16, error) {
	if b.dtype != Float16 {
		return nil, b.wrongType(Float16)
	}
	if b.fields != nil {
		return nil, errFieldsView
	}
	return view[uint16](b.Data)
}

// Float32 returns Data as float32 elements; it fails unless the dtype is float32.
func (b *Batch) Float32() ([]float32, error) {
	if b.dtype != Float32 {
		return nil, b.wrongType(Float32)
	}
	if b.fields != nil {
		return nil, errFieldsView
	}
	return view[float32](b.Data)
}

// errFieldsView refuses a typed view of the Data of records with fields.
var errFieldsView = errors.New("shard: the batch's records carry fields after their samples, so Data is not one array: read each record's sample with Sample")

// Fields returns the dataset's schema (nil for a dataset without fields). The caller must not
// modify it.
func (b *Batch) Fields() []Field { return b.fields }

// Sample returns the sample value of record k of the batch: its bytes without its field values
// (the whole record in a dataset without fields). It is a view into Data.
func (b *Batch) Sample(k int) []byte {
	rec := b.record(k)
	nf := len(b.fields)
	end := len(rec)
	for _, n := range b.fieldLens[k*nf : (k+1)*nf] {
		end -= int(n)
	}
	return rec[:end:end]
}

// record returns the bytes of record k of the batch.
func (b *Batch) record(k int) []byte {
	if b.Offsets == nil {
		n := len(b.Data) / b.Len()
		return b.Data[k*n : (k+1)*n : (k+1)*n]
	}
	return b.Data[b.Offsets[k]:b.Offsets[k+1]:b.Offsets[k+1]]
}

// Field returns the value of field name of record k of the batch, a view into Data; decode it
// with FieldText, FieldInt64s, FieldFloat32s and the like. It fails for a name the schema does
// not have.
func (b *Batch) Field(k int, name string) ([]byte, error) {
	f := slices.IndexFunc(b.fields, func(f Field) bool { return f.Name == name })
	if f < 0 {
		return nil, fmt.Errorf("shard: the batch has no field %q (fields %s)", name, FieldsString(b.fields))
	}
	return b.fieldAt(k, f), nil
}

// FieldValues returns the values of field name for every record of the batch, in order
// (views into Data).
func (b *Batch) FieldValues(name string) ([][]byte, error) {
	f := slices.IndexFunc(b.fields, func(f Field) bool { return f.Name == name })
	if f < 0 {
		return nil, fmt.Errorf("shard: the batch has no field %q (fields %s)", name, FieldsString(b.fields))
	}
	out := make([][]byte, b.Len())
	for k := range out {
		out[k] = b.fieldAt(k, f)
	}
	return out, nil
}

// fieldAt returns the value of field f of record k.
func (b *Batch) fieldAt(k, f int) []byte {
	rec := b.record(k)
	nf := len(b.fields)
	lens := b.fieldLens[k*nf : (k+1)*nf]
	end := len(rec)
	for _, n := range lens[f+1:] {
		end -= int(n)
	}
	start := end - int(lens[f])
	return rec[start:end:end]
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
