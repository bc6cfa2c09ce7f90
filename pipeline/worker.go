package pipeline

// The worker side of a build: items grouped into jobs, decoded and transformed on worker
// goroutines, records handed to the writer in source order.

import (
	"context"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// job is a group of consecutive items handled by one worker; its records and one done marker
// per item go to res in order, in batches (see sender). Small items already read by the enumerator (CIFAR, IDX records)
// are grouped so the per-item cost of channel hand-offs is paid once per group.
type job struct {
	items []source.Item
	res   chan []result
}

// groupBytes is the raw size up to which enumerated items are grouped into one job.
const groupBytes = 256 << 10

// maxGroup bounds the items of one job.
const maxGroup = 256

// result is one record of an item, or the item's final status (done set).
type result struct {
	rec       output.Record
	spec      shard.SampleSpec
	buf       *[]byte
	name      string   // the item's name
	frameDsts [][]byte // per-frame slices of buf (batch worker only)
	done      bool
	err       error
	dropped   []int64 // boxes dropped per field (mapFields); nil when none was
	count     int     // records produced, with done
	label     int64   // the item's labels, with done (for the resume journal's listing digest)
	aux       []int64 //
	extra     []byte  // the item's Extra, with done (listing digest)
}

// doneOf is item it's done marker: n records were produced, then err (nil: none).
func doneOf(it source.Item, err error, n int) result {
	return result{name: it.Name, done: true, err: err, count: n, label: it.Label, aux: it.Aux, extra: it.Extra}
}

func (b *builder) getBuf(n int) *[]byte {
	if p, ok := b.pool.Get().(*[]byte); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]byte, n)
	return &s
}

func (b *builder) worker(ctx context.Context, jobs <-chan job) error {
	if b.opts.Resizer != nil {
		return b.batchWorker(ctx, jobs)
	}
	tw := b.tspec.NewWorker()
	for j := range jobs {
		snd := sender{b: b, res: j.res}
		for _, it := range j.items {
			if b.direct != nil {
				if err := b.decodeDirect(ctx, &snd, it); err != nil {
					return err
				}
				continue
			}
			n := 0
			err := b.opts.Source.Decode(ctx, it, func(c source.Clip) error {
				r, err := b.transform(tw, c)
				if err != nil {
					return err
				}
				r.name = it.Name
				n++
				return snd.send(ctx, r)
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := snd.send(ctx, doneOf(it, err, n)); err != nil {
				return err
			}
		}
		if err := snd.flush(ctx); err != nil {
			return err
		}
		close(j.res)
	}
	return nil
}

// setDirect enables the direct path when the source can decode straight into record buffers
// and the transform is the identity, so Worker.Apply would only copy (DirectSource). It checks
// once, with Apply on a blank frame, that Apply accepts the source's frames as the direct path
// does not call it.
func (b *builder) setDirect() {
	ds, ok := b.opts.Source.(source.DirectSource)
	if !ok || b.opts.Resizer != nil || b.info.ClipLen > 0 || !b.tspec.Identity() {
		return
	}
	w, h, c := ds.FrameShape()
	fs := b.tspec.OutputSpec(w, h, c)
	if fs.Validate() != nil || int64(w)*int64(h)*int64(c) != fs.Size() {
		return
	}
	img := transforms.Image{W: w, H: h, C: c, Pix: make([]byte, w*h*c)}
	if b.tspec.NewWorker().Apply(img, make([]byte, fs.Size())) != nil {
		return
	}
	b.direct, b.directSpec, b.directSize = ds, fs, int(fs.Size())
}

// decodeDirect decodes one item of a DirectSource into a pooled record buffer and sends the
// record and the item's done marker.
func (b *builder) decodeDirect(ctx context.Context, snd *sender, it source.Item) error {
	buf := b.getBuf(b.directSize)
	c, err := b.direct.DecodeTo(ctx, it, *buf)
	if ctx.Err() != nil {
		b.pool.Put(buf)
		return ctx.Err()
	}
	n := 0
	var fields [][]byte
	var dropped []int64
	if err == nil && b.fplan != nil {
		w, h, _ := b.direct.FrameShape()
		fields, dropped, err = b.fplan.mapFields(b.tspec, c.Fields, w, h, w, h)
	}
	if err != nil {
		b.pool.Put(buf)
	} else {
		n = 1
		r := result{rec: output.Record{Data: *buf, Label: c.Label, Aux: c.Aux, Meta: c.Meta, Fields: fields}, spec: b.directSpec, buf: buf, name: it.Name, dropped: dropped}
		if err := snd.send(ctx, r); err != nil {
			return err
		}
	}
	return snd.send(ctx, doneOf(it, err, n))
}

// sender batches a job's results (records and done markers, in order) so the writer takes them
// in a few channel hand-offs instead of two per item. A batch is sent once it holds
// groupBytes of record data, so memory stays bounded as before.
type sender struct {
	b     *builder
	res   chan []result
	batch []result
	bytes int
}

func (s *sender) send(ctx context.Context, r result) error {
	if s.batch == nil {
		s.batch = s.b.getResults()
	}
	s.batch = append(s.batch, r)
	s.bytes += len(r.rec.Data)
	if s.bytes >= groupBytes || len(s.batch) >= 2*maxGroup {
		return s.flush(ctx)
	}
	return nil
}

func (s *sender) flush(ctx context.Context) error {
	if len(s.batch) == 0 {
		return nil
	}
	select {
	case s.res <- s.batch:
	case <-ctx.Done():
		for _, r := range s.batch {
			if r.buf != nil {
				s.b.pool.Put(r.buf)
			}
		}
		return ctx.Err()
	}
	s.batch, s.bytes = nil, 0
	return nil
}

// getResults returns an empty result slice from the pool; putResults returns one.
func (b *builder) getResults() []result {
	if p, ok := b.rpool.Get().(*[]result); ok {
		return (*p)[:0]
	}
	return make([]result, 0, 64)
}

func (b *builder) putResults(rs []result) {
	clear(rs)
	rs = rs[:0]
	b.rpool.Put(&rs)
}

// transform applies the transform spec to every frame of a clip, into one pooled buffer.
func (b *builder) transform(tw *transforms.Worker, c source.Clip) (result, error) {
	r, err := b.layout(c)
	if err != nil {
		return result{}, err
	}
	if b.fplan != nil {
		if r.rec.Fields, r.dropped, err = b.clipFields(&c); err != nil {
			b.pool.Put(r.buf)
			return result{}, err
		}
	}
	for i, f := range c.Frames {
		var err error
		if c.Windows != nil {
			w := c.Windows[i]
			err = tw.ApplyWindow(f, w.X, w.Y, w.FullW, w.FullH, r.frameDsts[i])
		} else {
			err = tw.Apply(f, r.frameDsts[i])
		}
		if err != nil {
			b.pool.Put(r.buf)
			return result{}, err
		}
	}
	r.frameDsts = nil
	return r, nil
}

// clipFields maps clip c's field values for its record (fieldPlan.mapFields), for its first
// frame's geometry: the pixels of its full image, and the transform's output size for it.
func (b *builder) clipFields(c *source.Clip) ([][]byte, []int64, error) {
	fw, fh := fullSize(c, 0)
	ow, oh, err := b.tspec.FrameSize(fw, fh)
	if err != nil {
		return nil, nil, err
	}
	return b.fplan.mapFields(b.tspec, c.Fields, fw, fh, ow, oh)
}
