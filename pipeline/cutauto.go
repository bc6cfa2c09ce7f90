package pipeline

import (
	"errors"
	"fmt"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// ErrCutAuto is wrapped by AutoCutInputs's refusal: the output's record size is not known
// before the inputs are decoded, so no K follows from the shard size.
var ErrCutAuto = errors.New("--cut-inputs auto needs one record of a fixed size per input")

// AutoCutInputs is the K of --cut-inputs auto for a build of src with the transform t and the
// shard byte budget shardSize: max(1, ⌊shardSize / record size⌋), so that a chunk of K inputs
// fills one shard (the budget counts each record's sample bytes: output/shards). It is decided
// from what is known before any input is decoded (the source's Info and the transform, as
// DatasetSpec), so every part and a one-machine build with the same options and source get the
// same K. It is refused (ErrCutAuto, naming the reason) where an input's bytes in the output
// are not known in advance: a record shape that varies (no --crop or --size, images of any
// size), fields (their values vary), or a video or frames source (an input yields many records).
func AutoCutInputs(src source.Source, t transforms.Compiled, shardSize int64) (int64, error) {
	info := src.Info()
	spec := DatasetSpec(src, t)
	var why string
	switch {
	case info.Kind == "video" || info.Kind == "frames" || info.ClipLen > 0:
		why = fmt.Sprintf("a %s input yields a number of records known only once it is decoded", info.Kind)
	case len(info.Fields) > 0:
		why = "the records carry fields, whose sizes vary"
	case !spec.Fixed():
		why = fmt.Sprintf("the records' shape %v varies (fix it with --crop or --size)", spec.Shape)
	case shardSize <= 0:
		why = "the shard size is not positive"
	}
	if why != "" {
		return 0, fmt.Errorf("%w: %s; give --cut-inputs K (docs/cluster.md, \"Choosing K\")", ErrCutAuto, why)
	}
	return max(1, shardSize/spec.Size()), nil
}
