package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source/cifar"
	"github.com/packer-dev/packer/source/idx"
)

// sameTree fails unless the directories a and b hold the same files with the same bytes.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	list := func(root string) map[string][]byte {
		m := map[string][]byte{}
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			if !d.IsDir() {
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				rel, _ := filepath.Rel(root, p)
				m[rel] = data
			}
			return nil
		})
		return m
	}
	ma, mb := list(a), list(b)
	for name, da := range ma {
		db, ok := mb[name]
		switch {
		case !ok:
			t.Errorf("%s: %s missing from the merge", filepath.Base(b), name)
		case !bytes.Equal(da, db):
			t.Errorf("%s: %s differs from the one-machine build's (%d vs %d bytes)", filepath.Base(b), name, len(db), len(da))
		}
	}
	for name := range mb {
		if _, ok := ma[name]; !ok {
			t.Errorf("%s: %s is not in the one-machine build", filepath.Base(b), name)
		}
	}
}

// partsCorpus writes one small source of every kind whose parts the test splits: each with
// something that breaks a naive split (skipped inputs, inputs yielding several records, records
// of several sizes, a source that does not know its size).
func partsCorpus(t *testing.T, root string) map[string]string {
	t.Helper()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Folder: 3 classes of PNGs of several sizes, with damaged files at a class's start and end.
	for c, cls := range []string{"a", "b", "c"} {
		for i := 0; i < 5+c; i++ {
			writePNG(t, mk(fmt.Sprintf("folder/%s/%02d.png", cls, i)), 9+i*3, 7+c*5, i*11+c)
		}
	}
	os.WriteFile(mk("folder/a/00bad.png"), []byte("not a png"), 0o644)
	os.WriteFile(mk("folder/c/99bad.png"), []byte("\x89PNG\r\n\x1a\ntruncated"), 0o644)
	// Frames: videos of 1 to 6 frames, for clips of 2 (a 1-frame video is skipped).
	for v := 0; v < 6; v++ {
		for f := 0; f <= v; f++ {
			writePNG(t, mk(fmt.Sprintf("frames/run/v%d/%03d.png", v, f)), 12, 10, v*7+f)
		}
	}
	// CIFAR-10, 3 records per file.
	c10, err := cifar.WriteTestDataset(mk("cifar/x")+"/..", cifar.Kind10, 3)
	if err != nil {
		t.Fatal(err)
	}
	// WebDataset: two shards, a bad sample in each; the source does not know its size.
	png0, err := os.ReadFile(filepath.Join(root, "folder/a/00.png"))
	if err != nil {
		t.Fatal(err)
	}
	for s := 0; s < 2; s++ {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for k := 0; k < 5; k++ {
			img := string(png0)
			if k == 2*s+1 {
				img = "damaged"
			}
			for _, m := range [][2]string{{fmt.Sprintf("%d%d.png", s, k), img}, {fmt.Sprintf("%d%d.cls", s, k), fmt.Sprint(k % 3)}} {
				tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg})
				tw.Write([]byte(m[1]))
			}
		}
		tw.Close()
		os.WriteFile(mk(fmt.Sprintf("wds/%d.tar", s)), b.Bytes(), 0o644)
	}
	// A list naming the folder's files (and one missing file), labelled by integers.
	var csv strings.Builder
	csv.WriteString("path,label\n")
	for i, rel := range []string{"folder/b/00.png", "folder/a/01.png", "folder/gone.png", "folder/c/02.png", "folder/a/00bad.png", "folder/b/03.png"} {
		fmt.Fprintf(&csv, "%s,%d\n", filepath.Join(root, rel), i%3)
	}
	os.WriteFile(mk("list.csv"), []byte(csv.String()), 0o644)
	// IDX: 17 images of 5x4 with labels.
	pix := make([]byte, 17*5*4)
	for i := range pix {
		pix[i] = byte(i * 7)
	}
	lab := make([]byte, 17)
	for i := range lab {
		lab[i] = byte(i % 4)
	}
	if err := idx.WriteFile(mk("idx/train-images-idx3-ubyte"), idx.TypeUbyte, []int{17, 4, 5}, pix); err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(mk("idx/train-labels-idx1-ubyte"), idx.TypeUbyte, []int{17}, lab); err != nil {
		t.Fatal(err)
	}
	// Videos of 2 to 7 frames, for clips of 3 every 2 frames (the 2-frame one is skipped).
	for v := 0; v < 4; v++ {
		cmd := exec.Command("ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
			fmt.Sprintf("testsrc2=size=32x24:rate=10,hue=h=%d", v*40), "-frames:v", fmt.Sprint(2+v+v/2), "-c:v", "ffv1", mk(fmt.Sprintf("video/c%d/v%d.mkv", v%2, v)))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg: %v\n%s", err, out)
		}
	}
	return map[string]string{
		"folder": filepath.Join(root, "folder"), "frames": filepath.Join(root, "frames"),
		"cifar": c10, "wds": filepath.Join(root, "wds"), "list": filepath.Join(root, "list.csv"),
		"idx": filepath.Join(root, "idx"), "video": filepath.Join(root, "video"),
	}
}

