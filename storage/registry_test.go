package storage_test

import (
	"context"
	"errors"
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
		Open: func(ctx context.Context, loc string, opts storage.OpenOptions) (storage.Remote, error) {
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
