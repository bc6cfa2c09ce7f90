package source_test

// The property test of enumeration: for every source kind, random source trees full of what
// breaks enumerations (symlinks of every kind, FIFOs, device links, empty and misnamed files,
// names that are not UTF-8 or differ only in case) go through the real build, and every input
// a reference walk of the tree finds must be packed or listed in skipped with a reason, exactly
// once, with nothing written outside OUT and no build hanging.

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"image"
	"image/png"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/cifar"
	"github.com/packer-dev/packer/source/idx"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/source/video"
	"github.com/packer-dev/packer/transforms"
)

// propertySeeds are the fixed seeds; two random ones are added on every run (logged).
var propertySeeds = []uint64{1, 2, 3, 4, 5, 6}

func seeds(t *testing.T) []uint64 {
	s := slices.Clone(propertySeeds)
	for range 2 {
		s = append(s, rand.Uint64())
	}
	t.Logf("seeds %v", s)
	return s
}

// expect is what the reference walk says about the source: each input by its manifest name,
// with the records it must yield, and whether it must be skipped (an input with no record
// always is; a video that fails after some clips keeps them, as documented, and is skipped).
type expect struct {
	records map[string]int
	skip    map[string]bool
	order   []string
}

func (e *expect) add(name string, records int) { e.addPartial(name, records, records == 0) }

func (e *expect) addPartial(name string, records int, skip bool) {
	if e.records == nil {
		e.records, e.skip = map[string]int{}, map[string]bool{}
	}
	if _, dup := e.records[name]; dup {
		panic("reference walk named an input twice: " + name)
	}
	e.records[name] = records
	e.skip[name] = skip || records == 0
	e.order = append(e.order, name)
}

// snapshot lists a tree's entries (not following links) with type, size and mtime.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		snap[p] = fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// checkBuild builds src into a fresh OUT (with a fixed crop, within a time limit) and checks
// the manifest against the reference walk: every input packed or skipped with a reason, once;
// records as expected; unique names; nothing written outside OUT (the source tree is
// unchanged and OUT's parent holds only OUT and its lock file).
func checkBuild(t *testing.T, src source.Source, srcRoot string, want expect) {
	t.Helper()
	before := snapshot(t, srcRoot)
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	done := make(chan error, 1)
	go func() {
		_, err := pipeline.Build(context.Background(), pipeline.Options{
			Source: src, Transform: transforms.Spec{CropW: 8, CropH: 8}.MustCompile(), Output: shards.Entry, Out: out, Workers: 2, ShardSize: 1 << 16,
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("build: %v", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("build did not finish in 45s (an input blocked it?)")
	}
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	wantRecords := 0
	for _, n := range want.records {
		wantRecords += n
	}
	if m.Inputs != int64(len(want.records)) {
		t.Errorf("manifest inputs %d, reference walk %d: %q", m.Inputs, len(want.records), want.order)
	}
	if m.Count != int64(wantRecords) {
		t.Errorf("packed %d records, want %d", m.Count, wantRecords)
	}
	seen := map[string]bool{}
	for _, s := range m.Skipped {
		if seen[s.Input] {
			t.Errorf("input %q skipped twice", s.Input)
		}
		seen[s.Input] = true
		_, ok := want.records[s.Input]
		switch {
		case !ok:
			t.Errorf("skipped %q (%s), which the reference walk does not list", s.Input, s.Reason)
		case !want.skip[s.Input]:
			t.Errorf("skipped %q (%s), a good input", s.Input, s.Reason)
		}
		if strings.TrimSpace(s.Reason) == "" {
			t.Errorf("skipped %q without a reason", s.Input)
		}
	}
	packed := 0
	for _, name := range want.order {
		if want.skip[name] && !seen[name] {
			t.Errorf("bad input %q not in skipped", name)
		}
		if !want.skip[name] {
			packed++
		}
	}
	if int64(packed+len(m.Skipped)) != m.Inputs {
		t.Errorf("packed %d + skipped %d != enumerated %d", packed, len(m.Skipped), m.Inputs)
	}
	classes := map[string]bool{}
	for _, c := range m.Classes {
		if classes[c] {
			t.Errorf("class %q twice in %q", c, m.Classes)
		}
		classes[c] = true
	}
	if after := snapshot(t, srcRoot); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the source tree changed during the build")
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents { // the build's lock file stays beside OUT by design (README)
		if e.Name() != "out" && e.Name() != "out.packer-lock" {
			t.Errorf("OUT's parent holds %v, want only out and its lock file", ents)
			break
		}
	}
	if t.Failed() {
		t.Logf("manifest skipped: %+v", m.Skipped)
	}
}

// gen makes random trees.
type gen struct {
	t    *testing.T
	r    *rand.Rand
	pngs map[[2]int][]byte
}

func newGen(t *testing.T, seed uint64) *gen {
	return &gen{t: t, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), pngs: map[[2]int][]byte{}}
}

func (g *gen) must(err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
}

func (g *gen) png(w, h int) []byte {
	if b, ok := g.pngs[[2]int{w, h}]; ok {
		return b
	}
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i*13 + w)
	}
	var b bytes.Buffer
	g.must(png.Encode(&b, img))
	g.pngs[[2]int{w, h}] = b.Bytes()
	return b.Bytes()
}

