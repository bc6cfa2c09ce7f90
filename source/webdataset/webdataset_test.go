package webdataset

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/transforms"
)

// member is one tar member of a fixture: bytes from a file, or inline text.
type member struct {
	Name string `json:"name"`
	File string `json:"file,omitempty"`
	Text string `json:"text,omitempty"`
}

// writeTar writes a shard with webdataset's TarWriter, one sample per run of consecutive
// members with the same key (gzip-compressed afterwards when the name ends in .gz).
func writeTar(t *testing.T, path string, members []member) {
	t.Helper()
	spec, _ := json.Marshal(members)
	script := `
import gzip, io, json, os, shutil, sys
import webdataset as wds
out, members = sys.argv[1], json.loads(sys.argv[2])
samples = []
for m in members:
    key, ext = m["name"].split(".", 1) if "." in m["name"].split("/")[-1] else (m["name"], "")
    data = open(m["file"], "rb").read() if m.get("file") else m.get("text", "").encode()
    if not samples or samples[-1]["__key__"] != key:
        samples.append({"__key__": key})
    samples[-1][ext] = data
plain = out[:-3] if out.endswith(".gz") else out
with wds.TarWriter(plain) as sink:
    for s in samples:
        sink.write(s)
if out.endswith(".gz"):
    with open(plain, "rb") as src, gzip.open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(plain)
`
	if out, err := exec.Command(testfix.NeedFixturePython(t, "webdataset"), "-c", script, path, string(spec)).CombinedOutput(); err != nil {
		t.Fatalf("webdataset TarWriter: %v\n%s", err, out)
	}
}

// records builds src with spec and returns every record's bytes, label and metadata, and the
// manifest's skipped list.
func records(t *testing.T, src source.Source, spec transforms.Spec) (recs [][]byte, labels []int64, metas []string, skipped map[string]string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := pipeline.Build(context.Background(), pipeline.Options{Source: src, Transform: spec.MustCompile(), Output: shards.Entry, Out: out, Workers: 3}); err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for i := int64(0); i < ds.Len(); i++ {
		r, err := ds.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := ds.Label(i)
		recs, labels = append(recs, append([]byte(nil), r...)), append(labels, l)
		s, j := ds.Locate(i)
		rd, _ := ds.Shard(s)
		metas = append(metas, string(rd.RecordMeta(j)))
	}
	skipped = map[string]string{}
	for _, s := range ds.Manifest().Skipped {
		skipped[s.Input] = s.Reason
	}
	return recs, labels, metas, skipped
}

// TestSameRecordsAsFolder packs the same image bytes from a folder and from WebDataset shards
// written by webdataset's TarWriter (two shards, one gzip-compressed, samples split across
// them) and requires identical records
// and labels in the same order: the webdataset source decodes the member bytes exactly as an
// image folder decodes the files (whose pixels the fidelity tests compare with Pillow).
func TestSameRecordsAsFolder(t *testing.T) {
	root := t.TempDir()
	imgs := [][2]string{ // class, corpus file
		{"a", "baseline-420.jpg"}, {"a", "grey.png"}, {"a", "progressive.jpg"},
		{"b", "rgb.ppm"}, {"b", "exif-rotate6.jpg"}, {"b", "rgba-alpha.png"},
	}
	var m0, m1 []member
	for i, im := range imgs {
		if _, err := os.Stat(testfix.Corpus(im[1])); err != nil {
			t.Fatalf("corpus image: %v", err)
		}
		dst := filepath.Join(root, "folder", im[0], fmt.Sprintf("%03d%s", i, filepath.Ext(im[1])))
		os.MkdirAll(filepath.Dir(dst), 0o755)
		data, _ := os.ReadFile(testfix.Corpus(im[1]))
		os.WriteFile(dst, data, 0o644)
		label := map[string]string{"a": "0", "b": "1"}[im[0]]
		key := fmt.Sprintf("s/%03d", i)
		ms := []member{{Name: key + ".cls", Text: label + "\n"}, {Name: key + filepath.Ext(im[1]), File: testfix.Corpus(im[1])}, {Name: key + ".json", Text: "{}"}}
		if i < 4 {
			m0 = append(m0, ms...)
		} else {
			m1 = append(m1, ms...)
		}
	}
	os.MkdirAll(filepath.Join(root, "wds"), 0o755)
	writeTar(t, filepath.Join(root, "wds", "shard-000000.tar"), m0)
	writeTar(t, filepath.Join(root, "wds", "shard-000001.tar.gz"), m1)

	for _, spec := range []transforms.Spec{{}, {Resize: 24, CropW: 20, CropH: 20, Layout: transforms.CHW}} {
		if spec.Resize == 0 {
			spec.CropW, spec.CropH = 16, 16
		}
		fsrc, err := imagedir.OpenFolder(filepath.Join(root, "folder"), imagedir.Options{Decode: transforms.DecodeOptions{ExifOrient: true}})
		if err != nil {
			t.Fatal(err)
		}
		wsrc, err := Open(filepath.Join(root, "wds"), Options{Decode: transforms.DecodeOptions{ExifOrient: true}, Classes: []string{"a", "b"}})
		if err != nil {
			t.Fatal(err)
		}
		frecs, flabels, _, _ := records(t, fsrc, spec)
		wrecs, wlabels, metas, skipped := records(t, wsrc, spec)
		if len(skipped) != 0 || len(wrecs) != len(imgs) || len(frecs) != len(imgs) {
			t.Fatalf("%+v: %d folder records, %d webdataset records, skipped %v", spec, len(frecs), len(wrecs), skipped)
		}
		for i := range frecs {
			if !bytes.Equal(frecs[i], wrecs[i]) || flabels[i] != wlabels[i] {
				t.Errorf("%+v: record %d (%s) differs from the folder's (label %d vs %d)", spec, i, imgs[i][1], wlabels[i], flabels[i])
			}
		}
		wantMeta := fmt.Sprintf(`{"image":"s/004%s","key":"s/004","shard":"shard-000001.tar.gz"}`, filepath.Ext(imgs[4][1]))
		if metas[4] != wantMeta {
			t.Errorf("record 4 metadata %s, want %s", metas[4], wantMeta)
		}
	}
}

