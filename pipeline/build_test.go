package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/transforms"
)

// genSource is an in-memory source of n small grey images whose decode time varies, so workers
// finish out of order. Items listed in bad fail to decode; items in odd decode to another size;
// clips > 0 makes every item yield that many records (as a video yields clips); items in late
// fail after their first record (a video damaged part-way).
type genSource struct {
	n     int
	bad   map[int]bool
	late  map[int]bool
	odd   map[int]bool
	clips int
	delay bool
	block chan struct{}     // when set, Decode waits on it (cancellation tests)
	waits chan struct{}     // when set (buffered), Decode sends to it, if there is room, before it waits on block
	frame source.FrameShape // what Info declares; zero value: 4x3 grey frames
	raw   int               // when set, every item carries this many pre-read bytes
}

func (s *genSource) Info() source.SourceInfo {
	fr := s.frame
	if fr == (source.FrameShape{}) {
		fr = source.FrameShape{W: 4, H: 3, C: 1}
	}
	return source.SourceInfo{Kind: "gen", Classes: []string{"a", "b", "c"}, Spec: map[string]any{"kind": "gen"}, Count: int64(s.n), Frame: fr}
}

func (s *genSource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	for i := 0; i < s.n; i++ {
		it := source.Item{Seq: int64(i), Name: fmt.Sprintf("item-%03d", i), Label: int64(i % 3)}
		if i%2 == 0 {
			it.Raw = []byte{byte(i)} // exercise grouping of pre-read items
		}
		if s.raw > 0 {
			it.Raw = make([]byte, s.raw)
		}
		if err := emit(it); err != nil {
			return err
		}
	}
	return nil
}