// TestPartsMergeSameBytes: for every source kind and output format, a build split in N parts
// (N drawn from 1 to 8 and from 3 to 5, and for the smallest sources 13: more parts than inputs, so some
// parts are empty) and merged is byte-identical to
// the one-machine build: every shard, array and the manifest.
func TestPartsMergeSameBytes(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	// The folder's images as TFRecord and Parquet files too (their sizes are not known up front),
	// written by their own clients (scripts/make_record_sources.py, the fixtures venv).
	rec := filepath.Join(root, "rec")
	if os.Getenv("PACKER_NO_FIXTURE_PYTHON") != "1" {
		script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "make_record_sources.py"))
		if out, err := exec.Command(testfix.FixturePython(), script, src["folder"], rec).CombinedOutput(); err != nil {
			t.Fatalf("make_record_sources.py (run scripts/setup.sh, or PACKER_NO_FIXTURE_PYTHON=1 to leave these sources out): %v\n%s", err, out)
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	cases := []struct {
		name, src string
		args      []string
		formats   []string
	}{
		{"folder-crop", src["folder"], []string{"--resize", "8", "--crop", "6"}, []string{"shards", "npy", "hdf5"}},
		{"folder-varsize", src["folder"], []string{"--resize", "8"}, []string{"shards"}},
		{"frames-clips", src["frames"], []string{"--from", "frames", "--clip-len", "2", "--crop", "8", "--layout", "chw"}, []string{"shards", "npy"}},
		{"cifar", src["cifar"], []string{"--from", "cifar10", "--dtype", "float16"}, []string{"shards", "hdf5"}},
		{"webdataset", src["wds"], []string{"--crop", "5", "--classes", "x,y,z"}, []string{"shards", "npy"}},
		{"list", src["list"], []string{"--resize", "6", "--crop", "6", "--classes", "x,y,z"}, []string{"shards", "hdf5"}},
		{"idx", src["idx"], []string{"--layout", "chw"}, []string{"shards", "npy", "hdf5"}},
		{"tfrecord", filepath.Join(rec, "tfrecord"), []string{"--from", "tfrecord", "--resize", "6", "--crop", "6"}, []string{"shards", "npy"}},
		{"parquet", filepath.Join(rec, "parquet"), []string{"--from", "parquet", "--resize", "6", "--crop", "6"}, []string{"shards", "hdf5"}},
		{"video-clips", src["video"], []string{"--from", "video", "--clip-len", "3", "--clip-stride", "2", "--resize", "12", "--crop", "10"}, []string{"shards", "npy"}},
	}
	for _, c := range cases {
		if strings.HasPrefix(c.src, rec) && os.Getenv("PACKER_NO_FIXTURE_PYTHON") == "1" {
			t.Logf("%s: left out (PACKER_NO_FIXTURE_PYTHON=1)", c.name)
			continue
		}
		for _, format := range c.formats {
			name := c.name + "-" + format
			args := append(append([]string{}, c.args...), "--format", format, "--shard-size", "600", "--workers", "2")
			full := filepath.Join(root, "out", name, "full")
			mustRun(t, append([]string{"build", c.src, "-o", full}, args...)...)
			ns := []int{1 + rng.IntN(8), 3 + rng.IntN(3)}
			if c.name == "list" || c.name == "webdataset" {
				ns = append(ns, 13) // more parts than inputs: some parts are empty
			}
			for ni, n := range ns {
				var parts []string
				for i := 0; i < n; i++ {
					p := filepath.Join(root, "out", name, fmt.Sprintf("s%d-n%d-p%d", ni, n, i))
					mustRun(t, append([]string{"build", c.src, "-o", p, "--part", fmt.Sprintf("%d/%d", i, n)}, args...)...)
					parts = append(parts, p)
				}
				rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
				merged := filepath.Join(root, "out", name, fmt.Sprintf("merged-%d-%d", ni, n))
				mustRun(t, append([]string{"merge", "-o", merged}, parts...)...)
				sameTree(t, full, merged)
				mustRun(t, "verify", merged)
			}
		}
	}
}

