package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testImage writes a host file with the given time and mode and returns an image of it.
func testImage(t *testing.T, mtime time.Time, mode os.FileMode) *image {
	t.Helper()
	src := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(src, []byte("#!binary\x00bytes"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(src, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(src, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return &image{
		arch: "amd64", os: "linux", user: "65532:65532", workdir: "/", tag: "1.0",
		created:    time.Unix(0, 0).UTC(),
		entrypoint: []string{"/usr/bin/tool"}, env: []string{"PATH=/usr/bin"},
		labels: map[string]string{"b": "2", "a": "1"},
		entries: []entry{
			{path: "/usr/bin/tool", src: src, mode: 0o755},
			{path: "/tmp", dir: true, mode: 0o1777},
			{path: "/lib64/ld.so", link: "/lib/ld.so"},
			{path: "/etc/passwd", data: []byte("root:x:0:0::/:/x\n"), mode: 0o644},
		},
	}
}

func readJSON(t *testing.T, name string, v any) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

// TestSameInputsSameImage: images of files with other host times and modes are the same bytes;
// another -created time gives another image.
func TestSameInputsSameImage(t *testing.T) {
	dir := t.TempDir()
	a, err := testImage(t, time.Unix(1e9, 0), 0o700).write(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := testImage(t, time.Unix(2e9, 5), 0o755).write(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if a.manifest.Digest != b.manifest.Digest {
		t.Fatalf("same inputs, two images: %s, %s", a.manifest.Digest, b.manifest.Digest)
	}
	for _, name := range []string{"index.json", "oci-layout"} {
		x, _ := os.ReadFile(filepath.Join(dir, "a", name))
		y, _ := os.ReadFile(filepath.Join(dir, "b", name))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs", name)
		}
	}
	img := testImage(t, time.Unix(1e9, 0), 0o700)
	img.created = time.Unix(86400, 0)
	c, err := img.write(filepath.Join(dir, "c"))
	if err != nil {
		t.Fatal(err)
	}
	if c.manifest.Digest == a.manifest.Digest {
		t.Fatal("another creation time, the same image")
	}
}

// TestLayoutConsistent reads a written layout as a runtime would: index -> manifest -> config
// and layer, every blob named by its digest, the config's diff_id the uncompressed layer's
// digest, the layer's entries sorted with their folders, owned by 0:0, at the image's time.
func TestLayoutConsistent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oci")
	if _, err := testImage(t, time.Now(), 0o700).write(dir); err != nil {
		t.Fatal(err)
	}
	blob := func(d descriptor) []byte {
		b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(d.Digest, "sha256:")))
		if err != nil {
			t.Fatal(err)
		}
		if digest(b) != d.Digest || int64(len(b)) != d.Size {
			t.Fatalf("blob %s: digest %s, size %d, want size %d", d.Digest, digest(b), len(b), d.Size)
		}
		return b
	}
	var index struct{ Manifests []descriptor }
	readJSON(t, filepath.Join(dir, "index.json"), &index)
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "1.0" {
		t.Fatalf("index: %+v", index)
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(blob(index.Manifests[0]), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Config struct {
			User       string
			Entrypoint []string
		}
		Rootfs struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(blob(manifest.Config), &config); err != nil {
		t.Fatal(err)
	}
	if config.Config.User != "65532:65532" || len(config.Config.Entrypoint) != 1 {
		t.Fatalf("config: %+v", config)
	}
	if len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != mediaLayerGz {
		t.Fatalf("layers: %+v", manifest.Layers)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(manifest.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(config.Rootfs.DiffIDs) != 1 || config.Rootfs.DiffIDs[0] != digest(raw) {
		t.Fatalf("diff_ids %v, the layer's digest %s", config.Rootfs.DiffIDs, digest(raw))
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: owner %d:%d %q, time %v", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
		if h.Name == "usr/bin/tool" && h.Mode != 0o755 {
			t.Errorf("usr/bin/tool: mode %o, want the given 755, not the host's", h.Mode)
		}
		names = append(names, h.Name)
	}
	want := "etc/ etc/passwd lib64/ lib64/ld.so tmp/ usr/ usr/bin/ usr/bin/tool"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("entries %q, want %q", got, want)
	}
}

// TestRefuses: paths given twice, a file where a folder must be, and an existing output.
func TestRefuses(t *testing.T) {
	dir := t.TempDir()
	img := testImage(t, time.Now(), 0o700)
	img.entries = append(img.entries, entry{path: "usr/bin/tool/", data: []byte("x"), mode: 0o644})
	if _, err := img.write(filepath.Join(dir, "dup")); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a path given twice: %v", err)
	}
	img = testImage(t, time.Now(), 0o700)
	img.entries = append(img.entries, entry{path: "/etc/passwd/x", data: []byte("x"), mode: 0o644})
	if _, err := img.write(filepath.Join(dir, "notdir")); err == nil || !strings.Contains(err.Error(), "/etc/passwd") {
		t.Errorf("a file under a file: %v", err)
	}
	if _, err := testImage(t, time.Now(), 0o700).write(dir); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("an existing folder: %v", err)
	}
}
