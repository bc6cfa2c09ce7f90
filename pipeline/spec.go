package pipeline

import (
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// imageChannels is the channel count of every frame a Source without fixed frames decodes:
// image folders, lists, frame folders and videos all decode to RGB.
const imageChannels = 3

// DatasetSpec returns the sample spec of every record of a build of src with the transform t,
// decided before anything is decoded, never from the first record:
//
//   - a crop (--crop) or an exact size (--size) fixes the frame size;
//   - a source whose frames all have one size (SourceInfo.Frame: CIFAR, IDX) fixes it too;
//   - otherwise (a shorter-side --resize, or no resize, of images of any size) the height and
//     width vary: [-1, -1, 3] (hwc) or [3, -1, -1] (chw), stored in shard format version 2.
//
// Clips (SourceInfo.ClipLen T > 0) prepend T to the frame shape, layout "t"+layout.
func DatasetSpec(src source.Source, t transforms.Compiled) shard.SampleSpec {
	info := src.Info()
	fr := info.Frame
	if fr.C == 0 {
		fr.C = imageChannels
	}
	c := fr.C
	var fs shard.SampleSpec
	if w, h, ok := t.FixedSize(); ok {
		fs = t.OutputSpec(w, h, c)
	} else if fr.W > 0 && fr.H > 0 {
		fs = t.OutputSpec(fr.W, fr.H, c)
	} else {
		fs = shard.SampleSpec{Shape: []int{-1, -1, c}, DType: t.DType().Sample(), Layout: t.Layout().String()}
		if t.Layout() == transforms.CHW {
			fs.Shape = []int{c, -1, -1}
		}
	}
	if n := info.ClipLen; n > 0 {
		fs = shard.SampleSpec{Shape: append([]int{n}, fs.Shape...), DType: fs.DType, Layout: "t" + fs.Layout}
	}
	return fs
}

// ErrShapeNotFixed is returned by Build for a fixed-shape format (npy, hdf5) when the records'
// shape is not fixed; nothing has been decoded or written.
var ErrShapeNotFixed = output.ErrShapeNotFixed

// fits reports whether a record of shape rec fits the dataset spec: same dtype, layout and
// rank, every fixed dimension equal, every variable one ≥ 1.
func fits(spec shard.SampleSpec, rec shard.SampleSpec) bool {
	if rec.DType != spec.DType || rec.Layout != spec.Layout || len(rec.Shape) != len(spec.Shape) {
		return false
	}
	for i, d := range spec.Shape {
		if (d > 0 && rec.Shape[i] != d) || rec.Shape[i] < 1 {
			return false
		}
	}
	return true
}
