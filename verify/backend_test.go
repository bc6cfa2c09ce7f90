package verify

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// opaque is the local backend seen only through the storage.Backend interface, so that verify
// takes the path it takes for a backend that is not the local file system: every read through
// Open, none by path.
type opaque struct{ storage.Backend }

// TestBackendMatchesDir: checking a dataset through a backend that is not local finds the same
// faults as Dir, clean, with a flipped data bit, with a truncated shard, an extra file and a
// missing one.
func TestBackendMatchesDir(t *testing.T) {
	dir := buildShards(t)
	compare := func(what string) *Report {
		t.Helper()
		want, err := Dir(context.Background(), dir, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Backend(context.Background(), opaque{storage.NewLocal(dir)}, dir, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: through the backend %+v\nDir %+v", what, got, want)
		}
		return got
	}
	if rep := compare("clean"); !rep.OK {
		t.Fatalf("clean dataset: %v", rep.Faults)
	}
	flip(t, filepath.Join(dir, "shard-00001.pks"), shard.Align+17*recSize+5)
	if rep := compare("flipped bit"); len(rep.Faults) != 2 {
		t.Fatalf("flipped bit: %v", rep.Faults)
	}
	if err := os.Truncate(filepath.Join(dir, "shard-00002.pks"), shard.Align+3*recSize); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "shard-00000.pks"), filepath.Join(dir, "sub", "moved.pks")); err != nil {
		t.Fatal(err)
	}
	rep := compare("damaged")
	kinds := map[string]int{}
	for _, f := range rep.Faults {
		kinds[f.Kind]++
	}
	if kinds[KindMissing] != 1 || kinds[KindExtra] != 0 || kinds[KindSize] != 1 || len(rep.Warnings) != 2 {
		t.Fatalf("damaged dataset: faults %v, warnings %v", rep.Faults, rep.Warnings)
	}
}

// TestBackendExtraFiles: through a backend that is not local (an object store's path), an
// unlisted file is a warning by default and a fault with Strict, as in Dir.
func TestBackendExtraFiles(t *testing.T) {
	dir := buildShards(t)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := opaque{storage.NewLocal(dir)}
	rep, err := Backend(context.Background(), b, dir, Options{}, nil)
	if err != nil || !rep.OK || len(rep.Faults) != 0 || len(rep.Warnings) != 1 || rep.Warnings[0].File != "notes.txt" || rep.Warnings[0].Kind != KindExtra {
		t.Fatalf("default: %v %+v", err, rep)
	}
	rep, err = Backend(context.Background(), b, dir, Options{Strict: true}, nil)
	if err != nil || rep.OK || len(rep.Faults) != 1 || rep.Faults[0].File != "notes.txt" || len(rep.Warnings) != 0 {
		t.Fatalf("strict: %v %+v", err, rep)
	}
}

// TestBackendFormatChecker: a format checker parses local files, so through a backend that is
// not local it does not run and the report says the structure was not checked.
func TestBackendFormatChecker(t *testing.T) {
	dir := t.TempDir()
	m := &shard.Manifest{Packer: "test", Format: "npy", FormatVersion: 1, Sample: shard.SampleSpec{Shape: []int{4}, DType: shard.Uint8, Layout: "hwc"}, Label: shard.LabelSpec{DType: "int64", Aux: []string{}}}
	writeManifest(t, dir, m)
	ran := 0
	checkers := map[string]FormatChecker{"npy": func(d string, _ *shard.Manifest) []error {
		ran++
		if d != dir {
			t.Errorf("checker called with %s, want %s", d, dir)
		}
		return nil
	}}
	rep, err := Backend(context.Background(), storage.NewLocal(dir), dir, Options{}, checkers)
	if err != nil || !rep.OK || ran != 1 {
		t.Fatalf("local backend: %v %v, checker ran %d times", err, rep, ran)
	}
	rep, err = Backend(context.Background(), opaque{storage.NewLocal(dir)}, dir, Options{}, checkers)
	if err != nil || rep.OK || ran != 1 || len(rep.Faults) != 1 || rep.Faults[0].Kind != KindStructure {
		t.Fatalf("other backend: %v %+v, checker ran %d times", err, rep, ran)
	}
}