// TestMergeRefuses: a merge refuses a missing part, a duplicated part, a part of another build
// (other options, another source) and a damaged part, naming it, and writes nothing.
func TestMergeRefuses(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	part := func(name, source string, i, n int, extra ...string) string {
		p := filepath.Join(root, name)
		mustRun(t, append([]string{"build", source, "-o", p, "--part", fmt.Sprintf("%d/%d", i, n), "--crop", "6"}, extra...)...)
		return p
	}
	p0, p1, p2 := part("p0", src["folder"], 0, 3), part("p1", src["folder"], 1, 3), part("p2", src["folder"], 2, 3)
	other := part("other", src["folder"], 2, 3, "--dtype", "float32")
	otherFmt := part("otherfmt", src["folder"], 2, 3, "--format", "npy")
	otherSrc := part("othersrc", src["wds"], 2, 3, "--classes", "x,y,z")
	whole := filepath.Join(root, "whole")
	mustRun(t, "build", src["folder"], "-o", whole, "--crop", "6")
	damaged := copyDir(t, p1)
	shards, _ := filepath.Glob(filepath.Join(damaged, "shard-*.pks"))
	flip(t, shards[0], 200, 1)

	for _, c := range []struct {
		parts []string
		want  string
		code  int
	}{
		{[]string{p0, p2}, "missing part(s) [1] of 3", 1},
		{[]string{p0, p1, p1, p2}, "part 1/3 given twice", 1},
		{[]string{p0, p1, other}, "transform options", 1},
		{[]string{p0, p1, otherFmt}, "merge options", 1},
		{[]string{p0, p1, otherSrc}, "source listing", 1},
		{[]string{p0, p1, whole}, "is a whole dataset, not a part", 1},
		{[]string{p0, damaged, p2}, "rebuild that part", 3},
		{[]string{p0, p1, p1 + "/"}, "part 1/3 given twice", 1}, // one lock per folder, however spelt
	} {
		out := filepath.Join(root, "merged")
		_, stderr, code := run(t, append([]string{"merge", "-o", out}, c.parts...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("merge %v: exit %d, want %d with %q:\n%s", c.parts, code, c.code, c.want, stderr)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("merge %v wrote %s", c.parts, out)
		}
	}
}

// TestMergeRefusesDamagedData: a part damaged inside a record's bytes (one flipped bit in the
// middle of the data of its first or its last shard, which only the part's SHA-256 and the
// block checksums show) is refused while it is read and copied: exit status 3, the part named,
// and nothing at OUT, for the shards output (copied in runs) and npy (record by record), for
// fixed- and variable-size records.
func TestMergeRefusesDamagedData(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	for _, c := range []struct {
		name, src string
		args      []string
		formats   []string
	}{
		{"fixed", src["idx"], []string{"--shard-size", "40"}, []string{"shards", "npy"}},
		{"varsize", src["folder"], []string{"--resize", "8", "--shard-size", "300"}, []string{"shards"}},
	} {
		for _, format := range c.formats {
			var parts []string
			for i := 0; i < 3; i++ {
				p := filepath.Join(root, c.name+"-"+format, fmt.Sprint("p", i))
				mustRun(t, append([]string{"build", c.src, "-o", p, "--part", fmt.Sprintf("%d/3", i), "--format", format}, c.args...)...)
				parts = append(parts, p)
			}
			shards, _ := filepath.Glob(filepath.Join(parts[1], "shard-*.pks"))
			if len(shards) < 2 {
				t.Fatalf("%s: part 1 has %d shards; the test wants several", c.name, len(shards))
			}
			for _, which := range []string{shards[0], shards[len(shards)-1]} {
				damaged := copyDir(t, parts[1])
				path := filepath.Join(damaged, filepath.Base(which))
				r, err := shard.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				off := r.DataOffset() + r.DataSize()/2
				r.Close()
				flip(t, path, off, 0x10)
				out := filepath.Join(root, "merged")
				_, stderr, code := run(t, "merge", "-o", out, parts[0], damaged, parts[2])
				if code != 3 || !strings.Contains(stderr, "part "+damaged+": ") || !strings.Contains(stderr, "rebuild that part") {
					t.Errorf("%s %s, %s damaged at %d: exit %d, want 3 naming the part:\n%s", c.name, format, filepath.Base(which), off, code, stderr)
				}
				for _, p := range []string{out, out + pipeline.StagingSuffix} {
					if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s %s: the refused merge left %s", c.name, format, p)
					}
				}
			}
		}
	}
}

