package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// fieldSchema is the schema of fieldSource: one field of every kind a source fills, boxes with
// a field that follows their rows, and a mask.
var fieldSchema = []shard.Field{
	{Name: "caption", Kind: shard.KindText, Encoding: shard.EncodingRaw},
	{Name: "info", Kind: shard.KindJSON, Encoding: shard.EncodingRaw},
	{Name: "multilabel", Kind: shard.KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: shard.EncodingRaw},
	{Name: "category", Kind: shard.KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: shard.EncodingRaw, RowsOf: "boxes"},
	{Name: "boxes", Kind: shard.KindNDArray, DType: "float32", Shape: []int{-1, 4}, Encoding: shard.EncodingRaw, Geometry: shard.GeometryBoxes},
	{Name: "mask", Kind: shard.KindImage, DType: "uint8", Shape: []int{-1, -1, 1}, Encoding: shard.EncodingRaw, Geometry: shard.GeometryMask},
	{Name: "raw", Kind: shard.KindBytes, Encoding: shard.EncodingRaw},
}

// fieldSource is an in-memory source of n small RGB images of varying sizes, each with a value
// of every field of fieldSchema: a caption, a JSON object, a variable number of int64 labels,
// 0 to 3 boxes (some reaching out of the image, so that a crop drops them) with their
// categories, a one-channel mask at the image's size and a few raw bytes. Items in badMask
// have a mask of another size than their image; items in bad fail to decode. The source
// reuses its value buffers after emit returns, as a Source may.
type fieldSource struct {
	n       int
	bad     map[int]bool
	badMask map[int]bool
}

func (s *fieldSource) Info() source.SourceInfo {
	return source.SourceInfo{Kind: "fieldgen", Classes: []string{"a", "b"}, Spec: map[string]any{"kind": "fieldgen"},
		Count: int64(s.n), Frame: source.FrameShape{C: 3}, Fields: fieldSchema}
}

func (s *fieldSource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	for i := 0; i < s.n; i++ {
		if err := emit(source.Item{Seq: int64(i), Name: fmt.Sprintf("img-%03d", i), Label: int64(i % 2)}); err != nil {
			return err
		}
	}
	return nil
}

// fieldValues are item i's frame size and field values, before the transform.
func fieldValues(i int) (w, h int, vals []source.FieldValue) {
	w, h = 6+i%4, 5+i%3
	i64 := func(v ...int64) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		return b
	}
	var labels []int64
	for k := 0; k < i%4; k++ {
		labels = append(labels, int64(10*i+k))
	}
	var boxes []byte
	var cats []int64
	for k := 0; k < i%4; k++ {
		x0 := float32((i + 2*k) % (w - 3)) // inside the image: kept as it is without a resize
		y0 := float32(k)
		for _, v := range []float32{x0, y0, x0 + 2.5, y0 + 1.5} {
			boxes = binary.LittleEndian.AppendUint32(boxes, math.Float32bits(v))
		}
		cats = append(cats, int64(100+k))
	}
	mask := transforms.Image{W: w, H: h, C: 1, Pix: make([]byte, w*h)}
	for p := range mask.Pix {
		mask.Pix[p] = byte((p + i) % 5)
	}
	info, _ := json.Marshal(map[string]any{"i": i, "tags": []string{"x", strings.Repeat("y", i%3)}})
	vals = []source.FieldValue{
		{Bytes: []byte(fmt.Sprintf("image %d, ünïcode", i))},
		{Bytes: info},
		{Bytes: i64(labels...)},
		{Bytes: i64(cats...)},
		{Bytes: boxes},
		{Image: &mask},
		{Bytes: bytes.Repeat([]byte{byte(i)}, i%3)},
	}
	return w, h, vals
}

func (s *fieldSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	i := int(it.Seq)
	if s.bad[i] {
		return &source.InputError{Input: it.Name, Err: errors.New("corrupt input")}
	}
	w, h, vals := fieldValues(i)
	if s.badMask[i] {
		vals[5].Image.W--
		vals[5].Image.Pix = vals[5].Image.Pix[:vals[5].Image.W*h]
	}
	pix := make([]byte, w*h*3)
	for p := range pix {
		pix[p] = byte(i*3 + p)
	}
	err := emit(source.Clip{Frames: []transforms.Image{{W: w, H: h, C: 3, Pix: pix}}, Label: it.Label, Fields: vals})
	// Overwrite what the clip held, as a source reusing its buffers does: the record must not
	// change.
	for _, v := range vals {
		clear(v.Bytes)
		if v.Image != nil {
			clear(v.Image.Pix)
		}
	}
	return err
}

