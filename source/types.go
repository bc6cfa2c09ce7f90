package source

import (
	"context"
	"fmt"
	"time"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/transforms"
)

// Item is one input as enumerated by a Source, in source order.
type Item struct {
	Seq   int64   // position in source order, from 0
	Name  string  // how errors and the manifest's skipped list name this input (relative path, or "file#record")
	Path  string  // file a worker reads, when the enumerator did not read the bytes itself
	Raw   []byte  // bytes already read by the enumerator (CIFAR, IDX), or nil
	Label int64   // class index
	Aux   []int64 // auxiliary label columns (for example CIFAR-100's coarse label)
	// Note is what the enumerator hands its own Decode about this item (a fault it found, the
	// record's provenance); the pipeline only carries it.
	Note any
	// Extra is what else decides the input's records that the enumerator already knows, beyond
	// Name, Label and Aux (coco: the image's annotations, encoded canonically), or nil. It
	// joins the listing digest (listing_sha256) of parts, plans and the resume checkpoint, so
	// that parts built from other versions of it are refused, as for a changed label.
	Extra []byte
	// Side is a second file the input's records are read from (pairs: the mask), or "". Its
	// size and modification time join the content digest (content_sha256), as Path's do.
	Side string
	// Stamp is Path's size and modification time as a plan recorded them (pipeline.FromPlan),
	// or nil: a part built from a plan records the plan's, and checks its own inputs' against
	// them.
	Stamp *Stamp
}

// Clip is what a Source decodes from an Item: one record's worth of frames (one frame for an
// image) plus its labels and optional per-record metadata (JSON).
type Clip struct {
	Frames []transforms.Image
	// Windows, when not nil, has one entry per frame: that frame holds only part of a larger
	// decoded image (a decoder that skipped what the transform never reads; see
	// transforms.Worker.ApplyWindow). The CPU path and a pipeline.WindowResizer accept windows: a
	// Source returns them only when the build's DecodePlan asks for them (PlannedSource).
	Windows []Window
	Label   int64
	Aux     []int64
	Meta    []byte
	// Fields are the record's values of SourceInfo.Fields, in that order (nil when the source
	// declares none). See FieldValue.
	Fields []FieldValue
}

// FieldValue is one field's value of a record, as a source decodes it, before the build's
// transform.
type FieldValue struct {
	// Bytes is the raw value of a text, bytes, json or ndarray field (little-endian elements).
	// A boxes field (shard.GeometryBoxes) holds float32 x0, y0, x1, y1 rows in the pixel
	// coordinates of the full decoded frame (not of a window); the pipeline maps them through
	// the transform and drops boxes left with no area, with the same rows of the fields whose
	// RowsOf names the boxes field.
	Bytes []byte
	// Image is a mask field's value (shard.GeometryMask): decoded at the frame's full size,
	// never a window; the pipeline resizes it nearest-neighbour and crops it with the frame.
	Image *transforms.Image
}

// Window places a frame in its full image: the frame's pixels are [X, X+W) × [Y, Y+H) of a
// FullW × FullH image.
type Window struct {
	X, Y, FullW, FullH int
}

// SourceInfo describes a source for the manifest and for sizing records.
type SourceInfo struct {
	Kind     string         // "cifar10", "cifar100", "idx", "folder", "list", "frames", "video"
	Classes  []string       // class names indexed by label (may be empty)
	AuxNames []string       // names of the auxiliary label columns
	Spec     map[string]any // options describing the source, recorded in the manifest; nothing host-dependent
	ClipLen  int            // frames per record; 0 for single images
	HasMeta  bool           // records carry per-record metadata
	Count    int64          // expected number of items, for progress; -1 when unknown
	// Frame is the size of every decoded frame, so a build knows its record shape before
	// decoding anything (DatasetSpec). W and H are set when every frame has the same size
	// (CIFAR, IDX) and 0 when they vary; C is the channel count, 0 meaning 3 (RGB: what image
	// and video decoding give).
	Frame FrameShape
	// Fields is the sample schema beyond the frame and the integer labels (format version 3):
	// every Clip's Fields holds one value per entry, in this order. Empty for image-only
	// sources, whose datasets keep their bytes.
	Fields []shard.Field
}