func (g *gen) pick(s []string) string { return s[g.r.IntN(len(s))] }

// name returns a fresh name in dir: a base (some not UTF-8, some differing only in case) and an
// extension from exts in a random case.
func (g *gen) name(dir string, exts []string) string {
	bases := []string{"a", "A", "b\xff", "b\xfe", "img", "x y", "é", `back\slash`, "n1", "n10", "n2"}
	for {
		ext := g.pick(exts)
		if g.r.IntN(3) == 0 {
			ext = strings.ToUpper(ext)
		}
		n := g.pick(bases) + ext
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			return n
		}
	}
}

// special adds an entry that is not a readable regular file, or a bad file, named n in dir.
func (g *gen) special(dir, n string) {
	p := filepath.Join(dir, n)
	switch g.r.IntN(6) {
	case 0:
		g.must(os.Symlink("missing-"+strconv.Itoa(g.r.IntN(100)), p))
	case 1:
		g.must(os.Symlink(n, p)) // a loop
	case 2:
		g.must(os.Symlink("/dev/null", p))
	case 3:
		g.must(syscall.Mkfifo(p, 0o644))
	case 4:
		g.must(os.WriteFile(p, nil, 0o644))
	default:
		g.must(os.WriteFile(p, []byte("this is not an image or a video"), 0o644))
	}
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// goodImage reports whether p is (after links) a regular file the generator wrote as an image.
func goodImage(p string) bool {
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	b, err := os.ReadFile(p)
	return err == nil && bytes.HasPrefix(b, pngMagic)
}

func hasExt(name string, exts []string) bool {
	for _, e := range exts {
		if strings.HasSuffix(strings.ToLower(name), e) {
			return true
		}
	}
	return false
}

// fillImages fills dir with random image entries (and, below depth 2, subfolders and folder
// links) and returns nothing; the reference walk finds what is there.
func (g *gen) fillImages(dir string, depth int, ancestors []string) {
	g.must(os.MkdirAll(dir, 0o755))
	var goods []string
	for range 2 + g.r.IntN(6) {
		switch k := g.r.IntN(10); {
		case k < 4:
			n := g.name(dir, imagedir.Extensions)
			g.must(os.WriteFile(filepath.Join(dir, n), g.png(8+g.r.IntN(12), 8+g.r.IntN(12)), 0o644))
			goods = append(goods, n)
		case k < 7:
			g.special(dir, g.name(dir, imagedir.Extensions))
		case k == 7 && len(goods) > 0:
			g.must(os.Symlink(g.pick(goods), filepath.Join(dir, g.name(dir, imagedir.Extensions))))
		case k == 8:
			switch g.r.IntN(3) {
			case 0:
				g.must(os.WriteFile(filepath.Join(dir, g.name(dir, []string{".txt", ".gif"})), []byte("ignored"), 0o644))
			case 1:
				g.must(os.WriteFile(filepath.Join(dir, "."+g.name(dir, imagedir.Extensions)), []byte("hidden"), 0o644))
			default:
				g.must(os.Mkdir(filepath.Join(dir, g.name(dir, imagedir.Extensions)), 0o755)) // a folder named like an image
			}
		default:
			if depth < 2 {
				if g.r.IntN(3) == 0 && len(ancestors) > 0 {
					g.must(os.Symlink(g.pick(ancestors), filepath.Join(dir, g.name(dir, []string{"", ".d"}))))
				} else {
					sub := filepath.Join(dir, g.name(dir, []string{"", ".d", ".jpg"}))
					g.fillImages(sub, depth+1, append(slices.Clone(ancestors), dir))
				}
			}
		}
	}
}

// genFolder writes an ImageFolder tree: class folders (names not all UTF-8, one a link to a
// folder outside the tree, some hidden), each with at least one good image.
func (g *gen) genFolder(root string) {
	classes := []string{"cat", "dog", "c\xff", "c\xfe", "Cat", `d\e`}
	g.r.Shuffle(len(classes), func(i, j int) { classes[i], classes[j] = classes[j], classes[i] })
	n := 2 + g.r.IntN(3)
	for _, c := range classes[:n] {
		dir := filepath.Join(root, c)
		g.fillImages(dir, 0, nil)
		g.must(os.WriteFile(filepath.Join(dir, "zz-good.png"), g.png(9, 11), 0o644))
	}
	if g.r.IntN(2) == 0 {
		// A class folder that is a link to a folder outside the tree. (A link to another class
		// folder would pack its images twice and is refused: imagedir.TestFolderAliasRefused.)
		ext := root + "-linked"
		g.fillImages(ext, 0, nil)
		g.must(os.WriteFile(filepath.Join(ext, "zz-good.png"), g.png(9, 11), 0o644))
		g.must(os.Symlink(ext, filepath.Join(root, "linked-class")))
	}
	g.must(os.MkdirAll(filepath.Join(root, ".hidden-class"), 0o755))
	g.must(os.WriteFile(filepath.Join(root, ".hidden-class", "x.png"), g.png(8, 8), 0o644))
	g.special(root, "not-a-class.jpg")
}

// isDirFollow reports whether p is a folder after following links.
func isDirFollow(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// refFolder is the reference walk of an ImageFolder tree by the documented rules: classes are
// the non-hidden folders of root (links followed); a class's inputs are, recursively (links to
// folders followed, a folder that is one of its own ancestors not entered again), every
// non-hidden entry that is not a folder and has an image extension.
func refFolder(t *testing.T, root string) (expect, [][2]string) {
	var e expect
	var files [][2]string // (relative path, class) of every input, for lists
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ents {
		if strings.HasPrefix(c.Name(), ".") || !isDirFollow(filepath.Join(root, c.Name())) {
			continue
		}
		var dirs []string
		var walk func(rel string, chain []os.FileInfo)
		walk = func(rel string, chain []os.FileInfo) {
			dirs = append(dirs, rel)
			sub, err := os.ReadDir(filepath.Join(root, rel))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range sub {
				p := filepath.Join(root, rel, d.Name())
				if strings.HasPrefix(d.Name(), ".") || !isDirFollow(p) {
					continue
				}
				st, _ := os.Stat(p)
				if slices.ContainsFunc(chain, func(a os.FileInfo) bool { return os.SameFile(a, st) }) {
					continue
				}
				walk(rel+"/"+d.Name(), append(slices.Clone(chain), st))
			}
		}
		st, _ := os.Stat(filepath.Join(root, c.Name()))
		walk(c.Name(), []os.FileInfo{st})
		sort.Strings(dirs)
		for _, rel := range dirs {
			sub, _ := os.ReadDir(filepath.Join(root, rel))
			for _, f := range sub {
				p := filepath.Join(root, rel, f.Name())
				if strings.HasPrefix(f.Name(), ".") || !hasExt(f.Name(), imagedir.Extensions) || isDirFollow(p) {
					continue
				}
				n := 0
				if goodImage(p) {
					n = 1
				}
				e.add(fsentry.Name(rel+"/"+f.Name()), n)
				files = append(files, [2]string{rel + "/" + f.Name(), c.Name()})
			}
		}
	}
	return e, files
}

func TestPropertyFolder(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(t, seed)
			root := t.TempDir()
			g.genFolder(root)
			want, _ := refFolder(t, root)
			src, err := imagedir.OpenFolder(root, imagedir.Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkBuild(t, src, root, want)
		})
	}
}