// TestMapFieldsIdentity: without a resize or crop every value is carried as the source gave
// it, copied (the source may reuse its buffers), boxes (inside their image) and masks
// included, with no box dropped; a mask of another size than its image is an error naming
// the field.
func TestMapFieldsIdentity(t *testing.T) {
	for _, spec := range []transforms.Spec{{}, {DType: transforms.Float32}, {Layout: transforms.CHW}} {
		tc := spec.MustCompile()
		p := newFieldPlan(datasetFields(source.SourceInfo{Fields: fieldSchema}, tc), tc)
		for i := 0; i < 8; i++ {
			w, h, vals := fieldValues(i)
			got, dropped, err := p.mapFields(tc, vals, w, h, w, h)
			if err != nil || dropped != nil {
				t.Fatalf("%+v item %d: %v, dropped %v", spec, i, err, dropped)
			}
			for k, v := range vals {
				want := v.Bytes
				if v.Image != nil {
					want = v.Image.Pix
				}
				if !bytes.Equal(got[k], want) || got[k] == nil {
					t.Fatalf("%+v item %d field %s: %v, want %v", spec, i, fieldSchema[k].Name, got[k], want)
				}
				if len(want) > 0 && &got[k][0] == &want[0] {
					t.Fatalf("item %d field %s: the value is the source's buffer, not a copy", i, fieldSchema[k].Name)
				}
			}
		}
		w, h, vals := fieldValues(3)
		vals[5].Image.H--
		vals[5].Image.Pix = vals[5].Image.Pix[:w*(h-1)]
		if _, _, err := p.mapFields(tc, vals, w, h, w, h); err == nil || !strings.Contains(err.Error(), "field mask") {
			t.Fatalf("a mask of another size: %v", err)
		}
	}
}

// TestDatasetFieldsLayout: an image field's shape follows the layout; the source's schema is
// not changed.
func TestDatasetFieldsLayout(t *testing.T) {
	chw := transforms.Spec{Layout: transforms.CHW}.MustCompile()
	got := datasetFields(source.SourceInfo{Fields: fieldSchema}, chw)
	if !reflect.DeepEqual(got[5].Shape, []int{1, -1, -1}) || !reflect.DeepEqual(fieldSchema[5].Shape, []int{-1, -1, 1}) {
		t.Fatalf("chw mask shape %v (source's now %v)", got[5].Shape, fieldSchema[5].Shape)
	}
	if got := datasetFields(source.SourceInfo{Fields: fieldSchema}, transforms.Compiled{}); !reflect.DeepEqual(got, fieldSchema) {
		t.Fatalf("hwc: %v", got)
	}
	if datasetFields(source.SourceInfo{}, chw) != nil {
		t.Fatal("no fields: want nil")
	}
}

// TestKeepRows: the rows a boxes mapping kept are kept, in order, of every field that follows
// the boxes; a value that is not the boxes' row count is refused, naming the field.
func TestKeepRows(t *testing.T) {
	f := shard.Field{Name: "category", RowsOf: "boxes"}
	b := []byte{1, 1, 2, 2, 3, 3, 4, 4}
	got, err := keepRows(f, b, 2, []int{0, 2, 3}, 4)
	if err != nil || !bytes.Equal(got, []byte{1, 1, 3, 3, 4, 4}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := keepRows(f, b, 2, nil, 4); err != nil || len(got) != 0 {
		t.Fatalf("none kept: %v, %v", got, err)
	}
	if _, err := keepRows(f, b, 2, []int{0}, 3); err == nil || !strings.Contains(err.Error(), "category") {
		t.Fatalf("rows unlike the boxes': %v", err)
	}
}

// TestMapFieldsIdentityClipsBoxes: without a resize or crop a box reaching past its image is
// clipped to it, and one wholly outside is dropped with its rows, as under a crop.
func TestMapFieldsIdentityClipsBoxes(t *testing.T) {
	tc := transforms.Spec{}.MustCompile()
	p := newFieldPlan(datasetFields(source.SourceInfo{Fields: fieldSchema}, tc), tc)
	w, h, vals := fieldValues(3) // three boxes, three categories
	var boxes []byte
	for _, v := range []float32{1, 1, float32(w) + 5, 2, float32(w) + 1, 0, float32(w) + 3, 1, 0, 0, 1, 1} {
		boxes = binary.LittleEndian.AppendUint32(boxes, math.Float32bits(v))
	}
	vals[4].Bytes = boxes
	got, dropped, err := p.mapFields(tc, vals, w, h, w, h)
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	for i := 0; i+4 <= len(got[4]); i += 4 {
		out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(got[4][i:])))
	}
	if fmt.Sprint(out) != fmt.Sprint([]float32{1, 1, float32(w), 2, 0, 0, 1, 1}) || dropped == nil || dropped[4] != 1 {
		t.Fatalf("boxes %v, dropped %v", out, dropped)
	}
	if cats := got[3]; len(cats) != 16 || binary.LittleEndian.Uint64(cats[8:]) != 102 {
		t.Fatalf("categories of the kept boxes: %v", cats)
	}
}