// FrameShape is the width, height and channel count of decoded frames (see SourceInfo.Frame).
type FrameShape struct {
	W, H, C int
}

// A Source enumerates the inputs of a dataset and decodes them.
//
// Enumerate is called once, from one goroutine, and must call emit in source order.
// Decode is called concurrently from worker goroutines; it calls emit for each record the item
// yields, in order (zero or more: a video yields one record per clip). An error returned by
// Decode makes the item a bad input: it is listed in the manifest's skipped with the error as
// its reason (--on-error skip), keeping the records it yielded before the error, or it fails
// the build (--on-error fail). Errors that say nothing about the input (out of file
// descriptors or memory, a failing disk or file server: see pipeline.ErrSystem) always fail the
// build, and so does the build's context being cancelled.
type Source interface {
	Info() SourceInfo
	Enumerate(ctx context.Context, emit func(Item) error) error
	Decode(ctx context.Context, it Item, emit func(Clip) error) error
}

// A DirectSource is a Source whose every item decodes to exactly one record of one frame, of
// a size known before decoding (CIFAR, IDX). When the transform is the identity, the pipeline
// calls DecodeTo with the record buffer instead of Decode, which saves a frame allocation and a
// copy. DecodeTo must give the same pixels, labels and errors as Decode would.
type DirectSource interface {
	Source
	// FrameShape returns the width, height and channels of every frame.
	FrameShape() (w, h, c int)
	// DecodeTo writes the item's interleaved (HWC) pixels into pix, which is w*h*c bytes, and
	// returns the clip's labels and metadata (Frames is not used).
	DecodeTo(ctx context.Context, it Item, pix []byte) (Clip, error)
}

// DecodePlan is what the engine asks of a PlannedSource's decoding. pipeline.Build decides it once,
// before it asks the source anything else.
type DecodePlan struct {
	// Transform is the build's transform, compiled (Spec.Compile). A source derives from it
	// the reduced JPEG scale --fast allows (transforms.DraftSize) and whether frames of
	// different sizes can share a clip record (transforms.Compiled.FixedSize).
	Transform transforms.Compiled
	// Windows asks the source to decode of each image only the rectangle Transform.Region
	// gives and to emit it as a window (Clip.Windows): the same output bytes, less decoding.
	// The build sets it when the frames are transformed on the CPU (no pipeline.BatchResizer)
	// or by a pipeline.WindowResizer, the paths that accept windows.
	Windows bool
}

// A PlannedSource adapts its decoding to the build's transform. pipeline.Build calls
// PlanDecode once, before Info or any other method; a PlannedSource that is never given a plan
// decodes whole frames at full scale, as for the identity transform.
type PlannedSource interface {
	Source
	PlanDecode(p DecodePlan)
}

// InputError is a bad input: it is skipped with --on-error skip and fails the build otherwise.
type InputError struct {
	Input string
	Err   error
}

func (e *InputError) Error() string { return fmt.Sprintf("%s: %v", e.Input, e.Err) }
func (e *InputError) Unwrap() error { return e.Err }

// Stamp identifies a file's content cheaply: its size and modification time. A folder (a
// frames source's video) has Size 0; a file that cannot be read has Size -1.
type Stamp struct {
	Size    int64 `json:"size"`
	ModTime int64 `json:"mtime_ns"` // nanoseconds since 1970 UTC
}

func (s Stamp) String() string {
	if s.Size < 0 {
		return "missing"
	}
	return fmt.Sprintf("%d bytes, modified %s", s.Size, time.Unix(0, s.ModTime).UTC().Format(time.RFC3339Nano))
}
