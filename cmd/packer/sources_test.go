package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestSourceTable: the table of source kinds is complete, in the order detection breaks ties
// in (the same as source/detect_test.go's copy), every row can open and explain itself, and
// the build command's help and --from error name every kind.
func TestSourceTable(t *testing.T) {
	want := []string{"folder", "list", "cifar10", "cifar100", "idx", "frames", "video", "webdataset", "tfrecord", "parquet", "coco", "pairs"}
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
	if got := sourceKinds(); got != "folder, list, cifar10, cifar100, idx, frames, video, webdataset, tfrecord, parquet, coco or pairs" {
		t.Errorf("sourceKinds() = %q", got)
	}
	help := newBuildCommand(&iostreams{}, nil).Long
	for _, k := range want {
		if !strings.Contains(help, "\n  "+k) && !strings.Contains(help, ", "+k) {
			t.Errorf("build help does not list source kind %s", k)
		}
	}
	_, _, err := openSource(&buildOptions{Source: t.TempDir(), From: "lance"})
	if err == nil || !strings.Contains(err.Error(), "want folder, list, cifar10, cifar100, idx, frames, video, webdataset, tfrecord, parquet, coco or pairs") {
		t.Errorf("unknown --from: %v", err)
	}
}

// TestWebDatasetEndToEnd: a folder of WebDataset shards is detected, packed with a bad sample
// skipped, verified, and inspect shows each record's shard and key; all three output formats
// take it.
func TestWebDatasetEndToEnd(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "wds")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	jpg, err := os.ReadFile(filepath.Join("..", "..", "transforms", "testdata", "corpus", "baseline-420.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range [][2]string{{"k0.jpg", string(jpg)}, {"k0.cls", "1"}, {"k1.jpg", "not a jpeg"}, {"k1.cls", "0"}, {"k2.jpg", string(jpg)}, {"k2.cls", "0"}} {
		tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg})
		tw.Write([]byte(m[1]))
	}
	tw.Close()
	if err := os.WriteFile(filepath.Join(src, "shard-000000.tar"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"shards", "npy", "hdf5"} {
		out := filepath.Join(root, "out-"+format)
		mustRun(t, "build", src, "-o", out, "--crop", "16", "--classes", "cat,dog", "--format", format)
		mustRun(t, "verify", out)
		m, err := shard.ReadManifest(out)
		if err != nil {
			t.Fatal(err)
		}
		if m.Count != 2 || len(m.Skipped) != 1 || m.Skipped[0].Input != "shard-000000.tar:k1" || fmt.Sprint(m.Classes) != "[cat dog]" {
			t.Errorf("%s: count %d, skipped %+v, classes %v", format, m.Count, m.Skipped, m.Classes)
		}
		if format == "shards" {
			if got := mustRun(t, "inspect", out, "--records", "2"); !strings.Contains(got, `"key":"k2"`) {
				t.Errorf("inspect --records does not show the record's key:\n%s", got)
			}
		}
	}
}

// TestBuildRefusesSplitParent: build pointed at the parent of train/ and val/ (each holding
// class folders of images) was detected as frames and packed the whole tree as one class with
// exit 0. It is a usage error naming the split folder to point at, and nothing is written.
func TestBuildRefusesSplitParent(t *testing.T) {
	src := filepath.Join(t.TempDir(), "data")
	for _, rel := range []string{"train/cat/1.jpg", "train/dog/2.jpg", "val/cat/3.jpg", "val/dog/4.jpg"} {
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "o")
	_, errs, code := run(t, "build", src, "-o", out)
	if code != exitUsage || !strings.Contains(errs, "named like dataset splits") || !strings.Contains(errs, filepath.Join(src, "train")) {
		t.Fatalf("exit %d, stderr %q: want exit %d naming %s", code, errs, exitUsage, filepath.Join(src, "train"))
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists after a refused build: %v", out, err)
	}
}