// TestBadSamples: every kind of bad sample is skipped with its reason and the good ones are
// packed; a truncated shard keeps what came before the damage and the build goes on.
func TestBadSamples(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "wds")
	os.MkdirAll(dir, 0o755)
	good := testfix.Corpus("baseline-420.jpg")
	writeTar(t, filepath.Join(dir, "a.tar"), []member{
		{Name: "ok1.jpg", File: good}, {Name: "ok1.cls", Text: "3"},
		{Name: "nolabel.jpg", File: good},
		{Name: "noimage.cls", Text: "1"}, {Name: "noimage.txt", Text: "caption"},
		{Name: "badlabel.jpg", File: good}, {Name: "badlabel.cls", Text: "-2"},
		{Name: "corrupt.jpg", File: testfix.Corpus("truncated.jpg")}, {Name: "corrupt.cls", Text: "0"},
		{Name: "ok2.png", File: testfix.Corpus("grey.png")}, {Name: "ok2.cls", Text: "0"},
	})
	// b.tar: two good samples, then cut in the middle of the third's image.
	writeTar(t, filepath.Join(dir, "b.tar"), []member{
		{Name: "x1.jpg", File: good}, {Name: "x1.cls", Text: "1"},
		{Name: "x2.jpg", File: good}, {Name: "x2.cls", Text: "2"},
		{Name: "x3.jpg", File: testfix.Corpus("wide-4000x20.jpg")}, {Name: "x3.cls", Text: "2"},
	})
	data, _ := os.ReadFile(filepath.Join(dir, "b.tar"))
	wide, _ := os.ReadFile(testfix.Corpus("wide-4000x20.jpg"))
	cut := bytes.Index(data, wide[:256]) + 4000 // inside x3's image
	// The members read whole before the cut, in the order TarWriter wrote them.
	before := 0
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err != nil || h.Name == "x3.jpg" {
			break
		}
		before++
	}
	if cut < 4000 || before < 4 {
		t.Fatalf("fixture: x3.jpg not found in b.tar (cut %d, %d members before)", cut, before)
	}
	os.WriteFile(filepath.Join(dir, "b.tar"), data[:cut], 0o644)
	writeTar(t, filepath.Join(dir, "c.tar"), []member{{Name: "y.jpg", File: good}, {Name: "y.cls", Text: "4"}})

	src, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, labels, metas, skipped := records(t, src, transforms.Spec{CropW: 8, CropH: 8})
	var keys []string
	for _, m := range metas {
		var v map[string]string
		json.Unmarshal([]byte(m), &v)
		keys = append(keys, v["shard"]+":"+v["key"])
	}
	if got := strings.Join(keys, " "); got != "a.tar:ok1 a.tar:ok2 b.tar:x1 b.tar:x2 c.tar:y" || fmt.Sprint(labels) != "[3 0 1 2 4]" || len(recs) != 5 {
		t.Errorf("packed %s labels %v", got, labels)
	}
	want := map[string]string{
		"a.tar:nolabel":  ErrNoLabel.Error(),
		"a.tar:noimage":  ErrNoImage.Error(),
		"a.tar:badlabel": `bad label: .cls holds "-2"`,
		"a.tar:corrupt":  "",
		fmt.Sprintf("b.tar (after member %d)", before): ErrTruncated.Error(),
	}
	for in, reason := range want {
		r, ok := skipped[in]
		if !ok || !strings.Contains(r, reason) {
			t.Errorf("skipped[%s] = %q (present %v), want it to contain %q", in, r, ok, reason)
		}
	}
	if len(skipped) != len(want) {
		t.Errorf("skipped %v, want exactly %d entries", skipped, len(want))
	}
}