// TestMergeRefusesPartBeingBuilt: a part whose folder is locked by a build (a retry of the
// part still running) is refused, not read half-written.
func TestMergeRefusesPartBeingBuilt(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	var parts []string
	for i := 0; i < 2; i++ {
		p := filepath.Join(root, fmt.Sprint("p", i))
		mustRun(t, "build", src["idx"], "-o", p, "--part", fmt.Sprintf("%d/2", i))
		parts = append(parts, p)
	}
	release, err := pipeline.LockParts(parts[1:]) // what a running build of part 1 holds
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, stderr, code := run(t, append([]string{"merge", "-o", filepath.Join(root, "m")}, parts...)...)
	if code == 0 || !strings.Contains(stderr, "is locked by the build with pid") {
		t.Errorf("merge while part 1 is locked: exit %d\n%s", code, stderr)
	}
}

// TestMergeMaxErrors: --max-errors counts the skipped inputs of all parts together.
func TestMergeMaxErrors(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	var parts []string
	for i := 0; i < 2; i++ {
		p := filepath.Join(root, fmt.Sprint("p", i))
		// Each part has one of the two damaged images: within the limit alone, over it together.
		mustRun(t, "build", src["folder"], "-o", p, "--part", fmt.Sprintf("%d/2", i), "--crop", "6", "--max-errors", "1")
		parts = append(parts, p)
	}
	_, stderr, code := run(t, append([]string{"merge", "-o", filepath.Join(root, "m")}, parts...)...)
	if code == 0 || !strings.Contains(stderr, "2 inputs skipped over all parts, more than --max-errors 1") {
		t.Errorf("merge: exit %d\n%s", code, stderr)
	}
}

