package transforms

import "errors"

// Geometry of a sample's fields (shard.GeometryBoxes, shard.GeometryMask): boxes and masks
// follow the pixels of the frame they belong to. docs/fidelity.md gives the arithmetic.

var errFieldGeometry = errors.New("transforms: field geometry is not available in this build")

// MapBoxes maps boxes, float32 rows (x0, y0, x1, y1) in the pixel coordinates of a w×h source
// frame, through c's resize and crop, exactly as the frame's pixels move: scaled by the resize's
// output/input ratio on each axis, shifted by the crop's offset, clipped to the output frame.
// A box left with no area is dropped; kept lists the input row of each output row, so the
// caller drops the same rows of the fields that follow the boxes. len(boxes) must be a
// multiple of 4.
func (c Compiled) MapBoxes(boxes []float32, w, h int) (out []float32, kept []int, err error) {
	return nil, nil, errFieldGeometry
}

// MapMask resizes a mask (uint8, any channel count, the source frame's full size) with
// nearest-neighbour sampling and crops it exactly as c resizes and crops the frame, and returns
// its bytes in c's layout (hwc or chw) with the output width and height. The bytes equal
// Pillow's Image.resize((ow, oh), NEAREST) followed by the same crop.
func (c Compiled) MapMask(m Image) (pix []byte, w, h int, err error) {
	return nil, 0, 0, errFieldGeometry
}