func TestPropertyList(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(t, seed)
			root := t.TempDir()
			g.genFolder(filepath.Join(root, "data"))
			_, files := refFolder(t, filepath.Join(root, "data"))
			var b bytes.Buffer
			w := csv.NewWriter(&b)
			g.must(w.Write([]string{"path", "label"}))
			var want expect
			for i, f := range files {
				p := "data/" + f[0]
				if i%5 == 4 {
					p = "data/missing-" + strconv.Itoa(i) + ".png" // a line naming nothing
				}
				g.must(w.Write([]string{p, fsentry.Name(f[1])}))
				n := 0
				if goodImage(filepath.Join(root, p)) {
					n = 1
				}
				want.add(fsentry.Name(p), n)
			}
			w.Flush()
			list := filepath.Join(root, "list.csv")
			g.must(os.WriteFile(list, b.Bytes(), 0o644))
			src, err := imagedir.OpenList(list, imagedir.Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkBuild(t, src, root, want)
		})
	}
}

// genFrames writes class/video/frame folders: good videos of one frame size, videos with a bad
// frame or frames of two sizes, empty video folders, dangling links where a video folder would
// be, links to video folders outside the tree, and files lying in class folders (ignored).
func (g *gen) genFrames(root string) {
	classes := []string{"run", "jump", "r\xff", "r\xfe"}
	for _, c := range classes[:2+g.r.IntN(3)] {
		cdir := filepath.Join(root, c)
		var videos []string
		for v := range 1 + g.r.IntN(4) {
			vdir := filepath.Join(cdir, fmt.Sprintf("v%d%s", v, g.pick([]string{"", "\xff", ".jpg"})))
			if _, err := os.Lstat(vdir); err == nil {
				continue
			}
			g.must(os.MkdirAll(vdir, 0o755))
			videos = append(videos, vdir)
			w, h := 8+g.r.IntN(8), 8+g.r.IntN(8)
			for range g.r.IntN(4) {
				g.must(os.WriteFile(filepath.Join(vdir, g.name(vdir, imagedir.Extensions)), g.png(w, h), 0o644))
			}
			switch g.r.IntN(5) {
			case 0:
				g.special(vdir, g.name(vdir, imagedir.Extensions))
			case 1:
				g.must(os.WriteFile(filepath.Join(vdir, g.name(vdir, imagedir.Extensions)), g.png(w+1, h), 0o644))
			case 2:
				g.must(os.WriteFile(filepath.Join(vdir, "notes.txt"), []byte("ignored"), 0o644))
			}
		}
		good := filepath.Join(cdir, "zz-good")
		g.must(os.MkdirAll(good, 0o755))
		g.must(os.WriteFile(filepath.Join(good, "0001.png"), g.png(8, 8), 0o644))
		g.must(os.WriteFile(filepath.Join(good, "0002.png"), g.png(8, 8), 0o644))
		switch g.r.IntN(4) {
		case 0:
			g.must(os.Symlink("missing-video", filepath.Join(cdir, "dangling")))
		case 1:
			// A link to a video folder outside the tree. (A link to another video folder of
			// the tree would pack it twice and is refused: video.TestFolderAliasRefused.)
			ext := filepath.Dir(cdir) + "-" + filepath.Base(cdir) + "-linked-video"
			g.must(os.MkdirAll(ext, 0o755))
			g.must(os.WriteFile(filepath.Join(ext, "0001.png"), g.png(8, 8), 0o644))
			g.must(os.Symlink(ext, filepath.Join(cdir, "linked")))
		case 2:
			g.special(cdir, "lying-in-class.png")
		}
		if len(videos) > 0 && g.r.IntN(3) == 0 {
			g.must(os.Symlink("loop", filepath.Join(cdir, "loop")))
		}
	}
}

