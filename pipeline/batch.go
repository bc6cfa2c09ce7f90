package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// decoded is one item's decode outcome, held until its group's frames are transformed.
type decoded struct {
	name   string
	clips  []source.Clip
	fields []mappedFields // per clip, when the dataset has fields
	err    error
}

// mappedFields is a clip's field values mapped for its record (builder.clipFields), or why
// they could not be.
type mappedFields struct {
	vals    [][]byte
	dropped []int64
	err     error
}

// batchWorker decodes a whole job (up to deviceGroup items), transforms every frame of it with
// one BatchResizer call, then sends the records and done markers in item order. Decoded frames
// are copied, since a Source may reuse its buffers after emit returns; memory stays bounded by
// workers × group × image size. With a FrameStager, that copy is the only host copy: it goes
// into the resizer's frames (pinned memory), which the device reads directly, and they are
// released once the call returns. With a WindowResizer, frames may be windows (region decoding
// on the CPU): only the window is copied, and the resizer gets each frame's place in its image.
func (b *builder) batchWorker(ctx context.Context, jobs <-chan job) error {
	for j := range jobs {
		if err := b.batchJob(ctx, j); err != nil {
			return err
		}
	}
	return nil
}

// batchJob is batchWorker's work for one job.
func (b *builder) batchJob(ctx context.Context, j job) error {
	wr, windowed := b.opts.Resizer.(WindowResizer)
	stager, _ := b.opts.Resizer.(FrameStager)
	var releases []func()
	releaseFrames := func() {
		for _, rel := range releases {
			rel()
		}
		releases = nil
	}
	defer releaseFrames() // on every path: a frame is released once its Run has returned
	snd := sender{b: b, res: j.res}
	items := make([]decoded, len(j.items))
	for k, it := range j.items {
		items[k].name = it.Name
		items[k].err = b.opts.Source.Decode(ctx, it, func(c source.Clip) error {
			if c.Windows != nil && !windowed {
				return errors.New("internal error: the source returned image windows to the device path")
			}
			own := make([]transforms.Image, len(c.Frames))
			for f, fr := range c.Frames {
				own[f] = fr
				if stager != nil {
					pix, rel := stager.Frame(len(fr.Pix))
					releases = append(releases, rel)
					copy(pix, fr.Pix) // the frame's one host copy
					own[f].Pix = pix
				} else {
					own[f].Pix = append([]byte(nil), fr.Pix...)
				}
			}
			c.Frames = own
			if c.Windows != nil {
				c.Windows = append([]source.Window(nil), c.Windows...)
			}
			if b.fplan != nil {
				// Mapped now, on the CPU: the values are copied before the source may reuse
				// them, and an error is the clip's when its record is laid out (below), as on
				// the per-worker path.
				var m mappedFields
				m.vals, m.dropped, m.err = b.clipFields(&c)
				items[k].fields = append(items[k].fields, m)
				c.Fields = nil
			}
			items[k].clips = append(items[k].clips, c)
			return nil
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	// Lay out every record's buffer. As on the per-worker path, an item keeps the records it
	// yielded before an error (its decode failing part-way, or a clip that does not fit),
	// and the error lists it as skipped "after N records were packed": the output is the
	// same bytes whichever path ran.
	results := make([][]result, len(items))
	for k := range items {
		for q, c := range items[k].clips {
			r, err := b.layout(c)
			if err == nil && b.fplan != nil {
				m := items[k].fields[q]
				r.rec.Fields, r.dropped, err = m.vals, m.dropped, m.err
				if err != nil {
					b.pool.Put(r.buf)
				}
			}
			if err != nil {
				items[k].err = err
				items[k].clips = items[k].clips[:q]
				break
			}
			results[k] = append(results[k], r)
		}
	}
	// Then run the device once over every frame of the group.
	var frames []transforms.Image
	var wins []source.Window
	var dsts [][]byte
	anyWindow := false
	for k := range items {
		for q, r := range results[k] {
			c := items[k].clips[q]
			frames = append(frames, c.Frames...)
			dsts = append(dsts, r.frameDsts...)
			for f, fr := range c.Frames {
				if c.Windows != nil {
					wins = append(wins, c.Windows[f])
					anyWindow = true
				} else {
					wins = append(wins, source.Window{FullW: fr.W, FullH: fr.H})
				}
			}
		}
	}
	if len(frames) > 0 {
		var err error
		if anyWindow {
			err = wr.RunWindows(frames, wins, dsts)
		} else {
			err = b.opts.Resizer.Run(frames, dsts)
		}
		if err != nil {
			return fmt.Errorf("device transform: %w", err)
		}
	}
	releaseFrames() // before the sends, which may wait for the writer
	for k := range items {
		for _, r := range results[k] {
			r.name = items[k].name
			r.frameDsts = nil
			if err := snd.send(ctx, r); err != nil {
				return err
			}
		}
		if err := snd.send(ctx, doneOf(j.items[k], items[k].err, len(results[k]))); err != nil {
			return err
		}
	}
	if err := snd.flush(ctx); err != nil {
		return err
	}
	close(j.res)
	return nil
}

// fullSize is the size of clip c's frame i's whole image: the frame's own size, or its window's
// full image when the source decoded only a window of it.
func fullSize(c *source.Clip, i int) (w, h int) {
	if c.Windows != nil {
		return c.Windows[i].FullW, c.Windows[i].FullH
	}
	return c.Frames[i].W, c.Frames[i].H
}

// layout allocates a clip's record buffer, with its per-frame destination slices.
func (b *builder) layout(c source.Clip) (result, error) {
	if len(c.Frames) == 0 {
		return result{}, errors.New("no frames decoded")
	}
	if c.Windows != nil && len(c.Windows) != len(c.Frames) {
		return result{}, fmt.Errorf("internal error: %d windows for %d frames", len(c.Windows), len(c.Frames))
	}
	f0 := c.Frames[0]
	w0, h0 := fullSize(&c, 0)
	fs := b.tspec.OutputSpec(w0, h0, f0.C)
	if err := fs.Validate(); err != nil {
		return result{}, err
	}
	size := int(fs.Size())
	buf := b.getBuf(size * len(c.Frames))
	dsts := make([][]byte, len(c.Frames))
	for i, f := range c.Frames {
		if w, h := fullSize(&c, i); b.tspec.OutputSpec(w, h, f.C).Size() != int64(size) {
			b.pool.Put(buf)
			return result{}, fmt.Errorf("frame %d is %dx%dx%d, frame 0 is %dx%dx%d", i, w, h, f.C, w0, h0, f0.C)
		}
		dsts[i] = (*buf)[i*size : (i+1)*size]
	}
	spec := fs
	if b.info.ClipLen > 0 {
		spec = shard.SampleSpec{Shape: append([]int{len(c.Frames)}, fs.Shape...), DType: fs.DType, Layout: "t" + fs.Layout}
	}
	return result{rec: output.Record{Data: *buf, Label: c.Label, Aux: c.Aux, Meta: c.Meta}, spec: spec, buf: buf, frameDsts: dsts}, nil
}
