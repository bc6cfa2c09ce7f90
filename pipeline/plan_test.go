package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packer-dev/packer/source"
)

// listSource is a path-based source of n items, for plans.
type listSource struct {
	n    int
	aux  bool
	kind string
}

func (s *listSource) Info() source.SourceInfo {
	return source.SourceInfo{Kind: s.kind, Classes: []string{"a", "b", "c"}, Spec: map[string]any{"kind": s.kind, "n": 1}, Count: -1}
}

func (s *listSource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	for i := 0; i < s.n; i++ {
		it := source.Item{Seq: int64(i), Name: fmt.Sprintf("c/%d.png", i), Path: fmt.Sprintf("/d/c/%d.png", i), Label: int64(i % 3)}
		if s.aux {
			it.Aux = []int64{int64(i), -1}
		}
		if err := emit(it); err != nil {
			return err
		}
	}
	return nil
}

func (s *listSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	return nil
}

// TestPlanRoundTrip: the items a plan replays are the source's, the header's digest is the one
// a part computes over the same listing, and a plan's Info has its count.
func TestPlanRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := &listSource{n: 7, aux: true, kind: "folder"}
	path := filepath.Join(dir, "x.plan")
	h, err := WritePlan(context.Background(), path, src, nil, PlanHeader{Kind: "folder", Source: "/d", Items: true})
	if err != nil {
		t.Fatal(err)
	}
	pr := newPartRange(Part{Index: 0, Count: 1}, 7, 0)
	var want []source.Item
	src.Enumerate(context.Background(), func(it source.Item) error { pr.see(it); want = append(want, it); return nil })
	if h.Listing != pr.list.sum() || h.Content != pr.content.sum() || h.Count != 7 {
		t.Fatalf("plan header: count %d, listing %s, content %s; want 7, %s, %s", h.Count, h.Listing, h.Content, pr.list.sum(), pr.content.sum())
	}
	rh, err := ReadPlanHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := FromPlan(path, rh, &listSource{kind: "folder"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Info().Count != 7 {
		t.Errorf("Info().Count %d, want 7", ps.Info().Count)
	}
	var got []source.Item
	pr = newPartRange(Part{Index: 0, Count: 1}, 7, 0)
	if err := ps.Enumerate(context.Background(), func(it source.Item) error {
		if it.Stamp == nil || it.Stamp.Size != -1 { // the listSource's paths do not exist
			t.Errorf("%s: replayed stamp %v, want the planned one (missing)", it.Name, it.Stamp)
		}
		pr.see(it)
		it.Stamp = nil
		got = append(got, it)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replayed %v, want %v", got, want)
	}
	if pr.content.sum() != h.Content {
		t.Errorf("a part of the replayed plan records content %s, want the plan's %s", pr.content.sum(), h.Content)
	}
	if _, err := FromPlan(path, rh, &listSource{kind: "list"}, nil); !errors.Is(err, ErrPlanSource) {
		t.Errorf("FromPlan of another kind: %v, want ErrPlanSource", err)
	}
	if !IsPlan(path) || IsPlan(dir) || IsPlan(filepath.Join(dir, "none")) {
		t.Error("IsPlan")
	}
}

// FuzzPlan: reading a plan file never panics, and refuses (with ErrPlan, naming the file) what it
// does not replay in full.
func FuzzPlan(f *testing.F) {
	dir := f.TempDir()
	for i, n := range []int{0, 1, 4} {
		path := filepath.Join(dir, fmt.Sprintf("seed%d.plan", i))
		if _, err := WritePlan(context.Background(), path, &listSource{n: n, aux: i == 2, kind: "folder"}, nil, PlanHeader{Kind: "folder", Source: "/d", Items: true}); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		lines := bytes.SplitAfter(data, []byte("\n"))
		f.Add(bytes.Join(lines[:len(lines)-2], nil))
	}
	f.Add([]byte(`{"packer_plan":3,"packer":"` + Version + `","kind":"tfrecord","source":"/d","spec":{},"count":3,"items":false,"listing_sha256":"` + strings.Repeat("0", 64) + `","content_sha256":"` + strings.Repeat("0", 64) + `","files":2,"files_sha256":"` + strings.Repeat("0", 64) + `"}` + "\n" +
		`{"path":"a.tfrecord","size":10,"mtime_ns":1,"items":1}` + "\n" + `{"path":"b.parquet","size":10,"mtime_ns":1,"items":2,"groups":[1,1]}` + "\n"))
	f.Add([]byte(`{"packer_plan":3,"packer":"` + Version + `","kind":"tfrecord","source":"/d","spec":{},"count":3,"items":false,"listing_sha256":"` + strings.Repeat("0", 64) + `","content_sha256":"` + strings.Repeat("0", 64) + `","files":4,"files_sha256":"` + strings.Repeat("0", 64) + `"}` + "\n" +
		`{"path":"a","size":1,"mtime_ns":1,"items":4611686018427387904}` + "\n" + `{"path":"b","size":1,"mtime_ns":1,"items":4611686018427387904}` + "\n" +
		`{"path":"c","size":1,"mtime_ns":1,"items":4611686018427387904}` + "\n" + `{"path":"d","size":1,"mtime_ns":1,"items":4611686018427387907}` + "\n"))
	f.Add([]byte(`{"packer_plan":1,"packer":"` + Version + `","kind":"folder","source":"/d","spec":{},"count":1,"items":false,"listing_sha256":"00"}` + "\n"))
	f.Add([]byte("{\"packer_plan\":1}\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name := "fuzz.plan"
		sc := newPlanScanner(bytes.NewReader(data))
		h, err := readPlanHeader(sc, name)
		if err != nil {
			if !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), name) {
				t.Fatalf("header error %v: want ErrPlan naming the file", err)
			}
			return
		}
		if h.Files > 0 {
			// The file lines as an edit that made files_sha256 again would have them, so that
			// their content is explored past the digest.
			rest := data[bytes.IndexByte(data, '\n')+1:]
			if len(rest) > 0 && rest[len(rest)-1] != '\n' {
				rest = append(slices.Clone(rest), '\n')
			}
			h.FilesDigest = fmt.Sprintf("%x", sha256.Sum256(rest))
			files, err := readFileLines(sc, name, h)
			if err != nil && (!errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), name)) {
				t.Fatalf("file line error %v: want ErrPlan naming the file", err)
			}
			if err != nil {
				return
			}
			var items int64
			for _, f := range files {
				var groups int64
				for _, g := range f.Groups {
					if g < 0 || g > f.Items-groups {
						t.Fatalf("file line %+v read without an error: a row group count out of range", f)
					}
					groups += g
				}
				if f.Items < 0 || f.Items > h.Count-items || f.Path == "" || f.Groups != nil && groups != f.Items {
					t.Fatalf("file line %+v read without an error after %d of %d inputs", f, items, h.Count)
				}
				items += f.Items
			}
			if int64(len(files)) != h.Files || items != h.Count {
				t.Fatalf("read %d file lines of %d inputs without an error; the header says %d and %d", len(files), items, h.Files, h.Count)
			}
			return
		}
		if !h.Items {
			return
		}
		var n int64
		err = replayPlan(context.Background(), sc, name, h, func(it source.Item) error {
			if it.Seq != n || it.Name == "" || it.Path == "" {
				t.Fatalf("replayed item %+v at %d", it, n)
			}
			n++
			return nil
		})
		if err == nil && n != h.Count {
			t.Fatalf("replayed %d items of %d without an error", n, h.Count)
		}
		if err != nil && (!errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), name)) {
			t.Fatalf("item error %v: want ErrPlan naming the file", err)
		}
	})
}