// TestParsePart: --part I/N and auto from a Slurm array or a Kubernetes Indexed Job.
func TestParsePart(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		part  string
		parts int
		env   func(string) string
		i, n  int
		err   string
	}{
		{"2/5", 0, env(), 2, 5, ""},
		{"0/1", 0, env(), 0, 1, ""},
		{"5/5", 0, env(), 0, 0, "want I/N"},
		{"-1/5", 0, env(), 0, 0, "want I/N"},
		{"1/0", 0, env(), 0, 0, "want I/N"},
		{"1/4", 3, env(), 0, 0, "disagree"},
		// A Slurm array task's id is the index as it is; the count is --parts or PACKER_PARTS,
		// never the array's size: a resubmitted task (sbatch --array=2, or --array=2,5) is
		// part 2 of the count given, and without a count it is refused.
		{"auto", 4, env("SLURM_ARRAY_TASK_ID", "2", "SLURM_ARRAY_TASK_MIN", "2", "SLURM_ARRAY_TASK_COUNT", "1"), 2, 4, ""},
		{"auto", 0, env("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_MIN", "2", "SLURM_ARRAY_TASK_MAX", "5", "SLURM_ARRAY_TASK_COUNT", "2", "PACKER_PARTS", "8"), 5, 8, ""},
		{"auto", 0, env("SLURM_ARRAY_TASK_ID", "2", "SLURM_ARRAY_TASK_MIN", "2", "SLURM_ARRAY_TASK_COUNT", "1"), 0, 0, "the part count is missing: give --parts N or set PACKER_PARTS"},
		{"auto", 0, env("SLURM_ARRAY_TASK_ID", "2", "SLURM_ARRAY_TASK_COUNT", "4"), 0, 0, "SLURM_ARRAY_TASK_ID=2): the part count is missing"},
		{"auto", 4, env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_COUNT", "5"), 0, 0, "SLURM_ARRAY_TASK_ID=4 is not below the part count 4"},
		{"auto", 6, env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_STEP", "2", "PACKER_PARTS", "9"), 4, 6, ""}, // --parts wins
		{"auto", 0, env("SLURM_ARRAY_TASK_ID", "x", "PACKER_PARTS", "4"), 0, 0, "not a number"},
		{"auto", 0, env("SLURM_ARRAY_TASK_ID", "1", "PACKER_PARTS", "four"), 0, 0, "PACKER_PARTS=\"four\" is not a number"},
		{"auto", 0, env("SLURM_ARRAY_TASK_ID", "0", "PACKER_PARTS", "0"), 0, 0, "the part count is missing"},
		{"auto", 4, env("JOB_COMPLETION_INDEX", "3"), 3, 4, ""},
		{"auto", 0, env("JOB_COMPLETION_INDEX", "1", "PACKER_PARTS", "2"), 1, 2, ""},
		{"auto", 0, env("JOB_COMPLETION_INDEX", "1"), 0, 0, "JOB_COMPLETION_INDEX=1): the part count is missing"},
		{"auto", 2, env("JOB_COMPLETION_INDEX", "2"), 0, 0, "not below"},
		{"auto", 0, env(), 0, 0, "neither SLURM_ARRAY_TASK_ID"},
	} {
		i, n, err := parsePart(c.part, c.parts, c.env)
		if c.err == "" && (err != nil || i != c.i || n != c.n) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("parsePart(%q, %d) = %d, %d, %v; want %d, %d, %q", c.part, c.parts, i, n, err, c.i, c.n, c.err)
		}
	}
}

// TestMergeRefusesForeignContent: parts whose listings agree (positions, names, labels) but
// whose inputs are other files are refused, naming both parts and both content digests: a part
// built from a copy of the source in another folder (same names and labels, other
// modification times), and parts built before and after one file's bytes changed with its size
// kept (its modification time moved). Parts of one unchanged source still merge.
func TestMergeRefusesForeignContent(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 3)
	part := func(name, source string, i int) string {
		p := filepath.Join(root, name)
		mustRun(t, "build", source, "--from", "folder", "-o", p, "--part", fmt.Sprintf("%d/3", i))
		return p
	}
	p0, p1, p2 := part("p0", src, 0), part("p1", src, 1), part("p2", src, 2)
	mustRun(t, "merge", "-o", filepath.Join(root, "ok"), p0, p1, p2)

	// Another folder with the same names and labels: a copy whose files are an hour older.
	other := filepath.Join(root, "other")
	if err := os.CopyFS(other, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	filepath.WalkDir(other, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			err = os.Chtimes(p, old, old)
		}
		return err
	})
	foreign := part("foreign", other, 2)

	// The source changes between parts: one file of part 0's slice gets other bytes of the
	// same size and a later modification time.
	var first string
	filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && first == "" {
			first = p
		}
		return err
	})
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(first, data, 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(first, later, later); err != nil {
		t.Fatal(err)
	}
	after := part("after", src, 1)

	for k, c := range []struct {
		parts []string
		odd   string
	}{
		{[]string{p0, p1, foreign}, foreign},
		{[]string{p0, after, p2}, after},
	} {
		out := filepath.Join(root, fmt.Sprint("merged", k))
		_, stderr, code := run(t, append([]string{"merge", "-o", out}, c.parts...)...)
		t.Log(stderr)
		if code != 1 || !strings.Contains(stderr, "content_sha256") || !strings.Contains(stderr, c.odd) {
			t.Errorf("merge %v: exit %d, want 1 naming %s and content_sha256:\n%s", c.parts, code, c.odd, stderr)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("merge %v wrote %s", c.parts, out)
		}
	}
}

