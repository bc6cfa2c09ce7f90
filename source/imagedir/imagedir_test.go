package imagedir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// corpus returns a file of the transforms decode corpus.
func corpus(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "transforms", "testdata", "corpus", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, root string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func enumerate(t *testing.T, s *Source) []source.Item {
	t.Helper()
	var items []source.Item
	if err := s.Enumerate(context.Background(), func(it source.Item) error {
		items = append(items, it)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return items
}

func names(items []source.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Name)
	}
	return out
}

func TestFolderOrderAndFilters(t *testing.T) {
	root := t.TempDir()
	jpg, png := corpus(t, "baseline-420.jpg"), corpus(t, "rgb.png")
	write(t, root, map[string][]byte{
		"dog/b.JPG":                jpg,
		"dog/a.png":                png,
		"dog/a/z.jpeg":             jpg,
		"dog/a-b/y.webp":           corpus(t, "lossless.webp"),
		"dog/notes.txt":            []byte("x"),
		"dog/.hidden.jpg":          jpg,
		"dog/.cache/c.jpg":         jpg,
		"cat/x.Tiff":               corpus(t, "rgb.tif"),
		"cat/y.bmp":                corpus(t, "rgb.bmp"),
		"cat/z.pgm":                corpus(t, "grey.ppm"),
		".ipynb_checkpoints/k.jpg": jpg,
		"README.md":                []byte("not a class"),
	})
	s, err := OpenFolder(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	info := s.Info()
	if !reflect.DeepEqual(info.Classes, []string{"cat", "dog"}) {
		t.Errorf("classes %v", info.Classes)
	}
	items := enumerate(t, s)
	// torchvision order: folders sorted by path ("dog", "dog/a", "dog/a-b"), files by name.
	want := []string{"cat/x.Tiff", "cat/y.bmp", "cat/z.pgm", "dog/a.png", "dog/b.JPG", "dog/a/z.jpeg", "dog/a-b/y.webp"}
	if got := names(items); !reflect.DeepEqual(got, want) {
		t.Errorf("order\n got %v\nwant %v", got, want)
	}
	if info.Count != int64(len(want)) {
		t.Errorf("count %d, want %d", info.Count, len(want))
	}
	for i, it := range items {
		if it.Seq != int64(i) || it.Label != map[bool]int64{true: 0, false: 1}[strings.HasPrefix(it.Name, "cat/")] {
			t.Errorf("item %d: seq %d label %d", i, it.Seq, it.Label)
		}
		var got []transforms.Image
		if err := s.Decode(context.Background(), it, func(c source.Clip) error {
			got = append(got, c.Frames...)
			if c.Label != it.Label {
				t.Errorf("%s: clip label %d", it.Name, c.Label)
			}
			return nil
		}); err != nil {
			t.Errorf("%s: %v", it.Name, err)
		} else if len(got) != 1 || got[0].C != 3 {
			t.Errorf("%s: decoded %d frames", it.Name, len(got))
		}
	}
	for _, v := range info.Spec {
		if s, ok := v.(string); ok && strings.Contains(s, root) {
			t.Errorf("spec holds the absolute root: %v", info.Spec)
		}
	}
}

func TestFolderEmptyClass(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string][]byte{"a/x.jpg": corpus(t, "baseline-420.jpg"), "b/readme.txt": []byte("x")})
	if err := os.Mkdir(filepath.Join(root, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := OpenFolder(root, Options{})
	if !errors.Is(err, ErrEmptyClass) || !strings.Contains(err.Error(), "b, c") {
		t.Fatalf("got %v, want ErrEmptyClass naming b, c", err)
	}
	if _, err := OpenFolder(t.TempDir(), Options{}); !errors.Is(err, ErrNoClasses) {
		t.Fatalf("empty root: got %v, want ErrNoClasses", err)
	}
}

func TestFolderSymlinks(t *testing.T) {
	root := t.TempDir()
	other := t.TempDir()
	write(t, other, map[string][]byte{"ext.jpg": corpus(t, "baseline-420.jpg")})
	write(t, root, map[string][]byte{"a/x.jpg": corpus(t, "baseline-420.jpg")})
	if err := os.Symlink(other, filepath.Join(root, "b")); err != nil {
		t.Skip("no symlinks:", err)
	}
	if err := os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "a", "loop")); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFolder(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(enumerate(t, s)), []string{"a/x.jpg", "b/ext.jpg"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestDecodeBadImage(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string][]byte{"a/bad.jpg": corpus(t, "truncated.jpg")})
	s, err := OpenFolder(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	it := enumerate(t, s)[0]
	err = s.Decode(context.Background(), it, func(source.Clip) error { return nil })
	var ie *source.InputError
	if !errors.As(err, &ie) || !errors.Is(err, transforms.ErrTruncated) {
		t.Fatalf("got %v, want an InputError wrapping ErrTruncated", err)
	}
	if strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), "a/bad.jpg") {
		t.Errorf("error %q should name a/bad.jpg and not the absolute root", err)
	}
}

