package main

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packer-dev/packer/storage"
)

// TestLocationsTable: every store in the table has a scheme of its own, its locations are
// remote and parse to its canonical form, and the URL refusal names it.
func TestLocationsTable(t *testing.T) {
	schemes := locations.Schemes()
	if len(schemes) == 0 {
		t.Fatal("no object store in the locations table")
	}
	for i, s := range schemes {
		if slices.Contains(schemes[:i], s) {
			t.Errorf("scheme %s is in the table twice", s)
		}
		loc := s + "://bucket/a/b/"
		if !remote(loc) || remote("bucket/a/b") {
			t.Errorf("%s: remote(%q) = %v, remote of a local path = %v", s, loc, remote(loc), remote("bucket/a/b"))
		}
		if c, err := locations.Parse(loc); err != nil || c != s+"://bucket/a/b" {
			t.Errorf("%s: Parse(%q) = %q, %v", s, loc, c, err)
		}
		if forms := remoteForms("bucket/prefix"); !strings.Contains(forms, s+"://bucket/prefix") {
			t.Errorf("the refusal's forms %q do not name %s", forms, s)
		}
	}
}

// TestLocalPathsOpenThroughTheTable: a path opens through the table's local entry as the
// storage.Local of that path, without reading the object store's knobs from the environment
// (a bad one does not fail a local command), and is no object-store location for the commands
// that upload or download.
func TestLocalPathsOpenThroughTheTable(t *testing.T) {
	t.Setenv("PACKER_S3_PART_SIZE", "lots")
	dir := t.TempDir()
	b, err := openStore(context.Background(), dir)
	if err != nil {
		t.Fatalf("openStore(%s): %v", dir, err)
	}
	if l, ok := b.(*storage.Local); !ok || l.Path("manifest.json") != filepath.Join(dir, "manifest.json") {
		t.Errorf("openStore(%s) = %T, want the storage.Local of the path", dir, b)
	}
	if _, _, err := openRemote(context.Background(), dir, ""); err == nil || !strings.Contains(err.Error(), "not an object-store location") {
		t.Errorf("openRemote of a path: %v", err)
	}
	if _, err := openStore(context.Background(), "s3://bucket/x"); err == nil || !strings.Contains(err.Error(), "PACKER_S3_PART_SIZE") {
		t.Errorf("openStore of a bucket with a bad PACKER_S3_PART_SIZE: %v", err)
	}
	d, publish, done, err := openTarget(context.Background(), "build", dir, false, nil, io.Discard)
	if err != nil || d != dir || publish != nil {
		t.Errorf("openTarget(%s) = %q, publish set %v, %v: want the folder itself, published by the build", dir, d, publish != nil, err)
	}
	done()
}