// TestMergeRefusesOutOverInputs: merge never writes over, into or around the source the parts
// were built from, or a part, whatever --force says: exit 2, the path and the reason named,
// and nothing changed.
func TestMergeRefusesOutOverInputs(t *testing.T) {
	for _, c := range []struct {
		name string
		out  func(src, data, parts string, ps []string) string
	}{
		{"out is the source", func(src, data, parts string, ps []string) string { return src }},
		{"out inside the source", func(src, data, parts string, ps []string) string { return filepath.Join(src, "cat") }},
		{"out contains the source", func(src, data, parts string, ps []string) string { return data }},
		{"out is a part", func(src, data, parts string, ps []string) string { return ps[0] }},
		{"out inside a part", func(src, data, parts string, ps []string) string { return filepath.Join(ps[1], "x") }},
		{"out contains the parts", func(src, data, parts string, ps []string) string { return parts }},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			data := filepath.Join(root, "data")
			src := filepath.Join(data, "train")
			writePNGFolder(t, src, 2)
			parts := filepath.Join(root, "parts")
			var ps []string
			for i := 0; i < 2; i++ {
				p := filepath.Join(parts, fmt.Sprint("p", i))
				mustRun(t, "build", src, "--from", "folder", "-o", p, "--part", fmt.Sprintf("%d/2", i))
				ps = append(ps, p)
			}
			out := c.out(src, data, parts, ps)
			before := noLocks(treeSum(t, root))
			_, stderr, code := run(t, append([]string{"merge", "-o", out, "--force"}, ps...)...)
			t.Log(stderr)
			if code != exitUsage || !strings.Contains(stderr, "source") || !strings.Contains(stderr, out) {
				t.Errorf("merge -o %s --force: exit %d, want %d naming it and saying why (\"source\"):\n%s", out, code, exitUsage, stderr)
			}
			if after := noLocks(treeSum(t, root)); after != before {
				t.Fatalf("the merge changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// noLocks drops the lock files (NAME.packer-lock) from a treeSum: taking a lock leaves its file.
func noLocks(sum string) string {
	var kept []string
	for _, l := range strings.SplitAfter(sum, "\n") {
		if !strings.Contains(l, ".packer-lock ") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

// TestMergeRefusesChangedRecords: for a record-format source (CIFAR-10), whose listing reads
// the records' bytes, parts built before and after one record's pixels changed (its label, size
// and the file's name kept) are refused as of other contents.
func TestMergeRefusesChangedRecords(t *testing.T) {
	root := t.TempDir()
	src, err := cifar.WriteTestDataset(root, cifar.Kind10, 3)
	if err != nil {
		t.Fatal(err)
	}
	part := func(name string, i int) string {
		p := filepath.Join(root, name)
		mustRun(t, "build", src, "--from", "cifar10", "-o", p, "--part", fmt.Sprintf("%d/2", i))
		return p
	}
	p0 := part("p0", 0)
	batch := filepath.Join(src, "data_batch_1.bin")
	data, err := os.ReadFile(batch)
	if err != nil {
		t.Fatal(err)
	}
	data[100] ^= 0xff // a pixel of the first record; its label is byte 0
	if err := os.WriteFile(batch, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p1 := part("p1", 1)
	out := filepath.Join(root, "merged")
	_, stderr, code := run(t, "merge", "-o", out, p0, p1)
	if code != 1 || !strings.Contains(stderr, "content_sha256") {
		t.Errorf("merge of CIFAR parts built before and after a record changed: exit %d, want 1 naming content_sha256:\n%s", code, stderr)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused merge wrote %s", out)
	}
}
