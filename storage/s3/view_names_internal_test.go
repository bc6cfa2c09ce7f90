package s3

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/packer-dev/packer/storage"
)

// TestViewInMemoryNames: a view held in memory answers Stat and ReadDir for names a file
// system walk orders or tells apart by their bytes (a space, '.' sorting before '/', upper
// and lower case, the two Unicode forms of é, a newline) exactly as the file system answers
// for the same view made on disk: the same entries, in the same order, with the same sizes,
// times and kinds.
func TestViewInMemoryNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v")
	base := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	names := []string{"a", "a b.jpg", "a.b/x.jpg", "a-b/y.jpg", "b/c/d.jpg", "B/e.jpg",
		"caf\u00e9.jpg", "cafe\u0301.jpg", "n\nl.jpg", "z/.hidden.jpg", "a0/z.jpg"}
	v := &view{dir: dir, path: dir, files: map[string]storage.ViewObject{}, whole: map[string]bool{}}
	for i, n := range names {
		v.files[filepath.Join(dir, filepath.FromSlash(n))] = storage.ViewObject{Size: int64(10 * i), ModTime: base.Add(time.Duration(i) * time.Second).UnixNano(), ETag: n}
	}
	// "a" is a file and "a.b", "a-b", "a0" folders: their order is the bytes'.
	v.folders = folderTree(v.dir, v.files)
	inMemory := map[string][]string{}
	var walk func(p string)
	walk = func(p string) {
		ents, err := v.ReadDir(p)
		if err != nil {
			t.Fatalf("in memory: ReadDir %s: %v", p, err)
		}
		for _, e := range ents {
			inMemory[p] = append(inMemory[p], e.Name())
			if e.IsDir() {
				walk(filepath.Join(p, e.Name()))
			}
		}
	}
	walk(dir)
	type stat struct {
		size  int64
		mod   time.Time
		isDir bool
	}
	statsOf := func(statFn func(string) (os.FileInfo, error)) map[string]stat {
		out := map[string]stat{}
		for p := range inMemory {
			for _, n := range inMemory[p] {
				st, err := statFn(filepath.Join(p, n))
				if err != nil {
					t.Fatal(err)
				}
				s := stat{mod: st.ModTime(), isDir: st.IsDir()}
				if !st.IsDir() {
					s.size = st.Size()
				}
				out[filepath.Join(p, n)] = s
			}
		}
		return out
	}
	mem := statsOf(v.Stat)
	if err := v.Sparse(); err != nil {
		t.Fatal(err)
	}
	for p, want := range inMemory {
		ents, err := os.ReadDir(p)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the file system lists %q, the view in memory %q", p, got, want)
		}
	}
	disk := statsOf(os.Stat)
	for p, m := range mem {
		if d := disk[p]; d.size != m.size || d.isDir != m.isDir || !d.mod.Equal(m.mod) {
			t.Errorf("%s: on disk %+v, in memory %+v", p, d, m)
		}
	}
	if len(mem) != len(names)+len(v.folders)-1 {
		t.Errorf("the walk in memory found %d entries; want %d files and %d folders", len(mem), len(names), len(v.folders)-1)
	}
}
