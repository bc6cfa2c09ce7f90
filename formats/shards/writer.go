package shards

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// Entry is the output format entry of --format shards, for the command's table of formats.
// verify checks shard files itself (header, index, footer and checksums), so Check is nil.
var Entry = output.Entry{
	Name:    shard.FormatShards,
	New:     New,
	Version: Version,
}

// DefaultShardSize is the default byte budget of one shard's data section.
const DefaultShardSize = 256 << 20

// ShardName returns the file name of shard k (FORMAT.md, "Dataset").
func ShardName(k int) string { return fmt.Sprintf("shard-%05d.pks", k) }

// Version is the manifest's format_version of a dataset of sample spec spec: the highest shard
// format version among its shards (FORMAT.md, Versioning). Shards of a variable-size spec are
// version 2, all others version 1.
func Version(spec shard.SampleSpec) int {
	if spec.Fixed() {
		return 1
	}
	return shard.Version
}

// shardOutput writes the native shard format, starting a new shard when the next record would
// take the current shard's data section past the byte budget.
type shardOutput struct {
	cfg   output.Config
	files []shard.FileEntry
	next  int64 // first record of the current shard

	sink *sink
	w    *shard.Writer
	name string
	err  error
	sync syncer

	cached bool // shards opened from now on are written through the page cache (WriteFrom)
}

// New returns the Output of --format shards (a ShardSize of 0 means DefaultShardSize).
func New(cfg output.Config) (output.Output, error) {
	if cfg.ShardSize <= 0 {
		cfg.ShardSize = DefaultShardSize
	}
	return &shardOutput{cfg: cfg}, nil
}

func (o *shardOutput) open() error {
	k := len(o.files)
	o.name = ShardName(k)
	sk, err := newSinkDirect(o.cfg.Dir, o.name, !o.cached)
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
	p, name, n, size := o.sink.p, o.name, o.w.Len(), o.w.Size()
	o.files = append(o.files, shard.FileEntry{Path: name, Size: size, SHA256: sum, Records: n, FirstRecord: o.next})
	o.next += n
	o.w, o.sink = nil, nil
	o.sync.run(func() error { return commitShard(p, name, n) })
	return nil
}

// commitShard syncs a finished shard file, re-reads its header, index and footer, and renames it
// (shard.Pending.Commit; Close syncs the directory once for all shards).
func commitShard(p *shard.Pending, name string, n int64) error {
	return p.Commit(func(f *os.File) error {
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

// Format reports the format name and the version of its shards (Version).
func (o *shardOutput) Format() (string, int) { return shard.FormatShards, Version(o.cfg.Sample) }

func (o *shardOutput) Write(r output.Record) error {
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