// TestLabelOutOfClasses: with --classes, a label beyond the named classes is a bad sample.
func TestLabelOutOfClasses(t *testing.T) {
	dir := t.TempDir()
	writeTar(t, filepath.Join(dir, "s.tar"), []member{{Name: "k.jpg", File: testfix.Corpus("grey.jpg")}, {Name: "k.cls", Text: "2"}})
	src, err := Open(dir, Options{Classes: []string{"x", "y"}})
	if err != nil {
		t.Fatal(err)
	}
	var it source.Item
	if err := src.Enumerate(context.Background(), func(i source.Item) error { it = i; return nil }); err != nil {
		t.Fatal(err)
	}
	err = src.Decode(context.Background(), it, func(source.Clip) error { return nil })
	var ie *source.InputError
	if !errors.As(err, &ie) || !errors.Is(err, ErrLabel) || ie.Input != "s.tar:k" {
		t.Errorf("Decode: %v, want an InputError for s.tar:k wrapping ErrLabel", err)
	}
}

// TestOpenRefusesEmptyFolder: a folder without shards is an error naming it.
func TestOpenRefusesEmptyFolder(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "readme.txt"), []byte("x"), 0o644)
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "no shard") {
		t.Errorf("Open: %v", err)
	}
}

// TestKeysAndList: --image-key picks the image by extension preference, --label-key reads the
// label from a field of the .json member, and a .txt list names shards in its own order.
func TestKeysAndList(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	writeTar(t, filepath.Join(dir, "sub", "z.tar"), []member{
		{Name: "a.jpg", File: testfix.Corpus("grey.jpg")}, {Name: "a.png", File: testfix.Corpus("rgb.png")}, {Name: "a.json", Text: `{"y": 2, "caption": "x"}`},
		{Name: "b.jpg", File: testfix.Corpus("grey.jpg")}, {Name: "b.json", Text: `{"caption": "no label"}`},
		{Name: "c.png", File: testfix.Corpus("rgb.png")}, {Name: "c.json", Text: `{"y": 1}`},
	})
	writeTar(t, filepath.Join(dir, "a.tar"), []member{{Name: "d.png", File: testfix.Corpus("rgb.png")}, {Name: "d.json", Text: `{"y": 0}`}})
	os.WriteFile(filepath.Join(dir, "list.txt"), []byte("# shards, in training order\nsub/z.tar\n\na.tar\n"), 0o644)
	src, err := Open(filepath.Join(dir, "list.txt"), Options{ImageKey: "png,jpg", LabelKey: "y"})
	if err != nil {
		t.Fatal(err)
	}
	_, labels, metas, skipped := records(t, src, transforms.Spec{CropW: 4, CropH: 4})
	var images []string
	for _, m := range metas {
		var v map[string]string
		json.Unmarshal([]byte(m), &v)
		images = append(images, v["shard"]+":"+v["image"])
	}
	if got := strings.Join(images, " "); got != "sub/z.tar:a.png sub/z.tar:c.png a.tar:d.png" || fmt.Sprint(labels) != "[2 1 0]" {
		t.Errorf("packed %s labels %v", got, labels)
	}
	if r := skipped["sub/z.tar:b"]; !strings.Contains(r, `no label "y" in the .json member`) {
		t.Errorf("sample without the field: %q (skipped %v)", r, skipped)
	}
	if _, err := Open(filepath.Join(dir, "list.txt"), Options{ImageKey: " , "}); err == nil {
		t.Error("an empty --image-key was accepted")
	}
	os.WriteFile(filepath.Join(dir, "bad.txt"), []byte("a.zip\n"), 0o644)
	if _, err := Open(filepath.Join(dir, "bad.txt"), Options{}); err == nil || !strings.Contains(err.Error(), "bad.txt line 1") {
		t.Errorf("a list naming a non-shard: %v", err)
	}
}

