package main

import (
	"slices"
	"strings"
	"testing"
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