// refFrames is the reference walk of a frames tree: every non-hidden folder of a class (links
// followed) and every link there that does not resolve is a video; a video is packed (one
// record per frame) when all its image entries are readable images of one size.
func refFrames(t *testing.T, root string) expect {
	var e expect
	classes, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range classes {
		cdir := filepath.Join(root, c.Name())
		if strings.HasPrefix(c.Name(), ".") || !isDirFollow(cdir) {
			continue
		}
		vids, _ := os.ReadDir(cdir)
		for _, v := range vids {
			vdir := filepath.Join(cdir, v.Name())
			_, statErr := os.Stat(vdir)
			isLink := v.Type()&fs.ModeSymlink != 0
			if strings.HasPrefix(v.Name(), ".") || !(isDirFollow(vdir) || (isLink && statErr != nil)) {
				continue
			}
			// Frames in natural order; one that is not a readable regular file fails the
			// video before anything is decoded; a bad image stops it after the frames before
			// it (packed, and the video is skipped). A size change is no reason to skip: each
			// frame is its own record here (no --clip-len).
			n, skip := 0, true
			if isDirFollow(vdir) {
				var frames []string
				for _, f := range must1(os.ReadDir(vdir)) {
					p := filepath.Join(vdir, f.Name())
					if !strings.HasPrefix(f.Name(), ".") && hasExt(f.Name(), imagedir.Extensions) && !isDirFollow(p) {
						frames = append(frames, f.Name())
					}
				}
				sort.Slice(frames, func(i, j int) bool { return video.NaturalLess(frames[i], frames[j]) })
				unreadable := false
				for _, f := range frames {
					if st, err := os.Stat(filepath.Join(vdir, f)); err != nil || !st.Mode().IsRegular() {
						unreadable = true
					}
				}
				skip = unreadable || len(frames) == 0
				for _, f := range frames {
					if unreadable {
						break
					}
					if !goodImage(filepath.Join(vdir, f)) {
						skip = true
						break
					}
					n++
				}
			}
			e.addPartial(fsentry.Name(c.Name()+"/"+v.Name()), n, skip)
		}
	}
	return e
}

