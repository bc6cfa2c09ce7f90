package storage_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/storage"
)

// box is a store of the form the registry expects, for the registry's own tests: box://NAME
// or box://NAME/PREFIX, NAME in lowercase letters.
func box(scheme string) storage.Location {
	return storage.Location{
		Scheme: scheme,
		Parse: func(loc string) (string, error) {
			_, bucket, prefix := storage.SplitLocation(strings.TrimSuffix(loc, "/"))
			if bucket == "" || strings.Trim(bucket, "abcdefghijklmnopqrstuvwxyz") != "" {
				return "", errors.New(loc + ": bad bucket")
			}
			return storage.JoinLocation(scheme, bucket, prefix), nil
		},
		Open: func(ctx context.Context, loc string, opts storage.OpenOptions) (storage.Backend, error) {
			return nil, errors.New("box: not opened in this test")
		},
	}
}

func TestRegistryLookup(t *testing.T) {
	first := box("box")
	first.Open = nil
	r := storage.NewRegistry(first, box("box"), box("crate"))
	if got := strings.Join(r.Schemes(), ","); got != "box,box,crate" {
		t.Errorf("Schemes = %s", got)
	}
	for loc, want := range map[string]string{
		"box://a/b": "box", "crate://a": "crate", "/data/x": "", "x": "", "box:/a": "", "bo://a": "", "gs://a/b": "", "crate:/": "",
	} {
		l, ok := r.Lookup(loc)
		if ok != (want != "") || l.Scheme != want || r.Remote(loc) != ok {
			t.Errorf("Lookup(%q) = %q, %v; want %q", loc, l.Scheme, ok, want)
		}
	}
	if l, _ := r.Lookup("box://a"); l.Open != nil {
		t.Error("a scheme registered twice: the second entry answered, not the first")
	}
}

func TestRegistryParse(t *testing.T) {
	r := storage.NewRegistry(box("box"))
	for loc, want := range map[string]string{
		"box://a/": "box://a", "box://a/b/c/": "box://a/b/c", "local/dir/": "local/dir/", "": "",
	} {
		if got, err := r.Parse(loc); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", loc, got, err, want)
		}
	}
	if _, err := r.Parse("box://A1/x"); err == nil || !strings.Contains(err.Error(), "box://A1/x") {
		t.Errorf("Parse of a bad location: %v; want an error naming it", err)
	}
	wrong := box("box")
	wrong.Parse = func(loc string) (string, error) { return "other://a", nil }
	if _, err := storage.NewRegistry(wrong).Parse("box://a"); err == nil {
		t.Error("a Parse that leaves its scheme was accepted")
	}
}

func TestRegistryOverlap(t *testing.T) {
	r := storage.NewRegistry(box("box"), box("crate"))
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"box://a", "box://a", true},
		{"box://a", "box://a/x", true},
		{"box://a/x/", "box://a/x/y", true},
		{"box://a/x", "box://a/xy", false},
		{"box://a", "box://ab", false},
		{"box://a/x", "box://b/x", false},
		{"box://a/x", "crate://a/x", false},
		{"box://a/x", "a/x", false},
		{"/data", "/data", false}, // local paths: the build's own checks
		{"box://A/x", "box://A/x", false},
	} {
		if got := r.Overlap(c.a, c.b); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := r.Overlap(c.b, c.a); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
}

func TestSplitLocation(t *testing.T) {
	for _, loc := range []string{"s3://b", "s3://b/p", "s3://b/p/q.txt"} {
		s, b, p := storage.SplitLocation(loc)
		if s != "s3" || b != "b" || storage.JoinLocation(s, b, p) != loc {
			t.Errorf("SplitLocation(%q) = %q, %q, %q", loc, s, b, p)
		}
	}
}

// TestRegistryLocalEntry: with the local file system's entry, a path resolves to it (scheme
// "", not remote, parsed as it is) and opens as a storage.Local of that path; a store's
// location still resolves to its store, wherever the local entry stands in the table.
func TestRegistryLocalEntry(t *testing.T) {
	ctx := context.Background()
	for _, r := range []*storage.Registry{
		storage.NewRegistry(storage.LocalLocation(), box("box")),
		storage.NewRegistry(box("box"), storage.LocalLocation()),
	} {
		if got := strings.Join(r.Schemes(), ","); got != "box" {
			t.Errorf("Schemes = %q, want only the store's", got)
		}
		dir := t.TempDir()
		for _, loc := range []string{dir, "rel/dir/", "box:/a", "gs://a/b"} {
			l, ok := r.Lookup(loc)
			if !ok || l.Scheme != "" || r.Remote(loc) {
				t.Errorf("Lookup(%q) = %q, %v, remote %v; want the local entry", loc, l.Scheme, ok, r.Remote(loc))
			}
			if c, err := r.Parse(loc); err != nil || c != loc {
				t.Errorf("Parse(%q) = %q, %v; want it as it is", loc, c, err)
			}
		}
		b, c, err := r.Open(ctx, dir, storage.OpenOptions{})
		if err != nil || c != dir {
			t.Fatalf("Open(%q) = %v, %q, %v", dir, b, c, err)
		}
		if l, ok := b.(*storage.Local); !ok || l.Path("x") != filepath.Join(dir, "x") {
			t.Errorf("Open(%q) = %T, want the storage.Local of the path", dir, b)
		}
		if _, ok := b.(storage.Remote); ok {
			t.Error("the local backend claims to be a Remote")
		}
		if l, ok := r.Lookup("box://a"); !ok || l.Scheme != "box" || !r.Remote("box://a") {
			t.Errorf("Lookup(box://a) = %q, %v: the store's location went to the local entry", l.Scheme, ok)
		}
		if _, _, err := r.Open(ctx, "box://A", storage.OpenOptions{}); err == nil || !strings.Contains(err.Error(), "box://A") {
			t.Errorf("Open of a bad store location: %v; want the Parse error naming it", err)
		}
	}
	if _, _, err := storage.NewRegistry(box("box")).Open(ctx, "some/dir", storage.OpenOptions{}); err == nil || !strings.Contains(err.Error(), "some/dir") {
		t.Errorf("Open of a path in a registry with no local entry: %v; want an error naming it", err)
	}
}
