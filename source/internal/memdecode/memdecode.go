// Package memdecode is the in-memory image decoder the record-format sources
// (source/webdataset, source/tfrecord, source/parquet) share: their images arrive encoded inside a record the enumerator read, so
// Decode decodes bytes in memory (transforms.DecodeBytes, the decoder image folders use) rather
// than a file, and a fault the enumerator found travels to Decode in the item's Note. The
// sources of image files (folders and lists, frames, COCO, pairs) share DecodeFile, which
// decodes a file, or the object of a store it stands for, fetched into memory.
package memdecode

import (
	"bytes"
	"context"
	"image"
	"io"
	"sync"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// Note is what an enumerator hands Decode in source.Item.Note: the record's per-record
// metadata (its provenance), or the fault that makes the item a bad input.
type Note struct {
	Meta   []byte
	Err    error
	Fields []source.FieldValue // the record's field values (source.Clip.Fields)
}

// Decoder decodes the images of a record-format source, one scratch buffer per worker.
type Decoder struct {
	Opts    transforms.DecodeOptions
	scratch sync.Pool // *transforms.DecodeScratch
}

// Plan takes the build's decode plan: with --fast, JPEGs are decoded at the reduced scale the
// transform allows (transforms.DraftSize). Images decoded from memory are never windows.
func (d *Decoder) Plan(p source.DecodePlan) {
	if d.Opts.Draft == nil && p.Transform.Fast() {
		d.Opts.Draft = transforms.DraftSize(p.Transform, 1)
	}
}

// Spec adds the decoding options to a source's manifest spec.
func (d *Decoder) Spec(spec map[string]any) map[string]any {
	mp := d.Opts.MaxPixels
	if mp == 0 {
		mp = transforms.DefaultMaxPixels
	}
	spec["exif_orient"], spec["fast_decode"], spec["max_pixels"] = d.Opts.ExifOrient, d.Opts.Draft != nil, mp
	return spec
}

// Decode reports the fault in the item's Note as a bad input naming it, or decodes it.Raw and
// emits one frame with the item's label and the Note's metadata.
func (d *Decoder) Decode(it source.Item, emit func(source.Clip) error) error {
	nt, _ := it.Note.(Note)
	if nt.Err != nil {
		return &source.InputError{Input: it.Name, Err: nt.Err}
	}
	sc, _ := d.scratch.Get().(*transforms.DecodeScratch)
	if sc == nil {
		sc = new(transforms.DecodeScratch)
	}
	// The image aliases the scratch; emit transforms it before returning.
	defer d.scratch.Put(sc)
	img, err := transforms.DecodeBytes(it.Raw, d.Opts, sc)
	if err != nil {
		return &source.InputError{Input: it.Name, Err: transforms.DecodeReason(err)}
	}
	return emit(source.Clip{Frames: []transforms.Image{img}, Label: it.Label, Meta: nt.Meta, Fields: nt.Fields})
}

// ReadN reads exactly n bytes of r. The buffer grows with what arrives, so a header that claims
// a large size in a truncated file costs no large allocation; a short read is
// io.ErrUnexpectedEOF.
func ReadN(r io.Reader, n int64) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(n, 1<<20)))
	got, err := buf.ReadFrom(io.LimitReader(r, n))
	if err == nil && got < n {
		err = io.ErrUnexpectedEOF
	}
	return buf.Bytes(), err
}

// DecodeFile decodes the image file at path (transforms.DecodeFileRegion), or, where files is
// set (source.Options.Files: path is then a file of an object store's view, or an object's
// URL), the object it stands for, fetched whole into memory by one read pinned to st or to
// its listing, the size the listing or st gives.
func DecodeFile(ctx context.Context, files source.Files, path string, st *source.Stamp, opts transforms.DecodeOptions, region func(w, h int) image.Rectangle, sc *transforms.DecodeScratch) (transforms.Decoded, error) {
	if files == nil {
		return transforms.DecodeFileRegion(path, opts, region, sc)
	}
	r, size, err := files.Open(ctx, path, st)
	if err != nil {
		return transforms.Decoded{}, err
	}
	defer r.Close()
	return transforms.DecodeReaderRegion(r, size, path, opts, region, sc)
}
