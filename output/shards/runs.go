package shards

import "github.com/packer-dev/packer/shard"

// WriteFrom writes records [i, j) of src, whose bytes are data (src.DataRange(i, j)), as Write
// of each of them in turn would, shard boundaries included, but in runs (shard.Writer.AppendFrom):
// merge copies the records of its parts through it.
//
// The shards WriteFrom opens are written through the page cache, not with O_DIRECT: a copy is
// bound by the disk, and the kernel's writeback, started every 32 MiB as the shard is written
// (sink.wbLoop), keeps the disk busier than O_DIRECT writes one chunk at a time do, which
// ext4 serializes (docs/bench/merge.txt). They are committed the same way (fsync, re-read
// check, rename).
func (o *shardOutput) WriteFrom(src *shard.Reader, i, j int, data []byte) error {
	if o.err != nil {
		return o.err
	}
	o.cached = true
	fixed := !src.VarSize()
	for i < j {
		if o.w != nil && o.w.Len() > 0 && o.w.DataSize()+src.RecordLen(i) > o.cfg.ShardSize {
			if o.err = o.finish(); o.err != nil {
				return o.err
			}
		}
		if o.w == nil {
			if o.err = o.open(); o.err != nil {
				return o.err
			}
		}
		// The records that fit in this shard: the first always does (Write's rule).
		k := i + 1
		if fixed {
			k = min(j, i+max(1, int((o.cfg.ShardSize-o.w.DataSize())/src.RecordSize())))
		} else {
			for size := o.w.DataSize() + src.RecordLen(i); k < j && size+src.RecordLen(k) <= o.cfg.ShardSize; k++ {
				size += src.RecordLen(k)
			}
		}
		_, n := src.DataRange(i, k)
		if o.err = o.w.AppendFrom(src, i, k, data[:n]); o.err != nil {
			return o.err
		}
		data, i = data[n:], k
	}
	return nil
}