func TestListCSVAndJSONL(t *testing.T) {
	root := t.TempDir()
	jpg := corpus(t, "baseline-420.jpg")
	write(t, root, map[string][]byte{"img/1.jpg": jpg, "img/2.jpg": jpg, "sub/3.png": corpus(t, "rgb.png")})
	cases := []struct {
		name, body string
		classes    []string
		labels     []int64
		wantErr    bool
	}{
		{"ints.csv", "path,label\nimg/2.jpg,5\nimg/1.jpg,0\n./sub/3.png,2\n", nil, []int64{5, 0, 2}, false},
		{"names.csv", "label,path,extra\ndog,img/2.jpg,x\ncat,img/1.jpg,y\n\"dog\",\"sub/3.png\",z\n", []string{"cat", "dog"}, []int64{1, 0, 1}, false},
		{"mixed.csv", "path,label\nimg/1.jpg,3\nimg/2.jpg,cat\n", []string{"3", "cat"}, []int64{0, 1}, false},
		{"ints.jsonl", "{\"path\": \"img/1.jpg\", \"label\": 7}\n\n{\"path\":\"img/2.jpg\",\"label\":0}\n", nil, []int64{7, 0}, false},
		{"names.jsonl", "{\"path\": \"img/1.jpg\", \"label\": \"b\"}\n{\"path\":\"img/2.jpg\",\"label\":\"a\"}\n", []string{"a", "b"}, []int64{1, 0}, false},
		{"sniffed.txt", "{\"path\": \"img/1.jpg\", \"label\": 1}\n", nil, []int64{1}, false},
		{"mix.jsonl", "{\"path\": \"img/1.jpg\", \"label\": 1}\n{\"path\":\"img/2.jpg\",\"label\":\"a\"}\n", nil, nil, true},
		{"neg.jsonl", "{\"path\": \"img/1.jpg\", \"label\": -1}\n", nil, nil, true},
		{"noheader.csv", "img/1.jpg,1\n", nil, nil, true},
		{"nolabel.csv", "path,label\nimg/1.jpg,\n", nil, nil, true},
		{"empty.csv", "path,label\n", nil, nil, true},
		{"badjson.jsonl", "{\"path\": \n", nil, nil, true},
	}
	listDir := filepath.Join(root, "list")
	if err := os.Symlink(root, listDir); err != nil {
		t.Skip(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lp := filepath.Join(root, c.name)
			if err := os.WriteFile(lp, []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := OpenList(lp, Options{})
			if c.wantErr {
				var fe FormatError
				if err == nil || !errors.As(err, &fe) {
					t.Fatalf("got %v, want a FormatError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Info().Classes; !reflect.DeepEqual(got, c.classes) && !(len(got) == 0 && len(c.classes) == 0) {
				t.Errorf("classes %v, want %v", got, c.classes)
			}
			items := enumerate(t, s)
			var labels []int64
			for _, it := range items {
				labels = append(labels, it.Label)
				if err := s.Decode(context.Background(), it, func(source.Clip) error { return nil }); err != nil {
					t.Errorf("%s: %v", it.Name, err)
				}
			}
			if !reflect.DeepEqual(labels, c.labels) {
				t.Errorf("labels %v, want %v", labels, c.labels)
			}
			if s.Info().Count != int64(len(c.labels)) {
				t.Errorf("count %d", s.Info().Count)
			}
		})
	}
}

// FuzzList feeds arbitrary list files to the CSV and JSONL parsers: no panic, and whatever
// opens enumerates the number of entries it counted.
func FuzzList(f *testing.F) {
	f.Add([]byte("path,label\na.jpg,1\nb.jpg,cat\n"), false)
	f.Add([]byte("{\"path\": \"a.jpg\", \"label\": 3}\n{\"path\": \"b\", \"label\": 1}\n"), true)
	f.Add([]byte("label,path\n\"x\"\"y\",\"p,q\"\n"), false)
	f.Add([]byte("{\"path\": \"a.jpg\", \"caption\": \"c\", \"tags\": [1, 2]}\n{\"path\": \"b\", \"label\": 1, \"tags\": [0.5]}\n"), true)
	f.Add([]byte("path,caption,label\na.jpg,\"x, y\",\nb.jpg,z,2\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, jsonl bool) {
		dir := t.TempDir()
		name := "list.csv"
		if jsonl {
			name = "list.jsonl"
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, fields := range [][]string{nil, {"caption", "tags"}} {
			s, err := OpenList(p, Options{Fields: fields})
			if err != nil {
				continue
			}
			n := int64(0)
			if err := s.Enumerate(context.Background(), func(it source.Item) error {
				n++
				if it.Label < -1 || it.Label == -1 && fields == nil || (s.named && it.Label >= int64(len(s.classes))) {
					t.Fatalf("label %d out of range", it.Label)
				}
				if fields != nil {
					if fn, ok := it.Note.(fieldNote); !ok || fn.err == nil && len(fn.values) != len(fields) {
						t.Fatalf("item %s: field note %#v", it.Name, it.Note)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if n != s.count {
				t.Fatalf("enumerated %d, counted %d", n, s.count)
			}
		}
	})
}

// TestFastOption checks that a DecodePlan whose transform has Fast decodes JPEGs at a reduced scale.
func TestFastOption(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string][]byte{"a/wide.jpg": corpus(t, "wide-4000x20.jpg")})
	for _, c := range []struct {
		fast bool
		gap  int
		w    int
	}{{false, 0, 4000}, {true, 0, 1000}, {true, 2, 2000}} {
		spec := transforms.Spec{Resize: 5, Fast: c.fast}
		s, err := OpenFolder(root, Options{FastGap: c.gap})
		if err != nil {
			t.Fatal(err)
		}
		s.PlanDecode(source.DecodePlan{Transform: spec.MustCompile()})
		if got := s.Info().Spec["fast_decode"]; got != c.fast {
			t.Errorf("fast %v: spec fast_decode %v", c.fast, got)
		}
		it := enumerate(t, s)[0]
		if err := s.Decode(context.Background(), it, func(cl source.Clip) error {
			if f := cl.Frames[0]; f.W != c.w {
				t.Errorf("fast %v gap %d: decoded width %d, want %d", c.fast, c.gap, f.W, c.w)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWindowsMatchWholeFrames decodes every corpus image (JPEGs of every kind, the damaged
// ones, PNGs) with and without DecodePlan.Windows, for several transforms, and checks that the
// windowed frames give the same transformed bytes and the same errors, and that JPEGs were
// really decoded as windows.
func TestWindowsMatchWholeFrames(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "transforms", "testdata", "corpus", "*"))
	root := t.TempDir()
	m := map[string][]byte{}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() > 1<<20 {
			continue
		}
		m["a/"+filepath.Base(f)] = corpus(t, filepath.Base(f))
	}
	write(t, root, m)
	windowed := 0
	for _, spec := range []transforms.Spec{
		{Resize: 16, CropW: 12, CropH: 12},
		{Resize: 40, CropW: 30, CropH: 20, Filter: transforms.Lanczos},
		{Width: 20, Height: 9, Filter: transforms.Bicubic, CropW: 50, CropH: 5},
	} {
		run := func(windows bool) map[string]string {
			s, err := OpenFolder(root, Options{Decode: transforms.DecodeOptions{MaxPixels: 1 << 26}})
			if err != nil {
				t.Fatal(err)
			}
			s.PlanDecode(source.DecodePlan{Transform: spec.MustCompile(), Windows: windows})
			out := map[string]string{}
			for _, it := range enumerate(t, s) {
				err := s.Decode(context.Background(), it, func(c source.Clip) error {
					f := c.Frames[0]
					fw, fh := f.W, f.H
					var x, y int
					if c.Windows != nil {
						w := c.Windows[0]
						x, y, fw, fh = w.X, w.Y, w.FullW, w.FullH
						windowed++
					}
					dst := make([]byte, spec.MustCompile().OutputSpec(fw, fh, f.C).Size())
					if err := spec.MustCompile().NewWorker().ApplyWindow(f, x, y, fw, fh, dst); err != nil {
						return err
					}
					out[it.Name] = string(dst)
					return nil
				})
				if err != nil {
					out[it.Name] = "error: " + err.Error()
				}
			}
			return out
		}
		whole, win := run(false), run(true)
		if len(whole) == 0 || len(whole) != len(win) {
			t.Fatalf("%+v: %d whole, %d windowed results", spec, len(whole), len(win))
		}
		for name, w := range whole {
			if win[name] != w {
				t.Errorf("%+v: %s: windowed decode gives a different result", spec, name)
			}
		}
	}
	if windowed == 0 {
		t.Fatal("no JPEG was decoded as a window")
	}
}

// TestListShortLineCount: a CSV line with too few fields says how many it has, one in the
// singular ("1 field", not "1 fields").
func TestListShortLineCount(t *testing.T) {
	lp := filepath.Join(t.TempDir(), "short.csv")
	if err := os.WriteFile(lp, []byte("path,label\nimg/1.jpg\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenList(lp, Options{})
	if err == nil || !strings.Contains(err.Error(), "1 field, want at least 2") {
		t.Fatalf("got %v, want the line's 1 field in the singular", err)
	}
}
