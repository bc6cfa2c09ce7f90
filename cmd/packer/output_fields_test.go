package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/storage/s3"
)

// withFields is a source that declares fields besides a real source's images (the sources that
// fill fields arrive with their own --fields flags): enough to see an output refuse them, which
// happens before anything is decoded.
type withFields struct {
	source.Source
	fields []shard.Field
}

func (s withFields) Info() source.SourceInfo {
	info := s.Source.Info()
	info.Fields = s.fields
	return info
}

// useFieldsSource puts a source kind "folder-fields" in the table for the test: a folder of
// images (imagedir) declaring fields.
func useFieldsSource(t *testing.T, fields []shard.Field) {
	e := imagedir.FolderEntry
	e.Kind = "folder-fields"
	open := e.Open
	e.Open = func(path string, o source.Options) (source.Source, error) {
		src, err := open(path, o)
		if err != nil {
			return nil, err
		}
		return withFields{src, fields}, nil
	}
	saved := sources
	sources = append(append([]source.Entry(nil), sources...), e)
	t.Cleanup(func() { sources = saved })

}

// TestBuildRefusesFields: a field an output cannot hold is a usage error (exit 2) naming the
// field and the format, before anything is written.
func TestBuildRefusesFields(t *testing.T) {
	src := t.TempDir()
	writePNGFolder(t, src, 2)
	raw := shard.EncodingRaw
	cases := []struct {
		format string
		field  shard.Field
		want   string
	}{
		{"npy", shard.Field{Name: "labels", Kind: shard.KindText, Encoding: raw}, `--format npy: field "labels": field cannot be stored: its file labels.npy would be the dataset's own labels.npy`},
		{"hdf5", shard.Field{Name: "meta", Kind: shard.KindJSON, Encoding: raw}, `--format hdf5: field "meta": field cannot be stored: data.h5 has its own /meta`},
		{"shards", shard.Field{Name: "boxes", Kind: shard.KindNDArray, DType: "float32", Shape: []int{4, -1}, Encoding: raw}, `--format shards: field "boxes": field cannot be stored: shape [4 -1]: only the first dimension may be -1`},
		{"shards", shard.Field{Name: "caption", Kind: shard.KindText, Encoding: "zstd"}, `field "caption": field cannot be stored: encoding "zstd" (want "raw")`},
	}
	for _, c := range cases {
		out := filepath.Join(t.TempDir(), "out")
		saved := sources
		useFieldsSource(t, []shard.Field{{Name: "ok", Kind: shard.KindText, Encoding: raw}, c.field})
		_, stderr, code := run(t, "build", src, "--from", "folder-fields", "-o", out, "--format", c.format, "--crop", "2")
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("--format %s, field %+v: exit %d\n%s\nwant exit %d and %q", c.format, c.field, code, stderr, exitUsage, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("--format %s: %s exists after the refusal (%v)", c.format, out, err)
		}
		sources = saved
	}
}

// TestS3DatasetWithFields: an npy dataset with fields in a bucket is previewed through the
// storage seam (the fields' files read from the bucket), and a build with --force replaces it:
// the files its manifest lists, named by its schema, are the dataset's, not foreign objects.
func TestS3DatasetWithFields(t *testing.T) {
	srv := s3Setup(t, "mine")
	dir := t.TempDir()
	writeFieldsNPY(t, dir)
	u := s3.URL{Bucket: "mine", Prefix: "ds"}
	if err := s3.NewWithClient(srv.Client(""), u, s3.Options{}).Publish(context.Background(), dir, s3.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := objects(t, srv, u)["caption.values.npy"]; !ok {
		t.Fatal("caption.values.npy not published")
	}
	mustRun(t, "preview", "s3://mine/ds", "-o", filepath.Join(t.TempDir(), "s.png"), "--count", "1")
	src := t.TempDir()
	writePNGFolder(t, src, 1)
	mustRun(t, "build", src, "-o", "s3://mine/ds", "--force", "--format", "npy", "--crop", "2")
	got := objects(t, srv, u)
	if _, ok := got["caption.values.npy"]; ok || len(got) != 4 {
		t.Fatalf("objects after the replacement: %v", slices.Sorted(maps.Keys(got)))
	}
}
