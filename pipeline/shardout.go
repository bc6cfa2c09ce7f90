package pipeline

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
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

	f    *os.File
	bw   *bufio.Writer
	h    hash.Hash
	w    *shard.Writer
	name string
	err  error
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
	f, err := os.Create(filepath.Join(o.cfg.Dir, o.name+".tmp"))
	if err != nil {
		return err
	}
	o.f = f
	o.h = sha256.New()
	o.bw = bufio.NewWriterSize(io.MultiWriter(f, o.h), 4<<20)
	o.w, err = shard.NewWriter(o.bw, shard.WriterOptions{
		Sample: o.cfg.Sample, Label: o.cfg.Label, ShardIndex: k, HasMeta: o.cfg.HasMeta,
		Meta: map[string]any{"dataset": o.cfg.Meta},
	})
	return err
}

// finish completes the current shard: index and footer, flush, re-open and check, fsync, rename.
func (o *shardOutput) finish() error {
	if err := o.w.Close(); err != nil {
		return err
	}
	if err := o.bw.Flush(); err != nil {
		return err
	}
	if err := o.f.Sync(); err != nil {
		return err
	}
	tmp := o.f.Name()
	if err := o.f.Close(); err != nil {
		return err
	}
	o.f = nil
	r, err := shard.Open(tmp)
	if err != nil {
		return fmt.Errorf("re-read the shard just written: %w", err)
	}
	n := int64(r.Len())
	if err := r.Close(); err != nil {
		return err
	}
	if n != o.w.Len() {
		return fmt.Errorf("shard %s: re-read %d records, wrote %d", o.name, n, o.w.Len())
	}
	final := filepath.Join(o.cfg.Dir, o.name)
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	o.files = append(o.files, shard.FileEntry{
		Path: o.name, Size: o.w.Size(), SHA256: hex.EncodeToString(o.h.Sum(nil)),
		Records: n, FirstRecord: o.next,
	})
	o.next += n
	o.w = nil
	return nil
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
	o.err = o.w.Append(r.Data, r.Label, r.Aux, r.Meta)
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
	if err := syncDir(o.cfg.Dir); err != nil {
		return nil, err
	}
	if o.files == nil {
		o.files = []shard.FileEntry{}
	}
	return o.files, nil
}

func (o *shardOutput) Abort() {
	if o.f != nil {
		name := o.f.Name()
		o.f.Close()
		os.Remove(name)
	}
	for _, fe := range o.files {
		os.Remove(filepath.Join(o.cfg.Dir, fe.Path))
	}
	o.err = errors.New("output aborted")
}
