package main

import (
	"context"
	"time"

	"github.com/packer-dev/packer/shard"
)

// readerPass reads the whole dataset once in batches, as a trainer would.
func readerPass(ctx context.Context, o *benchOptions, m *shard.Manifest) (benchResult, error) {
	d, err := openShards(o.Dir, m)
	if err != nil {
		return benchResult{}, err
	}
	defer d.Close()
	start := time.Now()
	var res benchResult
	buf := make([]byte, 0)
	for _, r := range d.readers {
		for i := 0; i < r.Len(); i += o.Batch {
			j := min(i+o.Batch, r.Len())
			off, n := r.DataRange(i, j)
			_ = off
			if cap(buf) < int(n) {
				buf = make([]byte, n)
			}
			b, err := r.ReadRecords(i, j, buf[:n])
			if err != nil {
				return res, err
			}
			res.bytes += int64(len(b))
			res.records += int64(j - i)
		}
	}
	res.seconds = time.Since(start).Seconds()
	return res, nil
}
