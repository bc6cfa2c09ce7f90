package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// validated parses args as build's flags (with their defaults) and runs validate.
func validated(t *testing.T, args ...string) (*buildOptions, error) {
	t.Helper()
	o := &buildOptions{}
	f := pflag.NewFlagSet("build", pflag.ContinueOnError)
	o.addFlags(f)
	if err := f.Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return o, o.validate()
}

// TestValidate: each of validate's steps refuses its flags with its own message, and with
// several bad flags the first step's error is the one reported (-o before --split before
// --size before --on-error).
func TestValidate(t *testing.T) {
	o, err := validated(t, "-o", "out", "--resize", "256", "--crop", "224", "--classes", " cat , dog", "--shard-size", "1MiB")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-o", "out", "--from", "coco", "--images", "img"},
		{"-o", "out", "--from", "pairs", "--masks", "m"},
		{"-o", "out", "--from", "webdataset", "--fields", "txt", "--exif-orient"},
	} {
		if _, err := validated(t, args...); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	if o.output.Name != "shards" || o.transform.Spec().Resize != 256 || o.transform.Spec().CropW != 224 || o.shardSize != 1<<20 || !slices.Equal(o.classes, []string{"cat", "dog"}) {
		t.Errorf("output %q, transform %+v, shard size %d, classes %q", o.output.Name, o.transform, o.shardSize, o.classes)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--split", "val"}, "--out (-o) is required"},
		{[]string{"-o", "out", "--format", "zip"}, "zip"},
		{[]string{"-o", "out", "--parts", "4"}, "--parts is for --part auto"},
		{[]string{"-o", "out", "--format", "npy", "--resume"}, "--resume: --format npy writes no checkpoints"},
		{[]string{"-o", "out", "--seed", "7"}, "--seed is for --shuffle"},
		{[]string{"-o", "out", "--split", "val", "--size", "x"}, `unknown --split "val" (want train or test)`},
		{[]string{"-o", "out", "--device", "tpu"}, `unknown --device "tpu" (want auto, cpu or gpu)`},
		{[]string{"-o", "out", "--workers", "0"}, "--workers must be at least 1, got 0"},
		{[]string{"-o", "out", "--clip-len", "-1"}, "must not be negative"},
		{[]string{"-o", "out", "--resize", "8", "--size", "8x8"}, "give --resize or --size, not both"},
		{[]string{"-o", "out", "--size", "x", "--on-error", "stop"}, "--size: "},
		{[]string{"-o", "out", "--mean", "a"}, "--mean: "},
		{[]string{"-o", "out", "--shard-size", "lots"}, "--shard-size: "},
		{[]string{"-o", "out", "--classes", "a,,b"}, `--classes: class names must be distinct and not empty, got "a,,b" ("")`},
		{[]string{"-o", "out", "--on-error", "stop"}, `unknown --on-error "stop" (want skip or fail)`},
		{[]string{"-o", "out", "--short", "drop"}, `unknown --short "drop" (want skip or pad)`},
		{[]string{"-o", "out", "--from", "folder", "--images", "img"}, "--images is for --from coco"},
		{[]string{"-o", "out", "--from", "coco", "--masks", "m"}, "--masks is for --from pairs"},
		{[]string{"-o", "out", "--from", "coco", "--fields", "x"}, "--fields does not apply to --from coco"},
		{[]string{"-o", "out", "--from", "pairs", "--masks", "m", "--exif-orient"}, "--exif-orient does not apply to --from pairs"},
		{[]string{"-o", "out", "--from", "coco", "--images", "img", "--exif-orient"}, "--exif-orient does not apply to --from coco"},
	} {
		_, err := validated(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// TestParseClasses: names separated by commas or one a line in a file (blank lines ignored),
// trimmed, distinct and not empty.
func TestParseClasses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "names.txt")
	if err := os.WriteFile(file, []byte(" cat\n\ndog \r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(empty, []byte("\n \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in, want, err string
	}{
		{in: "cat,dog", want: "cat|dog"},
		{in: " cat , dog ", want: "cat|dog"},
		{in: "@" + file, want: "cat|dog"},
		{in: "cat,cat", err: `got "cat,cat" ("cat")`},
		{in: "cat,", err: `got "cat," ("")`},
		{in: "@" + empty, err: empty + " names no class"},
		{in: "@" + file + ".missing", err: "no such file"},
	} {
		got, err := parseClasses(c.in)
		switch {
		case c.err == "" && (err != nil || strings.Join(got, "|") != c.want):
			t.Errorf("%q: %q, %v; want %s", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %q, %v; want an error with %q", c.in, got, err, c.err)
		}
	}
}
