package gpu

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/packer-dev/packer/transforms"
)

// stageSources copies the region of each image that its kept pixels read (planBatch's
// regions: the rows under the vertical support, the columns under the horizontal one) to its
// place in the batch's host staging (hostOffs), row by row. Images that go up straight from
// their own pinned memory (direct) are not copied.
func (p *batchPlan) stageSources(imgs []transforms.Image, src []byte) {
	for i, im := range imgs {
		if p.direct[i] {
			continue
		}
		hostStaged.Add(1)
		r, C := p.regions[i], im.C
		row := r.w * C
		o := p.hostOffs[i]
		for y := 0; y < r.h; y++ {
			s := ((r.y+y)*im.W + r.x) * C
			copy(src[o+y*row:o+(y+1)*row], im.Pix[s:s+row])
		}
	}
}

// hostStaged counts the images stageSources has copied, for the tests of frames that go up
// without that copy.
var hostStaged atomic.Int64

// upload is one asynchronous host-to-device copy of a batch's sources: n bytes from host
// (the slot's staging, or a direct image's own pinned memory) to srcOffs-relative offset dev.
type upload struct {
	host []byte
	dev  int
}

// uploads lists the copies that bring the batch's source regions to the device: one per
// direct image (its rows, contiguous in its pinned memory), and one per run of consecutive
// staged images (contiguous both in staging and on the device), so a batch with no direct
// image makes the single upload of the whole staging it made before.
func (p *batchPlan) uploads(imgs []transforms.Image, staging []byte) []upload {
	var ups []upload
	for i := 0; i < len(imgs); {
		n := p.regionBytes(i)
		if n == 0 {
			i++
			continue
		}
		if p.direct[i] {
			im, r := imgs[i], p.regions[i]
			s := r.y * im.W * im.C
			ups = append(ups, upload{host: im.Pix[s : s+n], dev: p.srcOffs[i]})
			i++
			continue
		}
		j, total := i+1, n
		for j < len(imgs) && !p.direct[j] {
			total += p.regionBytes(j)
			j++
		}
		ups = append(ups, upload{host: staging[p.hostOffs[i] : p.hostOffs[i]+total], dev: p.srcOffs[i]})
		i = j
	}
	return ups
}

// regionBytes is the uploaded bytes of image i.
func (p *batchPlan) regionBytes(i int) int {
	r := p.regions[i]
	return r.w * r.h * p.channels[i]
}

// scatter copies each image's record from the batch's output buffer to dsts[i], which must
// be exactly the record's size.
func (p *batchPlan) scatter(out []byte, dsts [][]byte) error {
	for i := range p.dstOffs {
		if len(dsts[i]) != p.dstSizes[i] {
			return fmt.Errorf("gpu: destination %d is %d bytes, want %d", i, len(dsts[i]), p.dstSizes[i])
		}
		copy(dsts[i], out[p.dstOffs[i]:p.dstOffs[i]+p.dstSizes[i]])
	}
	return nil
}

// checkDsts verifies the destination sizes before any work.
func (p *batchPlan) checkDsts(dsts [][]byte) error {
	if len(dsts) != len(p.dstOffs) {
		return fmt.Errorf("gpu: %d destinations for %d images", len(dsts), len(p.dstOffs))
	}
	for i := range p.dstOffs {
		if len(dsts[i]) != p.dstSizes[i] {
			return fmt.Errorf("gpu: destination %d is %d bytes, want %d", i, len(dsts[i]), p.dstSizes[i])
		}
	}
	return nil
}

// putInt32s writes v little-endian into b (the device's byte order).
func putInt32s(b []byte, v []int32) {
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
}

// putUint32s writes v little-endian into b.
func putUint32s(b []byte, v []uint32) {
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
}

// recordPool is the weightPool of planning outside the device goroutine: it numbers the
// distinct weights a batch needs, and placeWeights later patches the job table with their
// real offsets in the device pool.
type recordPool struct {
	list []*transforms.Weights
	at   map[weightKey]int32
}

func (r *recordPool) place(w *transforms.Weights) (int32, int32, error) {
	if err := checkWeights(w); err != nil {
		return 0, 0, err
	}
	key := weightKey{w.InSize, w.OutSize, w.Filter}
	if i, ok := r.at[key]; ok {
		return i, i, nil
	}
	if r.at == nil {
		r.at = make(map[weightKey]int32)
	}
	i := int32(len(r.list))
	r.list = append(r.list, w)
	r.at[key] = i
	return i, i, nil
}

// placeWeights places the recorded weights in pool and rewrites the job table's weight
// offsets from recordPool indices to pool offsets.
func (p *batchPlan) placeWeights(rec *recordPool, pool *hostPool) error {
	offs := make([][2]int32, len(rec.list))
	for i, w := range rec.list {
		b, c, err := pool.place(w)
		if err != nil {
			return err
		}
		offs[i] = [2]int32{b, c}
	}
	for j := 0; j+jobWords <= len(p.jobs); j += jobWords {
		job := p.jobs[j : j+jobWords]
		x, y := offs[job[jXB]], offs[job[jYB]]
		job[jXB], job[jXC] = x[0], x[1]
		job[jYB], job[jYC] = y[0], y[1]
	}
	return nil
}
