package verify

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/shard"
)

// scanShard checks one shard's structure and checksums, and that its header agrees with the
// manifest (sample spec, label spec, record count, the dataset meta: packer version, source,
// transform, classes, and the index's SHA-256 where the manifest pins it), and adds its labels and format version to sh. opts.Hash receives the whole file. It reports
// whether the scan read the whole file (no I/O error).
func scanShard(ctx context.Context, s *store, fe shard.FileEntry, m *shard.Manifest, opts shard.ScanOptions, add func(Fault), records *atomic.Int64, sh *shardTally) bool {
	err := s.scan(ctx, fe.Path, opts, func(ce *shard.CorruptionError) {
		kind := KindStructure
		if isChecksum(ce) {
			kind = KindChecksum
		}
		flt := Fault{File: fe.Path, Kind: kind, First: fe.FirstRecord + ce.Record, Count: ce.Records, ShardFirst: ce.Record,
			Offset: ce.Offset, Message: ce.Err.Error()}
		if ce.Record < 0 {
			flt.First, flt.Count = -1, 0
		}
		add(flt)
	})
	if err != nil {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			add(Fault{File: fe.Path, Kind: KindIO, First: -1, Offset: -1, Message: err.Error()})
		}
		return false
	}
	// The header, footer and index again, for the record count, spec and classes: a few small
	// reads (the index is about 8 bytes a record), through the page cache.
	f, err := s.b.Open(ctx, fe.Path)
	if err != nil {
		add(Fault{File: fe.Path, Kind: KindIO, First: -1, Offset: -1, Message: err.Error()})
		return true
	}
	defer f.Close()
	r, err := shard.NewReaderOptions(f, f.Size(), fe.Path, shard.ReaderOptions{})
	if err != nil {
		return true // Scan has reported why
	}
	records.Add(int64(r.Len()))
	bad := func(format string, args ...any) {
		add(Fault{File: fe.Path, Kind: KindManifest, First: -1, Offset: -1, Message: fmt.Sprintf(format, args...)})
	}
	if fe.IndexSHA256 != "" && r.IndexSHA256() != fe.IndexSHA256 {
		add(Fault{File: fe.Path, Kind: KindSHA256, First: -1, Offset: r.IndexOffset(), Message: fmt.Sprintf(
			"index SHA-256 %s, the manifest's index_sha256 says %s: the readers refuse this shard (a shard of another build with the same names and options, a changed file, or an edited manifest)",
			r.IndexSHA256(), fe.IndexSHA256)})
	}
	if int64(r.Len()) != fe.Records {
		bad("shard holds %s, manifest says %d", humanize.Count(r.Len(), "record"), fe.Records)
	}
	if !reflect.DeepEqual(r.Spec(), m.Sample) {
		bad("shard sample spec %+v differs from the manifest's %+v", r.Spec(), m.Sample)
	}
	if ls, ml := r.LabelSpec(), m.Label; ls.DType != ml.DType || !slices.Equal(ls.Aux, ml.Aux) && len(ls.Aux)+len(ml.Aux) > 0 {
		bad("shard label spec (dtype %q, aux %q) differs from the manifest's (dtype %q, aux %q)", ls.DType, ls.Aux, ml.DType, ml.Aux)
	}
	if !shard.FieldsEqual(r.Fields(), m.Fields) {
		bad("shard fields %s differ from the manifest's %s", shard.FieldsString(r.Fields()), shard.FieldsString(m.Fields))
	}
	// Text and json values: their lengths are checked with the index, their contents here.
	if err := r.CheckFieldValues(func(ce *shard.CorruptionError) {
		add(Fault{File: fe.Path, Kind: KindStructure, First: fe.FirstRecord + ce.Record, Count: ce.Records, ShardFirst: ce.Record,
			Offset: ce.Offset, Message: ce.Err.Error()})
	}); err != nil {
		add(Fault{File: fe.Path, Kind: KindIO, First: -1, Offset: -1, Message: err.Error()})
		return true
	}
	if ds, ok := r.Meta()["dataset"].(map[string]any); ok {
		if diff := shard.DatasetMetaDiff(ds, m); len(diff) > 0 {
			bad("shard header's dataset %s differ from the manifest's", strings.Join(diff, ", "))
		}
	}
	var ver [2]byte
	if _, err := f.ReadAt(ver[:], 8); err != nil {
		add(Fault{File: fe.Path, Kind: KindIO, First: -1, Offset: 8, Message: err.Error()})
		return true
	}
	labels := make([]int64, r.Len())
	for i := range labels {
		labels[i] = r.Label(i)
	}
	sh.mu.Lock()
	sh.maxVersion = max(sh.maxVersion, int(binary.LittleEndian.Uint16(ver[:])))
	sh.labels.Add(fe.FirstRecord, labels)
	sh.mu.Unlock()
	return true
}

// shardTally collects, across the shards of a dataset, what is checked against the manifest
// once every shard is read: the labels (range, class_counts) and the newest format version.
type shardTally struct {
	mu         sync.Mutex
	labels     *shard.LabelTally
	maxVersion int
}

func isChecksum(ce *shard.CorruptionError) bool {
	return errors.Is(ce.Err, shard.ErrChecksum)
}
