package video

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// build runs the whole pipeline on src into a fresh directory and returns it.
func build(t *testing.T, src source.Source, spec transforms.Spec, workers int) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	_, err := pipeline.Build(context.Background(), pipeline.Options{
		Source: src, Transform: spec.MustCompile(), Output: shards.Entry,
		Out: out, Workers: workers, ShardSize: 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuildEndToEnd packs a small video dataset (good videos of several codecs and lengths
// plus the damaged corpus) through pipeline.Build with resize, crop and chw layout, reads it
// back with shard.OpenDataset, and checks every record against ffmpeg's own frames transformed
// by the transforms package, every record's metadata, the skipped list, and that 1 and 3
// workers give byte-identical manifests.
func TestBuildEndToEnd(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	checks := writeDamaged(t, root)
	// The build's transform reaches the source through its DecodePlan, and this one crops to
	// one size, so the video whose frames change size is packed whole: TestVideoSizeChangeNotASkipReason
	// covers it with and without a fixed size; its frames are not all 64x48 as this test's
	// reference decode assumes.
	if err := os.Remove(filepath.Join(root, "bad", "sizechange.mkv")); err != nil {
		t.Fatal(err)
	}
	delete(checks, "sizechange.mkv")
	lens := map[string]int{}
	for i, c := range codecs[:4] {
		n := []int{5, 9, 3, 8}[i]
		name := fmt.Sprintf("good/v%d_%s", i, c.name)
		genVideo(t, filepath.Join(root, name), "testsrc2=size=64x48:rate=10", n, c.args...)
		lens[name] = n
	}
	spec := transforms.Spec{Resize: 24, CropW: 20, CropH: 16, Layout: transforms.CHW, Filter: transforms.Bilinear}
	opts := Options{ClipLen: 4, ClipStride: 2, Short: ShortPad, Timeout: 20 * time.Second}
	var manifests [][]byte
	var out string
	for _, w := range []int{1, 3} {
		src, err := Open(root, opts)
		if err != nil {
			t.Fatal(err)
		}
		out = build(t, src, spec, w)
		m, err := os.ReadFile(filepath.Join(out, shard.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, m)
	}
	if !bytes.Equal(manifests[0], manifests[1]) {
		t.Fatalf("manifests differ between 1 and 3 workers:\n%s\n%s", manifests[0], manifests[1])
	}

	ds, err := shard.OpenDataset(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	m := ds.Manifest()
	if got, want := m.Sample.Shape, []int{4, 3, 16, 20}; fmt.Sprint(got) != fmt.Sprint(want) || m.Sample.Layout != "tchw" {
		t.Fatalf("sample %+v, want shape %v layout tchw", m.Sample, want)
	}
	if v, _ := m.Source["ffmpeg"].(string); !strings.HasPrefix(v, "ffmpeg version ") {
		t.Errorf("manifest source ffmpeg %q", v)
	}
	// Skipped: every damaged file but good.mp4.
	skipped := map[string]string{}
	for _, s := range m.Skipped {
		skipped[s.Input] = s.Reason
	}
	for name := range checks {
		_, isSkipped := skipped["bad/"+name]
		if isSkipped == (name == "good.mp4") {
			t.Errorf("bad/%s skipped=%v (%s)", name, isSkipped, skipped["bad/"+name])
		}
	}
	if r := skipped["bad/garbled_slice.mp4"]; !strings.Contains(r, "at frame 15: ") || !strings.Contains(r, "(after 6 records were packed)") {
		t.Errorf("garbled reason %q", r)
	}

	// Every record: clips of 4 every 2 frames; a 3-frame video padded.
	type want struct {
		video string
		first int
		label int64
	}
	var wants []want
	rawCache := map[string][][]byte{}
	for i := int64(0); i < ds.Len(); i++ {
		s, j := ds.Locate(i)
		r, err := ds.Shard(s)
		if err != nil {
			t.Fatal(err)
		}
		var meta recordMeta
		if err := json.Unmarshal(r.RecordMeta(j), &meta); err != nil {
			t.Fatalf("record %d meta %q: %v", i, r.RecordMeta(j), err)
		}
		wants = append(wants, want{meta.Video, meta.Frame, meta.Label})
		label, _ := ds.Label(i)
		if label != meta.Label || meta.Frames != 4 {
			t.Errorf("record %d: label %d, meta %+v", i, label, meta)
		}
		rec, err := ds.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		raw := rawCache[meta.Video]
		if raw == nil {
			raw = rawFrames(t, filepath.Join(root, filepath.FromSlash(meta.Video)), 64, 48, "")
			rawCache[meta.Video] = raw
		}
		frameSize := len(rec) / 4
		for k := 0; k < 4; k++ {
			fi := min(meta.Frame+k, len(raw)-1) // padding repeats the last frame
			exp := applySpec(t, spec, raw[fi], 64, 48)
			if !bytes.Equal(rec[k*frameSize:(k+1)*frameSize], exp) {
				t.Fatalf("record %d (%s frame %d): bytes differ from ffmpeg's frame transformed", i, meta.Video, fi)
			}
		}
		if n := lens[meta.Video]; n == 3 && meta.Padded != 1 {
			t.Errorf("3-frame video: padded %d, want 1", meta.Padded)
		}
	}
	// Record order and count: class "bad" (label 0) before "good" (label 1), files by name.
	var got []string
	for _, w := range wants {
		got = append(got, fmt.Sprintf("%s@%d", w.video, w.first))
	}
	// Damaged videos keep the clips decoded before the damage (garbled_slice.mp4: frames
	// 0-14 before the error at frame 15).
	exp := "bad/garbled_slice.mp4@0 bad/garbled_slice.mp4@2 bad/garbled_slice.mp4@4 bad/garbled_slice.mp4@6 " +
		"bad/garbled_slice.mp4@8 bad/garbled_slice.mp4@10 bad/good.mp4@0 bad/good.mp4@2 bad/good.mp4@4"
	if g := strings.Join(got, " "); !strings.HasPrefix(g, exp+" good/") {
		t.Errorf("records\n got %s\nwant %s good/...", g, exp)
	}
	var goodRecs []string
	for _, g := range got {
		if strings.HasPrefix(g, "good/") {
			goodRecs = append(goodRecs, g)
		}
	}
	wantGood := "good/v0_h264.mp4@0 " + // 5 frames
		"good/v1_mpeg4.mov@0 good/v1_mpeg4.mov@2 good/v1_mpeg4.mov@4 " + // 9 frames
		"good/v2_ffv1.mkv@0 " + // 3 frames, padded
		"good/v3_vp9.mkv@0 good/v3_vp9.mkv@2 good/v3_vp9.mkv@4" // 8 frames
	if g := strings.Join(goodRecs, " "); g != wantGood {
		t.Errorf("good records\n got %s\nwant %s", g, wantGood)
	}
}

// TestFramesBuildDeterministic packs a frame-folder dataset with 1 and 3 workers.
func TestFramesBuildDeterministic(t *testing.T) {
	needFFmpeg(t)
	root := t.TempDir()
	for i, n := range []int{3, 4, 5, 8, 9, 11} {
		dir := filepath.Join(root, []string{"x", "y"}[i%2], fmt.Sprintf("vid%d", i))
		os.MkdirAll(dir, 0o755)
		ffmpeg(t, "-f", "lavfi", "-i", "testsrc2=size=40x30:rate=10", "-frames:v", fmt.Sprint(n), filepath.Join(dir, "img_%d.jpg"))
	}
	os.WriteFile(filepath.Join(root, "x", "vid0", "img_2.jpg"), []byte("not a jpeg"), 0o644)
	var manifests [][]byte
	for _, w := range []int{1, 3} {
		src, err := OpenFrames(root, Options{ClipLen: 4})
		if err != nil {
			t.Fatal(err)
		}
		out := build(t, src, transforms.Spec{Resize: 20}, w)
		b, err := os.ReadFile(filepath.Join(out, shard.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, b)
		var m shard.Manifest
		json.Unmarshal(b, &m)
		// x: vid0 (3 frames, corrupt: skipped), vid2 (5), vid4 (9); y: vid1 (4), vid3 (8), vid5 (11).
		if m.Count != 1+2+1+2+2 || len(m.Skipped) != 1 || !strings.Contains(m.Skipped[0].Reason, "frame 1 (img_2.jpg)") {
			t.Fatalf("count %d, skipped %+v", m.Count, m.Skipped)
		}
	}
	if !bytes.Equal(manifests[0], manifests[1]) {
		t.Fatal("frames manifests differ between 1 and 3 workers")
	}
}
