package pipeline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/packer-dev/packer/shard"
)

// ShardName returns the file name of shard k (FORMAT.md, "Dataset").
func ShardName(k int) string { return fmt.Sprintf("shard-%05d.pks", k) }

// shardOutput writes the native shard format, starting a new shard when the next record would
// take the current shard's data section past the byte budget.
type shardOutput struct {
	cfg   OutputConfig
	files []shard.FileEntry
	next  int64 // first record of the current shard

	sink *sink
	w    *shard.Writer
	name string
	err  error
	sync syncer
}

// NewShardOutput returns the Output for --format shards.
func NewShardOutput(cfg OutputConfig) (Output, error) {
	if cfg.ShardSize <= 0 {
		cfg.ShardSize = DefaultShardSize
	}
	return &shardOutput{cfg: cfg}, nil
}

func (o *shardOutput) open() error {
	k := len(o.files)
	o.name = ShardName(k)
	sk, err := newSink(filepath.Join(o.cfg.Dir, o.name+".tmp"))
	if err != nil {
		return err
	}
	o.sink = sk
	o.w, err = shard.NewWriter(sk, shard.WriterOptions{
		Sample: o.cfg.Sample, Label: o.cfg.Label, ShardIndex: k, HasMeta: o.cfg.HasMeta,
		Meta: map[string]any{"dataset": o.cfg.Meta},
	})
	return err
}

// finish completes the current shard: index and footer, then, in the background, fsync,
// re-open and check, and rename to the final name.
func (o *shardOutput) finish() error {
	if err := o.w.Close(); err != nil {
		return err
	}
	sum, err := o.sink.finish()
	if err != nil {
		return err
	}
	f, name, n, size := o.sink.f, o.name, o.w.Len(), o.w.Size()
	o.files = append(o.files, shard.FileEntry{Path: name, Size: size, SHA256: sum, Records: n, FirstRecord: o.next})
	o.next += n
	o.w, o.sink = nil, nil
	dir := o.cfg.Dir
	o.sync.run(func() error { return commitShard(f, dir, name, n) })
	return nil
}

// commitShard syncs a finished shard file, re-reads its header, index and footer, and renames it
// (shard.CommitFile; Close syncs the directory once for all shards).
func commitShard(f *os.File, dir, name string, n int64) error {
	return shard.CommitFile(f, filepath.Join(dir, name), func(f *os.File) error {
		r, err := shard.Open(f.Name())
		if err != nil {
			return fmt.Errorf("re-read the shard just written: %w", err)
		}
		got := int64(r.Len())
		if err := r.Close(); err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("shard %s: re-read %d records, wrote %d", name, got, n)
		}
		return nil
	})
}

func (o *shardOutput) Write(r Record) error {
	if o.err != nil {
		return o.err
	}
	if o.w != nil && o.w.Len() > 0 && o.w.DataSize()+int64(len(r.Data)) > o.cfg.ShardSize {
		if o.err = o.finish(); o.err != nil {
			return o.err
		}
	}
	if o.w == nil {
		if o.err = o.open(); o.err != nil {
			return o.err
		}
	}
	o.err = o.w.AppendShape(r.Data, r.Shape, r.Label, r.Aux, r.Meta)
	return o.err
}

func (o *shardOutput) Close() ([]shard.FileEntry, error) {
	if o.err != nil {
		return nil, o.err
	}
	if o.w != nil {
		if o.err = o.finish(); o.err != nil {
			return nil, o.err
		}
	}
	if o.err = o.sync.wait(); o.err != nil {
		return nil, o.err
	}
	if err := shard.SyncDir(o.cfg.Dir); err != nil {
		return nil, err
	}
	if o.files == nil {
		o.files = []shard.FileEntry{}
	}
	return o.files, nil
}

func (o *shardOutput) Abort() {
	if o.sink != nil {
		o.sink.abort()
	}
	_ = o.sync.wait()
	for _, fe := range o.files {
		os.Remove(filepath.Join(o.cfg.Dir, fe.Path))
	}
	o.err = errors.New("output aborted")
}
