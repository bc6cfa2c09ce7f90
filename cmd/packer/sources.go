package main

import (
	"fmt"

	"github.com/packer-dev/packer/formats"
	"github.com/packer-dev/packer/formats/cifar"
	"github.com/packer-dev/packer/formats/idx"
	"github.com/packer-dev/packer/formats/imagedir"
	"github.com/packer-dev/packer/formats/video"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/transforms"
)

// openSource opens the build's source, detecting its kind when --from is not given.
func openSource(o *buildOptions) (pipeline.Source, string, error) {
	kind := o.From
	if kind == "" {
		var err error
		if kind, err = formats.Detect(o.Source); err != nil {
			return nil, "", usagef(fmt.Errorf("cannot tell the source kind of %s: %w (give --from)", o.Source, err))
		}
	}
	var (
		src pipeline.Source
		err error
	)
	if len(o.classes) > 0 && kind != "idx" && kind != "list" {
		return nil, "", usagef(fmt.Errorf("--classes does not apply to --from %s, whose class names come from the data (folder names, or the CIFAR meta file); it names the classes of IDX files and of lists labelled by integers", kind))
	}
	switch kind {
	case "cifar10", "cifar100":
		src, err = cifar.Open(o.Source, kind, o.Split)
	case "idx":
		src, err = idx.Open(o.Source, o.Split, o.classes)
	case "frames":
		src, err = video.OpenFrames(o.Source, video.Options{ClipLen: o.ClipLen, ClipStride: o.ClipStride, Short: o.ShortClip, FPS: o.FPS, ExifOrient: o.ExifOrien, MaxPixels: o.MaxPixels, Transform: o.transform})
	case "video":
		src, err = video.Open(o.Source, video.Options{ClipLen: o.ClipLen, ClipStride: o.ClipStride, Short: o.ShortClip, FPS: o.FPS, Timeout: o.Timeout, MaxPixels: o.MaxPixels, Transform: o.transform})
	case "folder", "list":
		src, err = imagedir.Open(o.Source, kind, imagedir.Options{
			Decode:    transforms.DecodeOptions{MaxPixels: o.MaxPixels, ExifOrient: o.ExifOrien},
			Transform: o.transform,
			Classes:   o.classes,
		})
	default:
		return nil, "", usagef(fmt.Errorf("unknown --from %q (want folder, list, cifar10, cifar100, idx, frames or video)", kind))
	}
	if err != nil {
		return nil, "", err
	}
	return src, kind, nil
}