// TestDuplicateMembers: a second member of one name (or of one extension in another case) in
// one sample was ignored: "a.jpg" twice packed the first image, "a.cls" "1" then "2" the first
// label, as one record with no skip, where extracting the shard keeps the last and webdataset's
// own reader raises. The sample is skipped with both member names; its neighbours are packed.
func TestDuplicateMembers(t *testing.T) {
	good, _ := os.ReadFile(testfix.Corpus("baseline-420.jpg"))
	grey, _ := os.ReadFile(testfix.Corpus("grey.png"))
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range []struct {
		name string
		data []byte
	}{
		{"ok1.jpg", good}, {"ok1.cls", []byte("1")},
		{"img2.jpg", good}, {"img2.jpg", grey}, {"img2.cls", []byte("0")},
		{"cls2.jpg", good}, {"cls2.cls", []byte("1")}, {"cls2.cls", []byte("2")},
		{"case.jpg", good}, {"case.JPG", grey}, {"case.cls", []byte("0")},
		{"txt2.jpg", good}, {"txt2.cls", []byte("0")}, {"txt2.txt", []byte("a")}, {"txt2.txt", []byte("b")},
		{"ok2.png", grey}, {"ok2.cls", []byte("0")},
	} {
		tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg})
		tw.Write(m.data)
	}
	tw.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "d.tar"), b.Bytes(), 0o644)
	src, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, labels, metas, skipped := records(t, src, transforms.Spec{CropW: 8, CropH: 8})
	if len(metas) != 2 || fmt.Sprint(labels) != "[1 0]" || !strings.Contains(metas[0], `"key":"ok1"`) || !strings.Contains(metas[1], `"key":"ok2"`) {
		t.Errorf("packed %v labels %v, want ok1 and ok2", metas, labels)
	}
	want := map[string]string{
		"d.tar:img2": "two members img2.jpg and img2.jpg",
		"d.tar:cls2": "two members cls2.cls and cls2.cls",
		"d.tar:case": "two members case.jpg and case.JPG",
		"d.tar:txt2": "two members txt2.txt and txt2.txt",
	}
	for in, reason := range want {
		if r := skipped[in]; !strings.Contains(r, ErrDuplicate.Error()) || !strings.Contains(r, reason) {
			t.Errorf("skipped[%s] = %q, want %q", in, r, reason)
		}
	}
	if len(skipped) != len(want) {
		t.Errorf("skipped %v, want exactly %d", skipped, len(want))
	}
}

// TestTooManyMembers: every member of a sample is remembered to find a second one of its name,
// so a sample of more than MaxSampleMembers members (a few KB of tar.gz can hold a million
// headers) is skipped with the reason rather than remembered whole.
func TestTooManyMembers(t *testing.T) {
	good, _ := os.ReadFile(testfix.Corpus("grey.png"))
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	put := func(name string, data []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	put("big.png", good)
	put("big.cls", []byte("0"))
	for i := range MaxSampleMembers {
		put(fmt.Sprintf("big.x%d", i), nil)
	}
	put("ok.png", good)
	put("ok.cls", []byte("1"))
	tw.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "m.tar"), b.Bytes(), 0o644)
	src, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, labels, _, skipped := records(t, src, transforms.Spec{CropW: 8, CropH: 8})
	if fmt.Sprint(labels) != "[1]" || len(skipped) != 1 || !strings.Contains(skipped["m.tar:big"], fmt.Sprintf("more than %d members", MaxSampleMembers)) {
		t.Errorf("labels %v skipped %v", labels, skipped)
	}
}

// TestOpenRefusesCompressedTwin: a folder holding a shard and its gzip copy (gzip -k, or a
// gunzip -k of a downloaded .tar.gz) was read as two shards, every sample of it packed twice at
// exit 0. Open refuses it, naming both; shards of other names are read as before.
func TestOpenRefusesCompressedTwin(t *testing.T) {
	for _, twin := range []string{"s0.tar.gz", "s0.tgz", "S0.TAR.GZ"} {
		dir := t.TempDir()
		for _, n := range []string{"s0.tar", twin, "s1.tar.gz"} {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Open(dir, Options{})
		if err == nil || !strings.Contains(err.Error(), "s0.tar and "+twin) {
			t.Errorf("a folder with s0.tar and %s: Open: %v; want a refusal naming both", twin, err)
		}
	}
	dir := t.TempDir()
	for _, n := range []string{"s0.tar", "s1.tar.gz", "s10.tgz"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(dir, Options{}); err != nil {
		t.Errorf("shards of distinct names: Open: %v", err)
	}
}
