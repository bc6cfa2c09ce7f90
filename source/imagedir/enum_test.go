package imagedir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// buildWithin runs the whole pipeline on src with a fixed crop and fails the test when it does
// not finish within limit (a FIFO opened for reading blocks forever).
func buildWithin(t *testing.T, src source.Source, limit time.Duration) (*shard.Manifest, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	type result struct {
		sum *pipeline.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := pipeline.Build(context.Background(), pipeline.Options{
			Source: src, Transform: transforms.Spec{CropW: 8, CropH: 8}.MustCompile(), Output: shards.Entry, Out: out, Workers: 2,
		})
		done <- result{sum, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		m, err := shard.ReadManifest(out)
		if err != nil {
			t.Fatal(err)
		}
		return m, nil
	case <-time.After(limit):
		t.Fatalf("build did not finish within %v (an input blocked?)", limit)
	}
	return nil, nil
}

func skippedReasons(m *shard.Manifest) map[string]string {
	r := map[string]string{}
	for _, s := range m.Skipped {
		r[s.Input] = s.Reason
	}
	return r
}

// TestFolderSpecialFilesAreListed: every entry with an image name that is not a folder is an
// input, as torchvision's ImageFolder lists it: a symlink to an image is packed; a dangling
// symlink, a symlink loop, a FIFO and a link to a character device are skipped with their
// reason, and the FIFO is never opened for reading (the build would block).
func TestFolderSpecialFilesAreListed(t *testing.T) {
	root := t.TempDir()
	jpg := corpus(t, "baseline-420.jpg")
	write(t, root, map[string][]byte{"a/good.jpg": jpg, "b/other.png": corpus(t, "rgb.png")})
	a := filepath.Join(root, "a")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("good.jpg", filepath.Join(a, "link.jpg")))
	must(os.Symlink("missing.jpg", filepath.Join(a, "dangling.jpg")))
	must(os.Symlink("loop.jpg", filepath.Join(a, "loop.jpg")))
	must(os.Symlink("/dev/null", filepath.Join(a, "null.jpg")))
	must(syscall.Mkfifo(filepath.Join(a, "fifo.jpg"), 0o644))
	s, err := OpenFolder(root, Options{})
	must(err)
	m, err := buildWithin(t, s, 30*time.Second)
	must(err)
	if m.Count != 3 {
		t.Errorf("packed %d records, want 3 (good.jpg, link.jpg, other.png)", m.Count)
	}
	want := map[string]string{
		"a/dangling.jpg": "dangling symlink",
		"a/loop.jpg":     "symlink loop",
		"a/fifo.jpg":     "not a regular file: FIFO",
		"a/null.jpg":     "not a regular file: character device",
	}
	got := skippedReasons(m)
	for name, reason := range want {
		if !strings.Contains(got[name], reason) {
			t.Errorf("skipped[%q] = %q, want a reason containing %q", name, got[name], reason)
		}
	}
	if len(got) != len(want) {
		t.Errorf("skipped %v, want exactly %v", got, want)
	}
}

