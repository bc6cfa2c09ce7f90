package main

import (
	"strings"
	"testing"
)

// TestSourceTable: the table of source kinds is complete, in the order detection breaks ties
// in (the same as source/detect_test.go's copy), every row can open and explain itself, and
// the build command's help and --from error name every kind.
func TestSourceTable(t *testing.T) {
	want := []string{"folder", "list", "cifar10", "cifar100", "idx", "frames", "video"}
	var got []string
	for _, e := range sources {
		got = append(got, e.Kind)
		if e.Open == nil || e.Help == "" {
			t.Errorf("source %s: no Open or no Help", e.Kind)
		}
		if _, ok := sourceEntry(e.Kind); !ok {
			t.Errorf("sourceEntry(%s) not found", e.Kind)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("source kinds %v, want %v", got, want)
	}
	if got := sourceKinds(); got != "folder, list, cifar10, cifar100, idx, frames or video" {
		t.Errorf("sourceKinds() = %q", got)
	}
	help := newBuildCommand(&iostreams{}, nil).Long
	for _, k := range want {
		if !strings.Contains(help, "\n  "+k) && !strings.Contains(help, ", "+k) {
			t.Errorf("build help does not list source kind %s", k)
		}
	}
	_, _, err := openSource(&buildOptions{Source: t.TempDir(), From: "parquet"})
	if err == nil || !strings.Contains(err.Error(), "want folder, list, cifar10, cifar100, idx, frames or video") {
		t.Errorf("unknown --from: %v", err)
	}
}
