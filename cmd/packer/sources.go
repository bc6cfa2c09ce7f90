package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/cifar"
	"github.com/packer-dev/packer/source/coco"
	"github.com/packer-dev/packer/source/idx"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/source/pairs"
	"github.com/packer-dev/packer/source/parquet"
	"github.com/packer-dev/packer/source/tfrecord"
	"github.com/packer-dev/packer/source/video"
	"github.com/packer-dev/packer/source/webdataset"
)

// sources is the table of source kinds --from names, one entry per kind, each exported by its
// own package. Detection asks every entry's sniffer; where several match one class folder
// equally, the entry listed first wins. Adding a source kind is its package plus one line here.
var sources = []source.Entry{
	imagedir.FolderEntry,
	imagedir.ListEntry,
	cifar.Entry10,
	cifar.Entry100,
	idx.Entry,
	video.FramesEntry,
	video.VideoEntry,
	webdataset.Entry,
	tfrecord.Entry,
	parquet.Entry,
	coco.Entry,
	pairs.Entry,
}

// splitList splits a comma-separated flag value, dropping empty entries.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// sourceEntry returns the table's entry for kind.
func sourceEntry(kind string) (source.Entry, bool) {
	for _, e := range sources {
		if e.Kind == kind {
			return e, true
		}
	}
	return source.Entry{}, false
}

// sourceKinds lists the table's kinds for help and error messages: "a, b or c".
func sourceKinds() string {
	var names []string
	for _, e := range sources {
		names = append(names, e.Kind)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// openSource opens the build's source, detecting its kind when --from is not given.
func openSource(o *buildOptions) (source.Source, string, error) {
	if o.plan != nil {
		return openPlanned(o)
	}
	kind := o.From
	if kind == "" {
		var err error
		if kind, err = source.DetectIn(o.sourcePath(), sources, o.files); err != nil {
			if errors.Is(err, source.ErrUnknown) {
				return nil, "", usagef(err) // it names the path and says what to give
			}
			return nil, "", usagef(fmt.Errorf("cannot tell the source kind of %s: %w (give --from)", o.Source, err))
		}
	}
	e, ok := sourceEntry(kind)
	if !ok {
		return nil, "", usagef(fmt.Errorf("unknown --from %q (want %s)", kind, sourceKinds()))
	}
	if len(o.classes) > 0 && !e.Classes {
		return nil, "", usagef(fmt.Errorf("--classes does not apply to --from %s, whose class names come from the data (folder names, or the CIFAR meta file); it names the classes of IDX files and of lists labelled by integers", kind))
	}
	src, err := e.Open(o.sourcePath(), o.sourceOptions())
	if err != nil {
		return nil, "", err
	}
	return src, kind, nil
}

// sourcePath is the local path the source is read from: SRC, or the local copy of an s3://
// SRC (mirrorSource).
func (o *buildOptions) sourcePath() string {
	if o.srcPath != "" {
		return o.srcPath
	}
	return o.Source
}

// plannedPath is the path the source of a plan is read from: the source it records, or the
// view of it where it is an s3:// source (plannedView).
func (o *buildOptions) plannedPath() string {
	if o.srcPath != "" {
		return o.srcPath
	}
	return o.plan.Source
}

func (o *buildOptions) sourceOptions() source.Options {
	return source.Options{
		Split: o.Split, Classes: o.classes, ExifOrient: o.ExifOrien, MaxPixels: o.MaxPixels,
		ClipLen: o.ClipLen, ClipStride: o.ClipStride, Short: o.ShortClip, FPS: o.FPS, Timeout: o.Timeout,
		ImageKey: o.ImageKey, LabelKey: o.LabelKey, Fields: splitList(o.Fields), Images: o.sidePath(o.Images), Masks: o.sidePath(o.Masks),
		Files: o.files,
	}
}

// openPlanned opens the source a plan file records (usePlan set o.plan and the source flags)
// with its listing from the plan: a kind whose plan lists the inputs is opened only to decode
// them (Entry.Replay), without listing it.
func openPlanned(o *buildOptions) (source.Source, string, error) {
	h := o.plan
	e, ok := sourceEntry(h.Kind)
	if !ok {
		return nil, "", fmt.Errorf("%w: %s: unknown source kind %q", pipeline.ErrPlan, o.Source, h.Kind)
	}
	var src source.Source
	var err error
	switch {
	case h.Items && e.Replay == nil:
		return nil, "", fmt.Errorf("%w: %s lists the inputs of a %s source, which cannot be built from a list", pipeline.ErrPlan, o.Source, h.Kind)
	case h.Items:
		src, err = e.Replay(o.plannedPath(), o.sourceOptions(), h.Classes)
	default:
		src, err = e.Open(o.plannedPath(), o.sourceOptions())
	}
	if err != nil {
		return nil, "", fmt.Errorf("the source of the plan %s: %w", o.Source, err)
	}
	if src, err = pipeline.FromPlan(o.Source, h, src, o.files); err != nil {
		return nil, "", err
	}
	return src, h.Kind, nil
}