// TestNonUTF8NamesStayDistinct: class folders and files whose names differ only in bytes that
// are not UTF-8 keep distinct names in the manifest (escaped as \xHH), as do the skipped list's
// entries; a literal backslash is escaped too, so the escaping is reversible.
func TestNonUTF8NamesStayDistinct(t *testing.T) {
	root := t.TempDir()
	jpg := corpus(t, "baseline-420.jpg")
	write(t, root, map[string][]byte{
		"c\xff/x.jpg":       jpg,
		"c\xfe/y.jpg":       jpg,
		"c\xfe/bad\xff.jpg": []byte("not an image"),
		"c\xfe/bad\xfe.jpg": []byte("not an image"),
		"d\\e/z.jpg":        jpg,
	})
	s, err := OpenFolder(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := buildWithin(t, s, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantClasses := []string{`c\xfe`, `c\xff`, `d\\e`}
	if strings.Join(m.Classes, "|") != strings.Join(wantClasses, "|") {
		t.Errorf("classes %q, want %q", m.Classes, wantClasses)
	}
	got := skippedReasons(m)
	for _, name := range []string{`c\xfe/bad\xff.jpg`, `c\xfe/bad\xfe.jpg`} {
		if got[name] == "" {
			t.Errorf("no skipped entry %q in %q", name, got)
		}
	}
	if len(m.Skipped) != 2 {
		t.Errorf("skipped %v, want 2 entries", m.Skipped)
	}
}

// TestListFIFORefused: a list given as a FIFO (read twice: once to check it, once to
// enumerate) is refused with a clear error instead of blocking.
func TestListFIFORefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "list.csv")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := OpenList(p, Options{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file: FIFO") {
			t.Fatalf("got %v, want a FIFO refusal", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OpenList blocked on a FIFO")
	}
}

// TestListDuplicatePathRefused: a list naming one file twice (spelled the same or not, with
// the same label or another) would pack it twice, under two labels at worst; OpenList refuses
// it, naming both lines, before anything is packed.
func TestListDuplicatePathRefused(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, body, want string }{
		{"same.csv", "path,label\na.jpg,cat\nb.jpg,dog\na.jpg,dog\n", "lines 2 and 4"},
		{"spelled.csv", "path,label\nsub/a.jpg,0\n./sub/../sub/a.jpg,0\n", "lines 2 and 3"},
		{"abs.jsonl", `{"path": "a.jpg", "label": 1}` + "\n" + `{"path": "` + filepath.ToSlash(filepath.Join(dir, "a.jpg")) + `", "label": 1}` + "\n", "lines 1 and 2"},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := OpenList(p, Options{})
		var fe FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "twice") {
			t.Errorf("%s: OpenList = %v, want a FormatError naming %s", c.name, err, c.want)
		}
	}
	// Distinct files are fine, including names that differ only in case.
	p := filepath.Join(dir, "ok.csv")
	if err := os.WriteFile(p, []byte("path,label\na.jpg,0\nA.jpg,0\nsub/a.jpg,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenList(p, Options{}); err != nil {
		t.Errorf("OpenList(distinct paths) = %v", err)
	}
}

// TestFolderAliasRefused: a class folder that is a symbolic link to another class folder, or
// a subfolder linking to a folder found elsewhere in the tree, would pack every image in it
// twice, under two labels; OpenFolder refuses the source, naming both paths. A link to a
// folder outside the tree, reached once, is an ordinary class (TestFolderSymlinks).
func TestFolderAliasRefused(t *testing.T) {
	img := []byte("not decoded here")
	cases := map[string]func(root string) error{
		"class alias": func(root string) error { return os.Symlink("cat", filepath.Join(root, "kitty")) },
		"nested alias": func(root string) error {
			return os.Symlink(filepath.Join(root, "dog"), filepath.Join(root, "cat", "more"))
		},
		"nested alias of a subfolder": func(root string) error {
			return os.Symlink(filepath.Join("..", "..", "cat", "sub"), filepath.Join(root, "dog", "sub", "again"))
		},
	}
	for name, link := range cases {
		root := t.TempDir()
		write(t, root, map[string][]byte{"cat/a.jpg": img, "cat/sub/b.jpg": img, "dog/c.jpg": img, "dog/sub/d.jpg": img})
		if err := link(root); err != nil {
			t.Skip("no symlinks:", err)
		}
		_, err := OpenFolder(root, Options{})
		if err == nil || !strings.Contains(err.Error(), "same folder") {
			t.Errorf("%s: OpenFolder = %v, want an error naming the aliased folders", name, err)
		}
	}
}

// TestFolderFileAliasRefused: an image that is a symbolic link to an image of another class
// of the same tree (cat/x.jpg -> ../dog/y.jpg), or two links in two classes to one file, would
// pack that image under two labels; OpenFolder refuses it, naming both. A link to an image of
// its own class (oversampling, as torchvision lists it), to an image outside the tree, or to
// a hidden or non-image file of the tree (never packed itself) is an ordinary input.
func TestFolderFileAliasRefused(t *testing.T) {
	img := []byte("not decoded here")
	root := t.TempDir()
	outside := t.TempDir()
	write(t, root, map[string][]byte{"cat/a.jpg": img, "cat/sub/a2.jpg": img, "dog/b.jpg": img, "dog/sub/c.jpg": img, ".store/d.jpg": img, "dog/e.dat": img})
	write(t, outside, map[string][]byte{"o.jpg": img, "p.jpg": img})
	for _, l := range [][2]string{
		{filepath.Join(outside, "o.jpg"), "cat/outside.jpg"},
		{filepath.Join(outside, "o.jpg"), "cat/sub/outside-again.jpg"},
		{filepath.Join("..", ".store", "d.jpg"), "cat/hidden.jpg"},
		{filepath.Join("..", "dog", "e.dat"), "cat/notimage.jpg"},
		{"a.jpg", "cat/same-class.jpg"},
		{filepath.Join("..", "a.jpg"), "cat/sub/same-class.jpg"},
	} {
		if err := os.Symlink(l[0], filepath.Join(root, l[1])); err != nil {
			t.Skip("no symlinks:", err)
		}
	}
	if _, err := OpenFolder(root, Options{}); err != nil {
		t.Fatalf("links to images never packed under another label: %v", err)
	}
	for _, c := range []struct{ target, link string }{
		{filepath.Join("..", "dog", "b.jpg"), "cat/zz-link.jpg"},
		{filepath.Join("..", "..", "cat", "sub", "a2.jpg"), "dog/sub/zz-link.jpg"},
		{filepath.Join(root, "cat", "a.jpg"), "dog/zz-link.jpg"},
		{filepath.Join(outside, "p.jpg"), "dog/zz-link.jpg"}, // with cat/zz-p.jpg below
	} {
		for _, p := range []string{"cat/zz-link.jpg", "dog/sub/zz-link.jpg", "dog/zz-link.jpg"} {
			os.Remove(filepath.Join(root, p))
		}
		if err := os.Symlink(c.target, filepath.Join(root, c.link)); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(c.target, "p.jpg") {
			if err := os.Symlink(c.target, filepath.Join(root, "cat", "zz-p.jpg")); err != nil {
				t.Fatal(err)
			}
		}
		_, err := OpenFolder(root, Options{})
		if err == nil || !strings.Contains(err.Error(), "zz-") || !strings.Contains(err.Error(), "two labels") {
			t.Errorf("%s -> %s: OpenFolder = %v, want an error naming the link", c.link, c.target, err)
		}
	}
}