// TestPlanFileLinesOverflow: file lines whose counts are huge (a plan edited by hand, its
// files_sha256 made again) are refused even where their sum wraps around to the header's
// count: with such a layout a part would pass over files it must read.
func TestPlanFileLinesOverflow(t *testing.T) {
	const huge = int64(1) << 62
	for _, c := range []struct {
		name  string
		lines []string
	}{
		{"items", []string{
			fmt.Sprintf(`{"path":"a","size":1,"mtime_ns":1,"items":%d}`, huge),
			fmt.Sprintf(`{"path":"b","size":1,"mtime_ns":1,"items":%d}`, huge),
			fmt.Sprintf(`{"path":"c","size":1,"mtime_ns":1,"items":%d}`, huge),
			fmt.Sprintf(`{"path":"d","size":1,"mtime_ns":1,"items":%d}`, huge+3),
		}},
		{"groups", []string{
			`{"path":"a","size":1,"mtime_ns":1,"items":1}`,
			fmt.Sprintf(`{"path":"b","size":1,"mtime_ns":1,"items":2,"groups":[%d,%d,%d,%d]}`, huge, huge, huge, huge+2),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := strings.Join(c.lines, "\n") + "\n"
			h := &PlanHeader{Plan: PlanFormat, Count: 3, Files: int64(len(c.lines)), FilesDigest: fmt.Sprintf("%x", sha256.Sum256([]byte(body)))}
			files, err := readFileLines(newPlanScanner(strings.NewReader(body)), "edited.plan", h)
			if err == nil || !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), "edited.plan") {
				t.Fatalf("file lines whose counts wrap around: %v (%+v), want ErrPlan naming the plan", err, files)
			}
		})
	}
}
