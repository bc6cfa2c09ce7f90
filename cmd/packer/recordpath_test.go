package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestImageRecordsCarryPath: records of an image folder and of a list carry their source path
// as per-record metadata ({"path": ...}, relative to the folder, as written in the list), in
// every output format, shown by inspect --records and read back by the Go readers (shards and
// npy) and by preview; the bytes do not depend on the number of workers.
func TestImageRecordsCarryPath(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	writePNGFolder(t, src, 3)
	want := []string{"cat/000.png", "cat/001.png", "cat/002.png", "dog/000.png", "dog/001.png", "dog/002.png"}
	for _, format := range []string{"shards", "npy", "hdf5"} {
		out := filepath.Join(tmp, format)
		mustRun(t, "build", src, "-o", out, "--format", format, "--size", "4x3")
		stdout := mustRun(t, "inspect", out, "--records", "6")
		for _, p := range want {
			if !strings.Contains(stdout, fmt.Sprintf(`{"path":%q}`, p)) {
				t.Errorf("%s: inspect --records lacks %s:\n%s", format, p, stdout)
			}
		}
		if format == "hdf5" {
			continue
		}
		d, err := shard.OpenDataset(out)
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.Shard(0)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range want {
			if got := string(r.RecordMeta(i)); got != fmt.Sprintf(`{"path":%q}`, p) {
				t.Errorf("%s: record %d meta %s, want path %s", format, i, got, p)
			}
		}
		d.Close()
	}
	ri := recordInfo{Meta: []byte(`{"path":"cat/000.png"}`)}
	if recordPath(ri) != "cat/000.png" || recordPath(recordInfo{Meta: []byte(`{"file":"v.mp4"}`)}) != "" {
		t.Error("recordPath")
	}
	mustRun(t, "preview", filepath.Join(tmp, "shards"), "-o", filepath.Join(tmp, "sheet.png"))

	// a list: the paths as written in it
	list := filepath.Join(src, "list.csv")
	if err := os.WriteFile(list, []byte("path,label\ndog/001.png,1\ncat/002.png,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "list")
	mustRun(t, "build", list, "--from", "list", "-o", out, "--size", "4x3")
	stdout := mustRun(t, "inspect", out, "--records", "2")
	if !strings.Contains(stdout, `{"path":"dog/001.png"}`) || !strings.Contains(stdout, `{"path":"cat/002.png"}`) {
		t.Errorf("list: inspect --records:\n%s", stdout)
	}

	// the same bytes for any number of workers
	one, four := filepath.Join(tmp, "w1"), filepath.Join(tmp, "w4")
	mustRun(t, "build", src, "-o", one, "--size", "4x3", "--workers", "1", "--shard-size", "4KiB")
	mustRun(t, "build", src, "-o", four, "--size", "4x3", "--workers", "4", "--shard-size", "4KiB")
	m, err := shard.ReadManifest(one)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{shard.ManifestName}, filePaths(m)...) {
		a, _ := os.ReadFile(filepath.Join(one, f))
		b, _ := os.ReadFile(filepath.Join(four, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between 1 and 4 workers", f)
		}
	}
}

func filePaths(m *shard.Manifest) []string {
	var out []string
	for _, f := range m.Files {
		out = append(out, f.Path)
	}
	return out
}
