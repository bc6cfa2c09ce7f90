package pipeline

// Fields: a record's values beyond its frames and integer labels (source.SourceInfo.Fields,
// shard.Field). A worker maps each clip's values through the build's transform as the frame's
// pixels move: boxes through transforms.Compiled.MapBoxes (a box left with no area dropped,
// with the same rows of the fields whose RowsOf names the boxes field), masks through
// Compiled.MapMask; every other kind is carried as it is. The writer counts the dropped boxes
// into the manifest's boxes_dropped.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// ErrFieldsClips is returned by Build for a source that declares fields and yields clips
// (SourceInfo.ClipLen > 0): a clip's frames have no one geometry for its boxes and masks.
var ErrFieldsClips = errors.New("fields are not carried for clips (--clip-len): a record's boxes and masks follow one frame")

// datasetFields is the dataset's schema: the source's fields, with each image field's shape in
// the transform's layout (a source declares it in hwc order, [-1, -1, C]; chw makes it
// [C, -1, -1]). nil for a source with no fields.
func datasetFields(info source.SourceInfo, t transforms.Compiled) []shard.Field {
	if len(info.Fields) == 0 {
		return nil
	}
	out := make([]shard.Field, len(info.Fields))
	for k, f := range info.Fields {
		f.Shape = slices.Clone(f.Shape)
		if f.Kind == shard.KindImage && t.Layout() == transforms.CHW && len(f.Shape) == 3 && f.Shape[0] < 0 && f.Shape[2] > 0 {
			f.Shape = []int{f.Shape[2], -1, -1}
		}
		out[k] = f
	}
	return out
}

// fieldPlan is what a worker needs to map the values of a schema: for each field, its row size
// in bytes (ndarray fields: prod(shape[1:]) × the dtype's size), and for each boxes field the
// fields that follow its rows.
type fieldPlan struct {
	fields  []shard.Field
	rowSize []int
	follow  map[int][]int // boxes field index → the indices of the fields whose RowsOf names it
	// geomIdentity: the transform neither resizes nor crops, so boxes and masks keep their
	// coordinates and pixels (a mask in hwc keeps its bytes).
	geomIdentity bool
	chw          bool
}

func newFieldPlan(fields []shard.Field, t transforms.Compiled) *fieldPlan {
	if len(fields) == 0 {
		return nil
	}
	s := t.Spec()
	p := &fieldPlan{fields: fields, rowSize: make([]int, len(fields)), follow: map[int][]int{},
		geomIdentity: s.Resize == 0 && s.Width == 0 && s.Height == 0 && s.CropW == 0 && s.CropH == 0,
		chw:          t.Layout() == transforms.CHW}
	index := map[string]int{}
	for k, f := range fields {
		index[f.Name] = k
		if f.Kind == shard.KindNDArray {
			n := shard.FieldDTypes[f.DType]
			for _, d := range f.Shape[min(1, len(f.Shape)):] {
				n *= d
			}
			p.rowSize[k] = n
		}
	}
	for k, f := range fields {
		if f.RowsOf != "" {
			if b, ok := index[f.RowsOf]; ok {
				p.follow[b] = append(p.follow[b], k)
			}
		}
	}
	return p
}

// mapFields returns a clip's field values for its record: each value a slice of its own (a
// source may reuse its buffers once emit returns), boxes and masks mapped through the
// transform for a frame whose full image is fullW × fullH and whose output is outW × outH,
// and the number of boxes dropped per field (nil when none was). An error is the input's
// (a value the schema cannot take, a mask of another size than its image).
func (p *fieldPlan) mapFields(t transforms.Compiled, vals []source.FieldValue, fullW, fullH, outW, outH int) ([][]byte, []int64, error) {
	if len(vals) != len(p.fields) {
		return nil, nil, fmt.Errorf("internal error: %d field values for a schema of %d fields", len(vals), len(p.fields))
	}
	out := make([][]byte, len(vals))
	var dropped []int64
	for k, f := range p.fields {
		v := vals[k]
		switch {
		case f.Geometry == shard.GeometryMask || f.Kind == shard.KindImage:
			pix, err := p.mapMask(t, f, v.Image, fullW, fullH, outW, outH)
			if err != nil {
				return nil, nil, err
			}
			out[k] = pix
		case f.Geometry == shard.GeometryBoxes:
			boxes, kept, err := p.mapBoxes(t, f, v.Bytes, fullW, fullH)
			if err != nil {
				return nil, nil, err
			}
			out[k] = boxes
			if n := int64(len(v.Bytes)/16 - len(kept)); n > 0 {
				if dropped == nil {
					dropped = make([]int64, len(p.fields))
				}
				dropped[k] = n
			}
			for _, j := range p.follow[k] {
				rows, err := keepRows(p.fields[j], vals[j].Bytes, p.rowSize[j], kept, len(v.Bytes)/16)
				if err != nil {
					return nil, nil, err
				}
				out[j] = rows
			}
		default:
			if out[k] == nil || p.fields[k].RowsOf == "" {
				out[k] = slices.Clone(v.Bytes)
				if out[k] == nil {
					out[k] = []byte{}
				}
			}
		}
	}
	return out, dropped, nil
}

