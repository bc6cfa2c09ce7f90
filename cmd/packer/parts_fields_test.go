package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCOCO writes images 0..n-1 (PNG) under dir/img and dir/instances.json, whose boxes are
// shifted by shift: two files that differ only in one box's x.
func writeCOCO(t *testing.T, dir string, n int, shift float64) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "img"), 0o755); err != nil {
		t.Fatal(err)
	}
	var images, anns []map[string]any
	for i := range n {
		name := fmt.Sprintf("img/%02d.png", i)
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			writePNG(t, filepath.Join(dir, name), 12+i, 10, i)
		}
		images = append(images, map[string]any{"id": i + 1, "file_name": name, "width": 12 + i, "height": 10})
		x := 1.0
		if i == 0 {
			x += shift
		}
		anns = append(anns, map[string]any{"id": 100 + i, "image_id": i + 1, "bbox": []float64{x, 2, 5, 4}, "category_id": 1, "iscrowd": 0, "area": 20})
	}
	b, err := json.Marshal(map[string]any{"images": images, "annotations": anns, "categories": []map[string]any{{"id": 1, "name": "thing"}}})
	if err != nil {
		t.Fatal(err)
	}
	ann := filepath.Join(dir, "instances.json")
	if err := os.WriteFile(ann, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return ann
}

// writeMask writes a w×h grey PNG whose values are (x+y+seed) mod 3.
func writeMask(t *testing.T, path string, w, h, seed int) {
	t.Helper()
	m := image.NewGray(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = byte((i%w + i/w + seed) % 3)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, m); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPartsOfTwoAnnotationFiles: the parts of a COCO build made from two versions of the
// annotation file (one box moved, the same file names) are refused by the merge, as parts of
// two listings; parts of one version merge into the one-machine build.
func TestPartsOfTwoAnnotationFiles(t *testing.T) {
	root := t.TempDir()
	ann := writeCOCO(t, root, 6, 0)
	args := []string{"--from", "coco", "--resize", "8", "--crop", "8", "--workers", "2"}
	full := filepath.Join(root, "full")
	mustRun(t, append([]string{"build", ann, "-o", full}, args...)...)
	sameTree(t, full, buildPartsFrom(t, ann, filepath.Join(root, "same"), 2, args...))

	p0, p1 := filepath.Join(root, "mixed", "p0"), filepath.Join(root, "mixed", "p1")
	mustRun(t, append([]string{"build", ann, "-o", p0, "--part", "0/2"}, args...)...)
	writeCOCO(t, root, 6, 0.5) // the box of image 1, in part 0's half
	mustRun(t, append([]string{"build", ann, "-o", p1, "--part", "1/2"}, args...)...)
	_, errs, code := run(t, "merge", "-o", filepath.Join(root, "mixed", "merged"), p0, p1)
	if code == 0 || !strings.Contains(errs, "source listing") {
		t.Fatalf("merge of parts from two annotation files: exit %d, want a refusal naming the listing:\n%s", code, errs)
	}
}

// TestPartsOfTwoMaskVersions: the parts of a pairs build whose masks changed between them (the
// same names, one mask rewritten) are refused by the merge, as parts of two copies of a source.
func TestPartsOfTwoMaskVersions(t *testing.T) {
	root := t.TempDir()
	img, masks := filepath.Join(root, "img"), filepath.Join(root, "masks")
	for _, d := range []string{img, masks} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		writePNG(t, filepath.Join(img, fmt.Sprintf("%02d.png", i)), 10, 8, i)
		writeMask(t, filepath.Join(masks, fmt.Sprintf("%02d.png", i)), 10, 8, i)
	}
	args := []string{"--from", "pairs", "--masks", masks, "--resize", "8", "--workers", "2"}
	full := filepath.Join(root, "full")
	mustRun(t, append([]string{"build", img, "-o", full}, args...)...)
	sameTree(t, full, buildPartsFrom(t, img, filepath.Join(root, "same"), 2, args...))

	p0, p1 := filepath.Join(root, "mixed", "p0"), filepath.Join(root, "mixed", "p1")
	mustRun(t, append([]string{"build", img, "-o", p0, "--part", "0/2"}, args...)...)
	m := filepath.Join(masks, "01.png")
	writeMask(t, m, 10, 8, 2) // part 0's mask, rewritten
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(m, later, later); err != nil {
		t.Fatal(err)
	}
	mustRun(t, append([]string{"build", img, "-o", p1, "--part", "1/2"}, args...)...)
	_, errs, code := run(t, "merge", "-o", filepath.Join(root, "mixed", "merged"), p0, p1)
	if code == 0 || !strings.Contains(errs, "content_sha256") {
		t.Fatalf("merge of parts built around a mask's change: exit %d, want a refusal naming content_sha256:\n%s", code, errs)
	}
}