func must1[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestPropertyFrames(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(t, seed)
			root := t.TempDir()
			g.genFrames(root)
			want := refFrames(t, root)
			src, err := video.OpenFrames(root, video.Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkBuild(t, src, root, want)
		})
	}
}

func TestPropertyVideo(t *testing.T) {
	for _, tool := range []string{"ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("PACKER_NO_FFMPEG") == "1" {
				t.Skipf("%s not installed and PACKER_NO_FFMPEG=1", tool)
			}
			t.Fatalf("%s not found: install ffmpeg (or set PACKER_NO_FFMPEG=1 to skip the video tests)", tool)
		}
	}
	store := t.TempDir()
	good := filepath.Join(store, "good.mkv")
	cmd := exec.Command("ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=16x12:rate=10",
		"-frames:v", "3", "-c:v", "ffv1", good)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	goodBytes := must1(os.ReadFile(good))
	for _, seed := range seeds(t)[:4] { // each video costs an ffprobe and an ffmpeg run
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(t, seed)
			root := t.TempDir()
			for _, c := range []string{"walk", "w\xff", "w\xfe"}[:2+g.r.IntN(2)] {
				cdir := filepath.Join(root, c)
				g.must(os.MkdirAll(cdir, 0o755))
				g.must(os.WriteFile(filepath.Join(cdir, "zz-good.mkv"), goodBytes, 0o644))
				for range 1 + g.r.IntN(5) {
					n := g.name(cdir, video.VideoExtensions)
					switch k := g.r.IntN(8); {
					case k == 0:
						g.must(os.Symlink("zz-good.mkv", filepath.Join(cdir, n)))
					case k == 1:
						g.must(os.WriteFile(filepath.Join(cdir, n+".flv"), goodBytes, 0o644)) // not a video extension: ignored
					case k == 2:
						g.must(os.Mkdir(filepath.Join(cdir, n), 0o755)) // a folder named like a video
					default:
						g.special(cdir, n)
					}
				}
			}
			var want expect
			for _, c := range must1(os.ReadDir(root)) {
				for _, f := range must1(os.ReadDir(filepath.Join(root, c.Name()))) {
					p := filepath.Join(root, c.Name(), f.Name())
					if strings.HasPrefix(f.Name(), ".") || !hasExt(f.Name(), video.VideoExtensions) || isDirFollow(p) {
						continue
					}
					n := 0
					if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && bytes.Equal(must1(os.ReadFile(p)), goodBytes) {
						n = 3
					}
					want.add(fsentry.Name(c.Name()+"/"+f.Name()), n)
				}
			}
			src, err := video.Open(root, video.Options{Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			checkBuild(t, src, root, want)
		})
	}
}