// mapBoxes maps a boxes field's value (float32 x0, y0, x1, y1 rows in the full frame's pixels)
// through MapBoxes, also when the transform does not move pixels: a box is then clipped to the
// image and dropped when left with no area, as under a crop, so every packed box lies in its
// record's image whatever the options.
func (p *fieldPlan) mapBoxes(t transforms.Compiled, f shard.Field, b []byte, fullW, fullH int) ([]byte, []int, error) {
	if len(b)%16 != 0 {
		return nil, nil, fmt.Errorf("field %s: %d bytes, not rows of 4 float32 boxes", f.Name, len(b))
	}
	n := len(b) / 16
	in := make([]float32, 4*n)
	for i := range in {
		in[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	boxes, kept, err := t.MapBoxes(in, fullW, fullH)
	if err != nil {
		return nil, nil, fmt.Errorf("field %s: %w", f.Name, err)
	}
	if len(boxes) != 4*len(kept) {
		return nil, nil, fmt.Errorf("internal error: field %s: %d box values for %d kept boxes", f.Name, len(boxes), len(kept))
	}
	out := make([]byte, 0, 4*len(boxes))
	for _, x := range boxes {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
	}
	return out, kept, nil
}

// keepRows returns the rows kept of field f's value b (rows of rowSize bytes; the boxes field
// it follows had n rows).
func keepRows(f shard.Field, b []byte, rowSize int, kept []int, n int) ([]byte, error) {
	if rowSize <= 0 || len(b) != n*rowSize {
		return nil, fmt.Errorf("field %s: %d bytes, not the %d rows of its boxes field %s", f.Name, len(b), n, f.RowsOf)
	}
	if len(kept) == n {
		return append([]byte{}, b...), nil
	}
	out := make([]byte, 0, len(kept)*rowSize)
	for _, i := range kept {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("internal error: field %s: kept row %d of %d", f.Name, i, n)
		}
		out = append(out, b[i*rowSize:(i+1)*rowSize]...)
	}
	return out, nil
}

// mapMask maps a mask field's value (an image at the frame's full size) to the record's
// geometry and layout.
func (p *fieldPlan) mapMask(t transforms.Compiled, f shard.Field, m *transforms.Image, fullW, fullH, outW, outH int) ([]byte, error) {
	if m == nil {
		return nil, fmt.Errorf("field %s: no mask image", f.Name)
	}
	if m.W != fullW || m.H != fullH {
		return nil, fmt.Errorf("field %s: the mask is %dx%d, its image %dx%d", f.Name, m.W, m.H, fullW, fullH)
	}
	if m.C < 1 || len(m.Pix) != m.W*m.H*m.C {
		return nil, fmt.Errorf("field %s: a %dx%d mask of %d channels has %d bytes", f.Name, m.W, m.H, m.C, len(m.Pix))
	}
	if p.geomIdentity && (!p.chw || m.C == 1) {
		return append([]byte{}, m.Pix...), nil
	}
	pix, w, h, err := t.MapMask(*m)
	if err != nil {
		return nil, fmt.Errorf("field %s: %w", f.Name, err)
	}
	if w != outW || h != outH {
		return nil, fmt.Errorf("field %s: the mask maps to %dx%d, its image to %dx%d", f.Name, w, h, outW, outH)
	}
	return pix, nil
}
