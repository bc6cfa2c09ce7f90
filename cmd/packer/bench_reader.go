package main

import (
	"context"
	"time"

	"github.com/packer-dev/packer/shard"
)

// readerPass reads the whole dataset once with the streaming batch loader, as a trainer would.
func readerPass(ctx context.Context, o *benchOptions, m *shard.Manifest) (benchResult, error) {
	d, err := shard.OpenDataset(o.Dir)
	if err != nil {
		return benchResult{}, err
	}
	defer d.Close()
	ld, err := d.NewLoader(shard.LoaderOptions{BatchSize: o.Batch, Shuffle: o.Shuffle, Direct: o.Cold, Lock: true})
	if err != nil {
		return benchResult{}, err
	}
	defer ld.Close()
	start := time.Now()
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
	res.seconds = time.Since(start).Seconds()
	return res, nil
}