// TestPropertyCIFAR: random CIFAR-10 folders (batch files or links to them, some empty, some
// cut short, bad labels, a FIFO or a link where the names file is): either the source refuses
// the folder naming the bad file, or every record is packed or skipped.
func TestPropertyCIFAR(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(t, seed)
			root := t.TempDir()
			dir := filepath.Join(root, "cifar-10-batches-bin")
			store := filepath.Join(root, "store")
			g.must(os.MkdirAll(dir, 0o755))
			g.must(os.MkdirAll(store, 0o755))
			var want expect
			var refuse []string // files Open must refuse, one of which it names
			for i := 1; i <= 5; i++ {
				name := fmt.Sprintf("data_batch_%d.bin", i)
				var b []byte
				n := g.r.IntN(4)
				if g.r.IntN(8) == 0 {
					n = 0
				} else {
					n++
				}
				for rec := range n {
					label := byte(g.r.IntN(10))
					if g.r.IntN(5) == 0 {
						label = byte(10 + g.r.IntN(200))
					}
					b = append(b, label)
					b = append(b, bytes.Repeat([]byte{byte(rec)}, cifar.ImageSize)...)
					ok := 0
					if label < 10 {
						ok = 1
					}
					want.add(fmt.Sprintf("%s#%d", name, rec), ok)
				}
				if g.r.IntN(10) == 0 && len(b) > 0 {
					b = b[:len(b)-1]
				}
				if len(b) == 0 || len(b)%cifar.RecordSize10 != 0 {
					refuse = append(refuse, name)
				}
				target := filepath.Join(dir, name)
				if g.r.IntN(2) == 0 {
					target = filepath.Join(store, name)
					g.must(os.Symlink(target, filepath.Join(dir, name)))
				}
				g.must(os.WriteFile(target, b, 0o644))
			}
			switch g.r.IntN(4) {
			case 0:
				g.must(syscall.Mkfifo(filepath.Join(dir, "batches.meta.txt"), 0o644))
				refuse = append(refuse, "batches.meta.txt")
			case 1:
				g.must(os.WriteFile(filepath.Join(dir, "batches.meta.txt"), []byte(strings.Join(cifar.OfficialNames10, "\n")), 0o644))
			}
			type opened struct {
				s   *cifar.Source
				err error
			}
			ch := make(chan opened, 1)
			go func() {
				s, err := cifar.Open(root, cifar.Kind10, "train")
				ch <- opened{s, err}
			}()
			var o opened
			select {
			case o = <-ch:
			case <-time.After(20 * time.Second):
				t.Fatal("cifar.Open blocked")
			}
			if len(refuse) > 0 {
				if o.err == nil || !slices.ContainsFunc(refuse, func(n string) bool { return strings.Contains(o.err.Error(), n) }) {
					t.Fatalf("Open: %v; want an error naming one of %v", o.err, refuse)
				}
				return
			}
			if o.err != nil {
				t.Fatal(o.err)
			}
			checkBuild(t, o.s, root, want)
		})
	}
}

// TestPropertyIDX: random IDX sets, raw or gzip, files or links to them, with class lists that
// leave some labels out of range: every record is packed or skipped.
func TestPropertyIDX(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(t, seed)
			root := t.TempDir()
			dir := filepath.Join(root, "mnist")
			store := filepath.Join(root, "store")
			g.must(os.MkdirAll(dir, 0o755))
			g.must(os.MkdirAll(store, 0o755))
			n, h, w := g.r.IntN(6), 8+g.r.IntN(3), 8+g.r.IntN(3)
			labels := make([]byte, n)
			var classes []string
			if g.r.IntN(2) == 0 {
				classes = []string{"zero", "one", "two\xff", "three"}
			}
			var want expect
			ext := g.pick([]string{"", ".gz"})
			name := "train-images-idx3-ubyte" + ext
			for i := range labels {
				labels[i] = byte(g.r.IntN(6))
				ok := 1
				if classes != nil && int(labels[i]) >= len(classes) {
					ok = 0
				}
				want.add(fmt.Sprintf("%s#%d", name, i), ok)
			}
			for _, f := range []struct {
				name string
				dims []int
				data []byte
				typ  byte
			}{
				{name, []int{n, h, w}, bytes.Repeat([]byte{7}, n*h*w), idx.TypeUbyte},
				{"train-labels-idx1-ubyte" + ext, []int{n}, labels, idx.TypeUbyte},
			} {
				target := filepath.Join(dir, f.name)
				if g.r.IntN(2) == 0 {
					target = filepath.Join(store, f.name)
					g.must(os.Symlink(target, filepath.Join(dir, f.name)))
				}
				g.must(idx.WriteFile(target, f.typ, f.dims, f.data))
			}
			if g.r.IntN(2) == 0 {
				g.special(dir, "t10k-images-idx3-ubyte") // another split's file: not this split's input
			}
			src, err := idx.Open(dir, "train", classes)
			if err != nil {
				t.Fatal(err)
			}
			checkBuild(t, src, root, want)
		})
	}
}
