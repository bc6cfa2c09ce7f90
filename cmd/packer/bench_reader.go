package main

import (
	"context"
	"time"

	"github.com/packer-dev/packer/shard"
)

// readerPass reads the whole dataset once with the streaming batch loader, as a trainer reads
// one epoch: the time runs from creating the loader to closing it.
func readerPass(ctx context.Context, o *benchOptions, d *shard.Dataset) (benchResult, error) {
	start := time.Now()
	ld, err := d.NewLoader(shard.LoaderOptions{BatchSize: o.Batch, Shuffle: o.Shuffle, Order: o.Order, Direct: o.Cold, Lock: true,
		ReadSize: o.ReadSize, Prefetch: o.Prefetch, Depth: o.Depth, SkipCRC: o.NoCRC})
	if err != nil {
		return benchResult{}, err
	}
	defer ld.Close()
	var res benchResult
	for ld.Next() {
		b := ld.Batch()
		res.bytes += int64(len(b.Data))
		res.records += int64(len(b.Labels))
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	if err := ld.Err(); err != nil {
		return res, err
	}
	if err := ld.Close(); err != nil {
		return res, err
	}
	res.seconds = time.Since(start).Seconds()
	return res, nil
}
