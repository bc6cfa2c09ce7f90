package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// python returns Debian's Python, which has Pillow and torchvision (scripts/setup.sh).
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("PACKER_PYTHON"), "/usr/bin/python3"} {
		if p == "" {
			continue
		}
		if err := exec.Command(p, "-c", "import PIL, torchvision").Run(); err == nil {
			return p
		}
	}
	if os.Getenv("PACKER_NO_TORCHVISION") == "1" {
		t.Skip("PACKER_NO_TORCHVISION=1: no Python with Pillow and torchvision; fidelity against torchvision not checked")
	}
	t.Fatal("no Python with Pillow and torchvision (run scripts/setup.sh, or set PACKER_NO_TORCHVISION=1 to skip)")
	return ""
}

// TestTorchvisionFidelity packs a folder of real photos (Debian's wallpapers) and unusual
// images with Resize(256) + CenterCrop(224) and requires every record to equal, byte for byte,
// what torchvision's ImageFolder + Resize + CenterCrop produce on PIL images, and every input
// Pillow cannot open to be skipped with a reason.
func TestTorchvisionFidelity(t *testing.T) {
	py := python(t)
	root := filepath.Join(t.TempDir(), "photos")
	photos, _ := filepath.Glob("/usr/share/backgrounds/*.jpg")
	pngs, _ := filepath.Glob("/usr/share/backgrounds/*.png")
	photos = append(photos, pngs...)
	if len(photos) == 0 {
		t.Fatal("no real photos in /usr/share/backgrounds (scripts/setup.sh installs ukui-wallpapers)")
	}
	link := func(class, src string) {
		dir := filepath.Join(root, class)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(src, filepath.Join(dir, filepath.Base(src))); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range photos {
		link("photos", p)
	}
	corpus, _ := filepath.Abs("../../transforms/testdata/corpus")
	for _, name := range []string{"baseline-420.jpg", "baseline-422.jpg", "progressive.jpg", "grey.jpg",
		"cmyk-adobe.jpg", "ycck.jpg", "adobe-rgb.jpg", "palette.png", "palette-trns.png", "rgba.png", "la.png",
		"grey16.png", "rgb16.png", "rgb-interlaced.png", "tiny-1x1.jpg", "wide-4000x20.jpg", "exif-rotate6.jpg",
		"rgb.bmp", "rgb.tif", "lossy.webp", "lossless.webp",
		"truncated.jpg", "empty.jpg", "text.jpg", "huge-60000x60000.jpg"} {
		link("unusual", filepath.Join(corpus, name))
	}
	out := filepath.Join(t.TempDir(), "out")
	mustRun(t, "build", root, "-o", out, "--resize", "256", "--crop", "224", "--workers", "2")

	ref := filepath.Join(t.TempDir(), "ref.jsonl")
	if b, err := exec.Command(py, "testdata/torchvision_ref.py", root, "256", "224", ref).CombinedOutput(); err != nil {
		t.Fatalf("torchvision reference: %v\n%s", err, b)
	}
	refData, err := os.ReadFile(ref + ".bin")
	if err != nil {
		t.Fatal(err)
	}
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	skipped := map[string]string{}
	for _, s := range m.Skipped {
		skipped[s.Input] = s.Reason
	}
	recs, labels, _ := readShards(t, out)
	f, err := os.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	const size = 224 * 224 * 3
	var k, packed int
	for sc.Scan() {
		var e struct {
			Path  string
			Label int64
			OK    bool
			Error string
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, e.Path)
		if !e.OK {
			if _, ok := skipped[filepath.ToSlash(rel)]; !ok {
				t.Errorf("%s: Pillow cannot open it (%s) but packer did not skip it", rel, e.Error)
			}
			continue
		}
		if _, ok := skipped[filepath.ToSlash(rel)]; ok {
			t.Errorf("%s: Pillow opens it but packer skipped it: %s", rel, skipped[rel])
			continue
		}
		want := refData[k*size : (k+1)*size]
		k++
		if packed >= len(recs) {
			t.Fatalf("packer packed %d records, torchvision has more", len(recs))
		}
		if !bytes.Equal(recs[packed], want) {
			t.Errorf("%s: packed record differs from torchvision Resize(256)+CenterCrop(224)", rel)
		}
		if labels[packed] != e.Label {
			t.Errorf("%s: label %d, torchvision %d", rel, labels[packed], e.Label)
		}
		packed++
	}
	if packed != len(recs) {
		t.Fatalf("packer packed %d records, torchvision %d", len(recs), packed)
	}
	for in, why := range skipped {
		if strings.TrimSpace(why) == "" {
			t.Errorf("%s skipped without a reason", in)
		}
	}
	t.Logf("%d images identical to torchvision, %d skipped as Pillow refuses them", packed, len(skipped))
}
