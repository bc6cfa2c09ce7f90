package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync/atomic"

	"github.com/packer-dev/packer/shard"
)

// scanShard checks one shard's structure and checksums, and that its header agrees with the
// manifest (sample spec, record count, classes). opts.Hash receives the whole file. It reports
// whether the scan read the whole file (no I/O error).
func scanShard(path string, fe shard.FileEntry, m *shard.Manifest, opts shard.ScanOptions, add func(Fault), records *atomic.Int64) bool {
	err := shard.ScanFile(path, opts, func(ce *shard.CorruptionError) {
		kind := KindStructure
		if isChecksum(ce) {
			kind = KindChecksum
		}
		flt := Fault{File: fe.Path, Kind: kind, First: ce.Record, Count: ce.Records, Offset: ce.Offset, Message: ce.Err.Error()}
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
	f, err := os.Open(path)
	if err != nil {
		add(Fault{File: fe.Path, Kind: KindIO, First: -1, Offset: -1, Message: err.Error()})
		return true
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		add(Fault{File: fe.Path, Kind: KindIO, First: -1, Offset: -1, Message: err.Error()})
		return true
	}
	r, err := shard.NewReaderOptions(f, st.Size(), fe.Path, shard.ReaderOptions{})
	if err != nil {
		return true // Scan has reported why
	}
	records.Add(int64(r.Len()))
	bad := func(format string, args ...any) {
		add(Fault{File: fe.Path, Kind: KindManifest, First: -1, Offset: -1, Message: fmt.Sprintf(format, args...)})
	}
	if int64(r.Len()) != fe.Records {
		bad("shard holds %d records, manifest says %d", r.Len(), fe.Records)
	}
	if !reflect.DeepEqual(r.Spec(), m.Sample) {
		bad("shard sample spec %+v differs from the manifest's %+v", r.Spec(), m.Sample)
	}
	if ds, ok := r.Meta()["dataset"].(map[string]any); ok {
		var classes []string
		if raw, err := json.Marshal(ds["classes"]); err == nil {
			_ = json.Unmarshal(raw, &classes)
		}
		if len(classes) == 0 {
			classes = nil
		}
		mc := m.Classes
		if len(mc) == 0 {
			mc = nil
		}
		if !reflect.DeepEqual(classes, mc) {
			bad("shard class names differ from the manifest's")
		}
	}
	return true
}

func isChecksum(ce *shard.CorruptionError) bool {
	return errors.Is(ce.Err, shard.ErrChecksum)
}
