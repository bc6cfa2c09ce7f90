package s3_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestLocation: the registry entry parses what ParseURL parses, into the URL's String, and
// refuses what it refuses; locations overlap where they share a bucket and one prefix holds
// the other.
func TestLocation(t *testing.T) {
	r := storage.NewRegistry(s3.Location())
	for _, loc := range []string{"s3://bkt", "s3://bkt/", "s3://bkt/a/b/", "s3://b", "s3://bkt/a//b", "s3://bkt/../x", "s3://Bkt/x"} {
		u, uerr := s3.ParseURL(loc)
		got, err := r.Parse(loc)
		if (err == nil) != (uerr == nil) || err == nil && got != u.String() || err != nil && err.Error() != uerr.Error() {
			t.Errorf("Parse(%q) = %q, %v; ParseURL: %v, %v", loc, got, err, u, uerr)
		}
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"s3://bkt/ds", "s3://bkt/ds/", true},
		{"s3://bkt", "s3://bkt/ds", true},
		{"s3://bkt/ds/part", "s3://bkt/ds", true},
		{"s3://bkt/ds", "s3://bkt/ds2", false},
		{"s3://bkt/ds", "s3://other/ds", false},
		{"s3://bkt/ds", "bkt/ds", false},
	} {
		if got := r.Overlap(c.a, c.b); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestStage: a stage is refused, before its local folder is made, where a dataset is (unless
// Force); what is built in its folder is published below the prefix; Discard removes the folder.
func TestStage(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "stage")
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "stage", Prefix: "ds"}, s3.Options{})
	ctx := context.Background()
	tmp := t.TempDir()
	made := 0
	opts := storage.StageOptions{Staging: func() (*storage.Staging, error) {
		made++
		return storage.NewStaging(tmp, "st-*")
	}}
	seen := ""
	publish := func(seed byte) {
		t.Helper()
		st, err := b.Stage(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if st.Backend().(*storage.Local).Root() != st.Dir() {
			t.Errorf("the stage's backend is not its folder %s", st.Dir())
		}
		if err := os.CopyFS(st.Dir(), os.DirFS(fakeDataset(t, seed, 1000, 2000))); err != nil {
			t.Fatal(err)
		}
		if err := st.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.Discard(); err != nil {
			t.Fatal(err)
		}
		if left, _ := filepath.Glob(filepath.Join(tmp, "st-*")); len(left) != 0 {
			t.Errorf("Discard left %v", left)
		}
		m, err := shard.ReadManifestFS(storage.ShardFS(ctx, b))
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Files) != 2 {
			t.Fatalf("the published manifest lists %d files, want 2", len(m.Files))
		}
		if m.Files[0].SHA256 == seen {
			t.Errorf("the published manifest lists %d files, the first with SHA-256 %s (the dataset before: %s)", len(m.Files), m.Files[0].SHA256, seen)
		}
		seen = m.Files[0].SHA256
	}
	publish(1)
	if _, err := b.Stage(ctx, opts); !errors.Is(err, s3.ErrDatasetExists) || made != 1 {
		t.Errorf("a stage over a dataset = %v (staging folders made: %d), want ErrDatasetExists before any", err, made)
	}
	opts.Force = true
	publish(2)
}
