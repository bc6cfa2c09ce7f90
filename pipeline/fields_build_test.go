package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/output/npy"
	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
	"github.com/packer-dev/packer/verify"
)

// readFields returns every record of the shard dataset in dir: its sample bytes and field
// values.
func readFields(t *testing.T, dir string) (samples [][]byte, fields [][][]byte) {
	t.Helper()
	ds, err := shard.OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for i := int64(0); i < ds.Len(); i++ {
		s, j := ds.Locate(i)
		r, err := ds.Shard(s)
		if err != nil {
			t.Fatal(err)
		}
		sample, vals, err := r.RecordFields(j)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		samples = append(samples, sample)
		fields = append(fields, vals)
	}
	return samples, fields
}

// TestBuildFields: a source's fields reach the shards and the manifest (format_version 3, the
// schema), each record's values as the source gave them when the transform does not move
// pixels, whatever the workers or the device path (a BatchResizer); an input whose mask is not
// its image's size is skipped with a reason naming the field.
func TestBuildFields(t *testing.T) {
	tmp := t.TempDir()
	src := func() *fieldSource {
		return &fieldSource{n: 30, bad: map[int]bool{7: true}, badMask: map[int]bool{11: true}}
	}
	var outs []string
	for _, c := range []struct {
		name    string
		workers int
		batched bool
	}{{"w1", 1, false}, {"w3", 3, false}, {"batch", 2, true}} {
		out := filepath.Join(tmp, c.name)
		sum, err := build(t, src(), out, func(o *Options) {
			o.Workers, o.ShardSize = c.workers, 1500
			o.Transform = transforms.Spec{DType: transforms.Float32}.MustCompile()
			if c.batched {
				o.Resizer = &cpuBatch{spec: o.Transform}
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		outs = append(outs, out)
		m := sum.Manifest
		if m.FormatVersion != 3 || !reflect.DeepEqual(m.Fields, fieldSchema) || m.Count != 28 || len(m.Files) < 2 || m.BoxesDropped != nil {
			t.Fatalf("%s: format_version %d, fields %+v, %d records, %d files, boxes_dropped %v", c.name, m.FormatVersion, m.Fields, m.Count, len(m.Files), m.BoxesDropped)
		}
		if len(m.Skipped) != 2 || m.Skipped[1].Input != "img-011" || !strings.Contains(m.Skipped[1].Reason, "field mask") {
			t.Fatalf("%s: skipped %+v", c.name, m.Skipped)
		}
	}
	for _, o := range outs[1:] {
		if err := sameTree(outs[0], o); err != nil {
			t.Fatalf("%s: %v", filepath.Base(o), err)
		}
	}
	samples, fields := readFields(t, outs[0])
	k := 0
	for i := 0; i < 30; i++ {
		if i == 7 || i == 11 {
			continue
		}
		w, h, vals := fieldValues(i)
		if len(samples[k]) != w*h*3*4 {
			t.Fatalf("record %d: %d sample bytes for %dx%d float32", k, len(samples[k]), w, h)
		}
		for f, v := range vals {
			want := v.Bytes
			if v.Image != nil {
				want = v.Image.Pix
			}
			if !bytes.Equal(fields[k][f], want) {
				t.Fatalf("record %d (img-%03d) field %s: %v, want %v", k, i, fieldSchema[f].Name, fields[k][f], want)
			}
		}
		k++
	}
}

// TestBuildFieldsClipsRefused: a source of clips with fields is refused before anything is
// written.
func TestBuildFieldsClipsRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	_, err := build(t, clipFieldSource{&fieldSource{n: 2}}, out, nil)
	if !errors.Is(err, ErrFieldsClips) {
		t.Fatalf("err = %v, want ErrFieldsClips", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused build left %s: %v", out, err)
	}
}

// clipFieldSource declares clips of two frames, with fields.
type clipFieldSource struct{ *fieldSource }

func (s clipFieldSource) Info() source.SourceInfo {
	info := s.fieldSource.Info()
	info.ClipLen = 2
	return info
}

// TestBuildFieldsResumed: a build with fields stopped after some shards were checkpointed
// and resumed writes the bytes of the uninterrupted build, boxes_dropped included (the journal
// carries it): stopped by an interruption (its output aborted, the checkpoint kept), or killed
// (the staging folder as it was at that moment, copied while the writer waits, put back).
func TestBuildFieldsResumed(t *testing.T) {
	tmp := t.TempDir()
	whole := filepath.Join(tmp, "whole")
	newSrc := func() *fieldSource { return &fieldSource{n: 40, badMask: map[int]bool{3: true}} }
	mod := func(o *Options) { o.Workers, o.ShardSize, o.Transform = 2, 1200, cropSpec.MustCompile() }
	sum, err := build(t, newSrc(), whole, mod)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Manifest.BoxesDropped["boxes"] == 0 {
		t.Fatal("no box dropped: the test needs some before and after the checkpoint")
	}
	for _, killed := range []bool{false, true} {
		out := filepath.Join(tmp, fmt.Sprint("out-", killed))
		staging, snap := out+StagingSuffix, filepath.Join(tmp, fmt.Sprint("snap-", killed))
		ctx, cancel := context.WithCancel(context.Background())
		opts := Options{Source: newSrc(), Output: shards.Entry, Out: out}
		mod(&opts)
		opts.Progress = func(items, _, _, _ int64) {
			if items != 25 {
				return
			}
			if killed {
				copyDir(t, staging, snap)
			}
			cancel()
		}
		var kept *CheckpointKeptError
		_, err := Build(ctx, opts)
		cancel()
		if !errors.As(err, &kept) {
			t.Fatalf("interrupted build: %v, want a kept checkpoint", err)
		}
		if killed {
			if err := os.RemoveAll(staging); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(snap, staging); err != nil {
				t.Fatal(err)
			}
		}
		sum, err = build(t, newSrc(), out, func(o *Options) { mod(o); o.Resume = true })
		if err != nil {
			t.Fatalf("killed %v: %v", killed, err)
		}
		if sum.Resumed == nil || sum.Resumed.Records == 0 {
			t.Fatalf("killed %v: the build did not resume from a checkpoint: %+v", killed, sum.Resumed)
		}
		if err := sameTree(whole, out); err != nil {
			t.Fatalf("killed %v: %v", killed, err)
		}
	}
}

// copyDir copies the regular files of the folder src into a new folder dst, leaving out the
// ones that are gone by the time they are read (renamed or removed meanwhile, as a kill finds
// them).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// mergeFields builds src in n parts for the final format final and merges them into a folder
// of tmp, returning it.
func mergeFields(t *testing.T, tmp string, n int, final output.Entry, newSrc func() source.Source, mod func(*Options)) string {
	t.Helper()
	var dirs []string
	for i := 0; i < n; i++ {
		d := filepath.Join(tmp, fmt.Sprintf("part%d", i))
		if _, err := build(t, newSrc(), d, func(o *Options) {
			mod(o)
			o.Part = &Part{Index: i, Count: n, Final: final, FinalShardSize: o.ShardSize}
		}); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	parts, err := ReadParts(dirs, nil)
	if err != nil {
		t.Fatal(err)
	}
	merged := filepath.Join(tmp, "merged")
	_, err = Merge(context.Background(), parts, MergeOptions{Output: final, Out: merged,
		CheckPart: func(ctx context.Context, dir string, tee func(shard.FileEntry) io.Writer) ([]string, error) {
			rep, err := verify.Dir(ctx, dir, verify.Options{Tee: tee, Strict: true}, nil)
			if err != nil {
				return nil, err
			}
			var faults []string
			for _, f := range rep.Faults {
				faults = append(faults, f.String())
			}
			return faults, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return merged
}

// TestPartsMergeFields: a build with fields in parts, merged, is byte for byte the one-machine
// build, manifest included (boxes_dropped summed over the parts), as shards and as npy (whose
// records the merge writes one by one, their fields split from the part's records).
func TestPartsMergeFields(t *testing.T) {
	for _, final := range []output.Entry{shards.Entry, npy.Entry} {
		tmp := t.TempDir()
		newSrc := func() source.Source {
			return &fieldSource{n: 25, bad: map[int]bool{4: true}, badMask: map[int]bool{20: true}}
		}
		mod := func(o *Options) { o.Workers, o.ShardSize, o.Transform = 2, 900, cropSpec.MustCompile() }
		whole := filepath.Join(tmp, "whole")
		sum, err := build(t, newSrc(), whole, func(o *Options) { mod(o); o.Output = final })
		if err != nil {
			t.Fatal(err)
		}
		if sum.Manifest.BoxesDropped["boxes"] == 0 || len(sum.Manifest.Fields) == 0 {
			t.Fatalf("%s: fields %v, boxes_dropped %v", final.Name, sum.Manifest.Fields, sum.Manifest.BoxesDropped)
		}
		merged := mergeFields(t, tmp, 3, final, newSrc, mod)
		if err := sameTree(whole, merged); err != nil {
			t.Fatalf("%s: %v", final.Name, err)
		}
	}
}

// cropSpec resizes the shorter side to 8 and crops 6×5: fieldSource's boxes near the edges
// are left with no area and dropped.
var cropSpec = transforms.Spec{Resize: 8, CropW: 6, CropH: 5}

// TestBuildFieldsMapped: with a resize and crop, each record's boxes are MapBoxes of the
// source's, its categories the rows of the boxes kept, its mask MapMask of the source's, and
// every other value the source's; the manifest counts the boxes dropped. The device path (a
// BatchResizer) maps them the same, on the CPU.
func TestBuildFieldsMapped(t *testing.T) {
	tmp := t.TempDir()
	tc := cropSpec.MustCompile()
	var outs []string
	for _, batched := range []bool{false, true} {
		out := filepath.Join(tmp, fmt.Sprint(batched))
		sum, err := build(t, &fieldSource{n: 24}, out, func(o *Options) {
			o.Workers, o.ShardSize, o.Transform = 2, 2000, tc
			if batched {
				o.Resizer = &cpuBatch{spec: tc}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
		if sum.Manifest.Count != 24 {
			t.Fatalf("%d records, skipped %+v", sum.Manifest.Count, sum.Manifest.Skipped)
		}
	}
	if err := sameTree(outs[0], outs[1]); err != nil {
		t.Fatalf("the BatchResizer path: %v", err)
	}
	m, err := shard.ReadManifest(outs[0])
	if err != nil {
		t.Fatal(err)
	}
	_, fields := readFields(t, outs[0])
	var dropped int64
	for i := 0; i < 24; i++ {
		w, h, vals := fieldValues(i)
		in := shard.FieldFloat32s(vals[4].Bytes)
		boxes, kept, err := tc.MapBoxes(in, w, h)
		if err != nil {
			t.Fatal(err)
		}
		dropped += int64(len(in)/4 - len(kept))
		if got := shard.FieldFloat32s(fields[i][4]); !reflect.DeepEqual(got, boxes) && len(got)+len(boxes) > 0 {
			t.Fatalf("record %d boxes %v, want %v", i, got, boxes)
		}
		cats := shard.FieldInt64s(vals[3].Bytes)
		var want []int64
		for _, k := range kept {
			want = append(want, cats[k])
		}
		if got := shard.FieldInt64s(fields[i][3]); !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("record %d categories %v, want %v (kept rows %v)", i, got, want, kept)
		}
		mask, mw, mh, err := tc.MapMask(*vals[5].Image)
		if err != nil || mw != 6 || mh != 5 || !bytes.Equal(fields[i][5], mask) {
			t.Fatalf("record %d mask %v, want %v (%dx%d, %v)", i, fields[i][5], mask, mw, mh, err)
		}
		for _, k := range []int{0, 1, 2, 6} {
			if !bytes.Equal(fields[i][k], vals[k].Bytes) {
				t.Fatalf("record %d field %s changed: %v, want %v", i, fieldSchema[k].Name, fields[i][k], vals[k].Bytes)
			}
		}
	}
	if dropped == 0 || !reflect.DeepEqual(m.BoxesDropped, map[string]int64{"boxes": dropped}) {
		t.Fatalf("boxes_dropped %v, want %d (the test needs some)", m.BoxesDropped, dropped)
	}
}