func (s *genSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	i := int(it.Seq)
	if s.block != nil {
		select {
		case s.waits <- struct{}{}:
		default:
		}
		select {
		case <-s.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.delay {
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	}
	if s.bad[i] {
		return &source.InputError{Input: it.Name, Err: errors.New("corrupt input")}
	}
	w, h := 4, 3
	if s.odd[i] {
		w = 5
	}
	n := max(s.clips, 1)
	for c := 0; c < n; c++ {
		pix := make([]byte, w*h)
		for k := range pix {
			pix[k] = byte(i*7 + k + c)
		}
		if err := emit(source.Clip{Frames: []transforms.Image{{W: w, H: h, C: 1, Pix: pix}}, Label: it.Label}); err != nil {
			return err
		}
		if s.late[i] {
			return &source.InputError{Input: it.Name, Err: errors.New("damaged after the first clip")}
		}
	}
	return nil
}

func build(t *testing.T, src source.Source, out string, mod func(*Options)) (*Summary, error) {
	t.Helper()
	opts := Options{Source: src, Output: shards.Entry, Out: out, ShardSize: 64}
	if mod != nil {
		mod(&opts)
	}
	return Build(context.Background(), opts)
}

func TestBuildOrderAndDeterminism(t *testing.T) {
	tmp := t.TempDir()
	var manifests []string
	for _, w := range []int{1, 2, 5} {
		src := &genSource{n: 200, delay: true, bad: map[int]bool{17: true, 101: true}}
		out := filepath.Join(tmp, fmt.Sprint(w))
		sum, err := build(t, src, out, func(o *Options) { o.Workers = w })
		if err != nil {
			t.Fatal(err)
		}
		if sum.Records != 198 || sum.Skipped != 2 {
			t.Fatalf("workers %d: %d records, %d skipped; want 198, 2", w, sum.Records, sum.Skipped)
		}
		data, err := os.ReadFile(filepath.Join(out, shard.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, string(data))
		ds, err := shard.OpenDataset(out)
		if err != nil {
			t.Fatal(err)
		}
		// Records are in source order: record k comes from the k-th good item.
		k := int64(0)
		for i := 0; i < 200; i++ {
			if i == 17 || i == 101 {
				continue
			}
			rec, err := ds.Record(k)
			if err != nil {
				t.Fatal(err)
			}
			if rec[0] != byte(i*7) {
				t.Fatalf("workers %d: record %d holds item %d's data (%d), want item %d", w, k, rec[0]/7, rec[0], i)
			}
			k++
		}
		ds.Close()
	}
	for _, m := range manifests[1:] {
		if m != manifests[0] {
			t.Fatal("manifests differ between worker counts")
		}
	}
	m, _ := shard.ReadManifest(filepath.Join(tmp, "1"))
	if len(m.Skipped) != 2 || m.Skipped[0].Input != "item-017" || m.Skipped[0].Reason != "corrupt input" {
		t.Fatalf("skipped = %+v", m.Skipped)
	}
	if m.ClassCounts[0]+m.ClassCounts[1]+m.ClassCounts[2] != 198 {
		t.Fatalf("class counts %v", m.ClassCounts)
	}
}

func TestBuildOnErrorFail(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	_, err := build(t, &genSource{n: 50, bad: map[int]bool{30: true}}, out, func(o *Options) { o.OnError = OnErrorFail })
	var ie *source.InputError
	if !errors.As(err, &ie) || ie.Input != "item-030" {
		t.Fatalf("err = %v, want an InputError naming item-030", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a failed build left %s", out)
	}
	if _, err := os.Stat(out + StagingSuffix); !os.IsNotExist(err) {
		t.Fatalf("a failed build left its staging directory")
	}
}

func TestBuildMaxErrors(t *testing.T) {
	bad := map[int]bool{}
	for i := 0; i < 40; i += 3 {
		bad[i] = true
	}
	out := filepath.Join(t.TempDir(), "out")
	_, err := build(t, &genSource{n: 60, bad: bad}, out, func(o *Options) { o.MaxErrors = 5 })
	if !errors.Is(err, ErrTooManyErrors) {
		t.Fatalf("err = %v, want ErrTooManyErrors", err)
	}
}

// TestBuildOddSizeIsPacked: with no fixed size, an image of another size is packed at its own
// shape (shard format version 2), never skipped.
func TestBuildOddSizeIsPacked(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	sum, err := build(t, &genSource{n: 20, odd: map[int]bool{0: true, 7: true}, frame: source.FrameShape{C: 1}}, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := sum.Manifest
	if sum.Records != 20 || len(m.Skipped) != 0 || m.FormatVersion != 2 || !slices.Equal(m.Sample.Shape, []int{-1, -1, 1}) {
		t.Fatalf("records %d, skipped %+v, format_version %d, shape %v", sum.Records, m.Skipped, m.FormatVersion, m.Sample.Shape)
	}
	ds, err := shard.OpenDataset(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for i := range int64(20) {
		want := []int{3, 4, 1}
		if i == 0 || i == 7 {
			want = []int{3, 5, 1}
		}
		if got, err := ds.RecordShape(i); err != nil || !slices.Equal(got, want) {
			t.Fatalf("record %d: shape %v, %v, want %v", i, got, err, want)
		}
	}
}

// TestBuildRecordNotFittingSpecFails: a source that declares one frame size and decodes
// another is a bug; the build fails, it never skips the image.
func TestBuildRecordNotFittingSpecFails(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	_, err := build(t, &genSource{n: 20, odd: map[int]bool{7: true}, frame: source.FrameShape{W: 4, H: 3, C: 1}}, out, nil)
	if err == nil || !strings.Contains(err.Error(), "internal error: item-007") {
		t.Fatalf("err = %v, want an internal error naming item-007", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("output left behind: %v", err)
	}
}

// TestBuildFixedSizeStaysVersion1: a fixed-size build writes version-1 shards, as before.
func TestBuildFixedSizeStaysVersion1(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	sum, err := build(t, &genSource{n: 5, frame: source.FrameShape{W: 4, H: 3, C: 1}}, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Manifest.FormatVersion != 1 || !slices.Equal(sum.Manifest.Sample.Shape, []int{3, 4, 1}) {
		t.Fatalf("format_version %d, shape %v", sum.Manifest.FormatVersion, sum.Manifest.Sample.Shape)
	}
	r, err := shard.Open(filepath.Join(out, shards.ShardName(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Version() != 1 {
		t.Fatalf("shard version %d, want 1", r.Version())
	}
}

func TestBuildClips(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	sum, err := build(t, &genSource{n: 10, clips: 3}, out, func(o *Options) { o.Workers = 3 })
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 30 || sum.Items != 10 {
		t.Fatalf("records %d items %d, want 30 and 10", sum.Records, sum.Items)
	}
}

func TestBuildEmptySource(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	sum, err := build(t, &genSource{n: 0}, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 0 || len(sum.Manifest.Files) != 0 {
		t.Fatalf("empty build: %+v", sum.Manifest)
	}
}

func TestBuildCancel(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	src := &genSource{n: 100, block: make(chan struct{}), waits: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Build(ctx, Options{Source: src, Output: shards.Entry, Out: out, Workers: 2})
		done <- err
	}()
	// Cancelled once a decode waits, in the middle of the build.
	select {
	case <-src.waits:
	case err := <-done:
		t.Fatalf("Build returned before a decode started: %v", err)
	case <-time.After(30 * time.Second): // a guard against a hang, not a timing
		t.Fatal("no decode started")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Build did not return after cancellation")
	}
	for _, p := range []string{out, out + StagingSuffix} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("cancelled build left %s", p)
		}
	}
}

func TestBuildRefusesNonEmptyOutput(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := build(t, &genSource{n: 3}, out, nil); !errors.Is(err, ErrOutputExists) {
		t.Fatalf("err = %v, want ErrOutputExists", err)
	}
	// --force replaces a dataset (or an empty folder), never a folder of something else.
	if _, err := build(t, &genSource{n: 3}, out, func(o *Options) { o.Force = true }); !errors.Is(err, ErrOutputNotDataset) {
		t.Fatalf("--force over a folder holding no dataset: err = %v, want ErrOutputNotDataset", err)
	}
	if _, err := os.Stat(filepath.Join(out, "precious")); err != nil {
		t.Fatalf("the refused --force build lost the folder's file: %v", err)
	}
	ds := filepath.Join(t.TempDir(), "ds")
	if _, err := build(t, &genSource{n: 3}, ds, nil); err != nil {
		t.Fatal(err)
	}
	// A shard no manifest lists is packer's (an earlier build's) and goes; a file of the
	// user's in a dataset folder is refused.
	if err := os.WriteFile(filepath.Join(ds, "shard-00099.pks"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := build(t, &genSource{n: 3}, ds, func(o *Options) { o.Force = true }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ds, "shard-00099.pks")); !os.IsNotExist(err) {
		t.Fatal("--force kept the old contents")
	}
	if err := os.WriteFile(filepath.Join(ds, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := build(t, &genSource{n: 3}, ds, func(o *Options) { o.Force = true }); !errors.Is(err, ErrOutputNotDataset) || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("--force over a dataset folder holding the user's file: err = %v, want ErrOutputNotDataset naming notes.txt", err)
	}
	if _, err := os.Stat(filepath.Join(ds, "notes.txt")); err != nil {
		t.Fatalf("the refused --force build lost the user's file: %v", err)
	}
}

// cpuBatch is a BatchResizer that runs transforms.Worker, to test the batched worker path
// (grouping, skips, order) without a GPU; the gpu package tests the device itself.
type cpuBatch struct {
	spec  transforms.Compiled
	calls atomic.Int64
}

func (c *cpuBatch) Run(imgs []transforms.Image, dsts [][]byte) error {
	c.calls.Add(1)
	w := c.spec.NewWorker()
	for i := range imgs {
		if err := w.Apply(imgs[i], dsts[i]); err != nil {
			return err
		}
	}
	return nil
}

func TestBuildBatchResizerEqualsWorkers(t *testing.T) {
	tmp := t.TempDir()
	bad := map[int]bool{5: true, 40: true}
	odd := map[int]bool{33: true}
	late := map[int]bool{21: true, 60: true} // the per-worker path keeps their first clip; so must the batch path
	var manifests []string
	for _, batched := range []bool{false, true} {
		out := filepath.Join(tmp, fmt.Sprint(batched))
		rs := &cpuBatch{spec: transforms.Spec{}.MustCompile()}
		_, err := build(t, &genSource{n: 90, bad: bad, odd: odd, late: late, delay: true, clips: 2, frame: source.FrameShape{C: 1}}, out, func(o *Options) {
			o.Workers = 3
			if batched {
				o.Resizer = rs
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if batched && (rs.calls.Load() == 0 || rs.calls.Load() > 90/deviceGroup+3) {
			t.Fatalf("%d resizer calls for 90 items in groups of %d", rs.calls.Load(), deviceGroup)
		}
		data, err := os.ReadFile(filepath.Join(out, shard.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, string(data))
	}
	if manifests[0] != manifests[1] {
		t.Fatalf("batched output differs from the per-worker output:\n%s\n---\n%s", manifests[0], manifests[1])
	}
}

// directSource is a DirectSource of n 3×2 RGB images; items in bad fail to decode.
type directSource struct {
	n       int
	bad     map[int]bool
	directs atomic.Int64 // DecodeTo calls
}

func (s *directSource) Info() source.SourceInfo {
	return source.SourceInfo{Kind: "direct", Classes: []string{"a", "b"}, AuxNames: []string{"seq"}, Spec: map[string]any{"kind": "direct"}, Count: int64(s.n),
		Frame: source.FrameShape{W: 3, H: 2, C: 3}}
}

func (s *directSource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	for i := 0; i < s.n; i++ {
		raw := make([]byte, 18)
		for k := range raw {
			raw[k] = byte(i*31 + k)
		}
		if err := emit(source.Item{Seq: int64(i), Name: fmt.Sprintf("d-%03d", i), Raw: raw, Label: int64(i % 2), Aux: []int64{int64(i)}}); err != nil {
			return err
		}
	}
	return nil
}

func (s *directSource) check(it source.Item) error {
	if s.bad[int(it.Seq)] {
		return &source.InputError{Input: it.Name, Err: errors.New("bad pixels")}
	}
	return nil
}

func (s *directSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	if err := s.check(it); err != nil {
		return err
	}
	return emit(source.Clip{Frames: []transforms.Image{{W: 3, H: 2, C: 3, Pix: it.Raw}}, Label: it.Label, Aux: it.Aux})
}

func (s *directSource) FrameShape() (w, h, c int) { return 3, 2, 3 }

func (s *directSource) DecodeTo(ctx context.Context, it source.Item, pix []byte) (source.Clip, error) {
	s.directs.Add(1)
	if err := s.check(it); err != nil {
		return source.Clip{}, err
	}
	copy(pix, it.Raw)
	return source.Clip{Label: it.Label, Aux: it.Aux}, nil
}

// plainSource hides a source's DirectSource methods.
type plainSource struct{ source.Source }

// TestBuildDirectEqualsDecode checks that decoding straight into record buffers (identity
// transform, DirectSource) writes the same files, manifest and skip reasons as Decode followed
// by the transform, for any worker count, and that other transforms do not take that path.
func TestBuildDirectEqualsDecode(t *testing.T) {
	tmp := t.TempDir()
	bad := map[int]bool{3: true, 250: true, 599: true}
	read := func(out string) string {
		data, err := os.ReadFile(filepath.Join(out, shard.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	for _, spec := range []transforms.Spec{{}, {Layout: transforms.CHW}} {
		var want string
		for _, w := range []int{1, 2, 5} {
			ds := &directSource{n: 600, bad: bad}
			out := filepath.Join(tmp, fmt.Sprintf("%s-direct-%d", spec.Layout, w))
			sum, err := build(t, ds, out, func(o *Options) { o.Workers = w; o.Transform = spec.MustCompile(); o.ShardSize = 1000 })
			if err != nil {
				t.Fatal(err)
			}
			if sum.Records != 597 || sum.Skipped != 3 {
				t.Fatalf("%d records, %d skipped", sum.Records, sum.Skipped)
			}
			if got := ds.directs.Load(); (spec.Layout == transforms.HWC) != (got == 600) || (spec.Layout != transforms.HWC && got != 0) {
				t.Fatalf("layout %q: DecodeTo called %d times", spec.Layout, got)
			}
			plainOut := filepath.Join(tmp, fmt.Sprintf("%s-plain-%d", spec.Layout, w))
			if _, err := build(t, plainSource{&directSource{n: 600, bad: bad}}, plainOut, func(o *Options) { o.Workers = w; o.Transform = spec.MustCompile(); o.ShardSize = 1000 }); err != nil {
				t.Fatal(err)
			}
			got, plain := read(out), read(plainOut)
			if got != plain {
				t.Fatalf("layout %q workers %d: direct manifest differs from Decode's:\n%s\n%s", spec.Layout, w, got, plain)
			}
			if want == "" {
				want = got
			} else if got != want {
				t.Fatalf("layout %q: manifests differ between worker counts", spec.Layout)
			}
			m, _ := shard.ReadManifest(out)
			if len(m.Skipped) != 3 || m.Skipped[0].Input != "d-003" || m.Skipped[0].Reason != "bad pixels" {
				t.Fatalf("skipped = %+v", m.Skipped)
			}
		}
	}
}

// TestForceReplacesObjectStoreCopy: a local copy of a dataset packer published to an object
// store over an earlier one (its files under a generation folder, .packer-gen-<16 hex>/, which
// its manifest names) is packer's output, and --force replaces it; a generation folder holding
// a file packer does not write, a folder in it, or a folder only named like one is refused.
func TestForceReplacesObjectStoreCopy(t *testing.T) {
	if generationPrefix != s3.GenerationPrefix {
		t.Fatalf("generationPrefix %q, but the object store names generations %q", generationPrefix, s3.GenerationPrefix)
	}
	for _, name := range []string{"shard-00000.pks", "images.npy", "aux_coarse.npy", "data.h5", "manifest.json", "notes.txt"} {
		gen := filepath.Join(t.TempDir(), generationPrefix+"0123456789abcdef")
		if err := os.Mkdir(gen, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(gen, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, want := generationFolder(gen), s3.DatasetFileName(filepath.Base(gen)+"/"+name); got != want {
			t.Fatalf("a generation folder holding %s: %v, but the object store says %v", name, got, want)
		}
	}
	ds := filepath.Join(t.TempDir(), "ds")
	copyOf := func() string {
		t.Helper()
		if _, err := build(t, &genSource{n: 3}, ds, func(o *Options) { o.Force = true }); err != nil {
			t.Fatal(err)
		}
		gen := filepath.Join(ds, ".packer-gen-0123456789abcdef")
		if err := os.Mkdir(gen, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(ds, "shard-00000.pks"), filepath.Join(gen, "shard-00000.pks")); err != nil {
			t.Fatal(err)
		}
		return gen
	}
	copyOf()
	if _, err := build(t, &genSource{n: 3}, ds, func(o *Options) { o.Force = true }); err != nil {
		t.Fatalf("--force over a local copy of an object-store dataset: %v", err)
	}
	for what, spoil := range map[string]func(gen string) string{
		"a file of the user's in the generation folder": func(gen string) string {
			p := filepath.Join(gen, "notes.txt")
			os.WriteFile(p, []byte("x"), 0o644)
			return p
		},
		"a folder in the generation folder": func(gen string) string {
			p := filepath.Join(gen, "shard-00001.pks")
			os.Mkdir(p, 0o755)
			return p
		},
		"a folder only named like a generation": func(gen string) string {
			p := filepath.Join(ds, ".packer-gen-notahexnumber000")
			os.Rename(gen, p)
			return p
		},
	} {
		keep := spoil(copyOf())
		if _, err := build(t, &genSource{n: 3}, ds, func(o *Options) { o.Force = true }); !errors.Is(err, ErrOutputNotDataset) {
			t.Fatalf("%s: err = %v, want ErrOutputNotDataset", what, err)
		}
		if _, err := os.Stat(keep); err != nil {
			t.Fatalf("%s: the refused --force build lost it: %v", what, err)
		}
		os.RemoveAll(ds)
	}
}