// TestPlanRecordsFieldFlags: a plan records --fields, --images and --masks (the folders as
// absolute paths); a part built from it takes them, and a part given another value is refused
// (exit 2, naming the flag and the plan). A plan written before these flags existed records
// none: a part takes their empty values and is refused one.
func TestPlanRecordsFieldFlags(t *testing.T) {
	root := t.TempDir()
	img, masks, other := filepath.Join(root, "img"), filepath.Join(root, "masks"), filepath.Join(root, "other")
	for _, d := range []string{img, masks, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		writePNG(t, filepath.Join(img, fmt.Sprintf("%02d.png", i)), 10, 8, i)
		writeMask(t, filepath.Join(masks, fmt.Sprintf("%02d.png", i)), 10, 8, i)
		writeMask(t, filepath.Join(other, fmt.Sprintf("%02d.png", i)), 10, 8, i+1)
	}
	plan := filepath.Join(root, "pairs.plan")
	t.Chdir(root)
	mustRun(t, "plan", img, "-o", plan, "--from", "pairs", "--masks", "masks")
	var h struct {
		Options map[string]string `json:"options"`
	}
	head, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(strings.SplitN(string(head), "\n", 2)[0]), &h); err != nil {
		t.Fatal(err)
	}
	if h.Options["masks"] != masks || h.Options["fields"] != "" || h.Options["images"] != "" {
		t.Fatalf("plan options masks %q fields %q images %q, want masks %q", h.Options["masks"], h.Options["fields"], h.Options["images"], masks)
	}
	full := filepath.Join(root, "full")
	mustRun(t, "build", img, "-o", full, "--from", "pairs", "--masks", masks, "--resize", "8")
	sameTree(t, full, buildPartsFrom(t, plan, filepath.Join(root, "fromplan"), 2, "--resize", "8"))
	// The same folder named relatively agrees with the plan; another folder does not.
	mustRun(t, "build", plan, "-o", filepath.Join(root, "rel"), "--part", "0/2", "--masks", "masks", "--resize", "8")
	_, errs, code := run(t, "build", plan, "-o", filepath.Join(root, "bad"), "--part", "1/2", "--masks", other, "--resize", "8")
	if code != 2 || !strings.Contains(errs, "--masks") || !strings.Contains(errs, plan) {
		t.Fatalf("part with another --masks: exit %d, want 2 naming --masks and the plan:\n%s", code, errs)
	}

	// A folder plan as written before --fields, --images and --masks were recorded.
	folder := filepath.Join(root, "folder")
	writePNGFolder(t, folder, 4)
	old := filepath.Join(root, "old.plan")
	mustRun(t, "plan", folder, "-o", old)
	b, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, k := range []string{`"fields":"",`, `"images":"",`, `"masks":"",`} {
		if !strings.Contains(s, k) {
			t.Fatalf("plan header lacks %s:\n%.600s", k, s)
		}
		s = strings.Replace(s, k, "", 1)
	}
	if err := os.WriteFile(old, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "build", old, "-o", filepath.Join(root, "oldpart"), "--part", "0/2", "--resize", "8")
	_, errs, code = run(t, "build", old, "-o", filepath.Join(root, "oldbad"), "--part", "1/2", "--fields", "txt", "--resize", "8")
	if code != 2 || !strings.Contains(errs, "--fields") {
		t.Fatalf("part given --fields with a plan that records none: exit %d, want 2 naming --fields:\n%s", code, errs)
	}
}
