package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/transforms"
)

// captionBoxSource is a source of n 5×4 RGB images, each with a caption, 0 to 2 boxes with
// their class ids, and a one-channel mask: a dataset with fields for the commands that read
// one (the sources that fill fields are tested in their own packages).
type captionBoxSource struct{ n int }

var captionBoxFields = []shard.Field{
	{Name: "caption", Kind: shard.KindText, Encoding: shard.EncodingRaw},
	{Name: "boxes", Kind: shard.KindNDArray, DType: "float32", Shape: []int{-1, 4}, Encoding: shard.EncodingRaw, Geometry: shard.GeometryBoxes},
	{Name: "class_id", Kind: shard.KindNDArray, DType: "int64", Shape: []int{-1}, Encoding: shard.EncodingRaw, RowsOf: "boxes"},
	{Name: "mask", Kind: shard.KindImage, DType: "uint8", Shape: []int{-1, -1, 1}, Encoding: shard.EncodingRaw, Geometry: shard.GeometryMask},
}

func (s captionBoxSource) Info() source.SourceInfo {
	return source.SourceInfo{Kind: "captionbox", Spec: map[string]any{"kind": "captionbox"}, Count: int64(s.n),
		Frame: source.FrameShape{W: 5, H: 4, C: 3}, Fields: captionBoxFields}
}

func (s captionBoxSource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	for i := range s.n {
		if err := emit(source.Item{Seq: int64(i), Name: fmt.Sprintf("pic%d", i), Label: -1}); err != nil {
			return err
		}
	}
	return nil
}

func (s captionBoxSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	i := int(it.Seq)
	var boxes, ids []byte
	for k := range i % 3 {
		for _, v := range []float32{float32(k), 0.5, float32(k) + 2, 3.5} {
			boxes = binary.LittleEndian.AppendUint32(boxes, math.Float32bits(v))
		}
		ids = binary.LittleEndian.AppendUint64(ids, uint64(7+k))
	}
	mask := transforms.Image{W: 5, H: 4, C: 1, Pix: bytes.Repeat([]byte{byte(i % 4)}, 20)}
	return emit(source.Clip{
		Frames: []transforms.Image{{W: 5, H: 4, C: 3, Pix: bytes.Repeat([]byte{byte(40 * i)}, 60)}},
		Label:  -1,
		Fields: []source.FieldValue{{Bytes: []byte(fmt.Sprintf("a photo %d of %s", i, strings.Repeat("cats ", 20)))},
			{Bytes: boxes}, {Bytes: ids}, {Image: &mask}},
	})
}

// buildCaptionBox builds captionBoxSource into dir as packer build does into a local OUT or a
// bucket's staging folder.
func buildCaptionBox(t *testing.T, dir string) {
	t.Helper()
	if _, err := pipeline.Build(context.Background(), pipeline.Options{Source: captionBoxSource{n: 6}, Output: shards.Entry, Out: dir, ShardSize: 400}); err != nil {
		t.Fatal(err)
	}
}

// TestFieldsInspectVerifyS3: a dataset with fields published to a bucket holds the local
// build's bytes; verify passes on both; inspect shows the schema and, with --records, each
// record's fields, the same from the bucket as from the local folder.
func TestFieldsInspectVerifyS3(t *testing.T) {
	srv := s3Setup(t, "data")
	local := filepath.Join(t.TempDir(), "local")
	buildCaptionBox(t, local)
	dir, publish, done, err := openTarget(context.Background(), "build", "s3://data/fields", false, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	buildCaptionBox(t, dir)
	if err := publish(dir); err != nil {
		t.Fatal(err)
	}
	done()
	want, got := localFiles(t, local), objects(t, srv, s3.URL{Bucket: "data", Prefix: "fields"})
	if len(want) < 3 || len(got) != len(want) {
		t.Fatalf("the bucket holds %d objects, the local build %d files", len(got), len(want))
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("%s: the object differs from the local file", name)
		}
	}
	for _, loc := range []string{local, "s3://data/fields"} {
		if out := mustRun(t, "verify", loc); !strings.Contains(out, "ok: ") {
			t.Errorf("verify %s: %q", loc, out)
		}
	}
	li := mustRun(t, "inspect", "--json", "--records", "3", local)
	ri := mustRun(t, "inspect", "--json", "--records", "3", "s3://data/fields")
	if strings.Replace(ri, "s3://data/fields", local, 1) != li {
		t.Errorf("inspect of the bucket differs from inspect of the local build:\n%s\n%s", ri, li)
	}
	text := mustRun(t, "inspect", "--records", "3", local)
	for _, w := range []string{
		"fields (4):",
		"boxes            ndarray float32 [-1 4], boxes\n",
		"class_id         ndarray int64 [-1], rows of boxes\n",
		"mask             image uint8 [-1 -1 1], mask\n",
		`caption          "a photo 2 of cats cats`,
		"ca\"…\n",
		"boxes            [2 4] [0 0.5 2 3.5 1 0.5 3 3.5]\n",
		"class_id         [0] []\n",
		"mask             [4 5 1] [2 2 2 2 2 2 2 2]…\n",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("inspect --records lacks %q:\n%s", w, text)
		}
	}
}
