package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestUnknownCommandIsUsage: a mistyped command is a usage error (exit 2), with a suggestion.
func TestUnknownCommandIsUsage(t *testing.T) {
	_, errs, code := run(t, "buidl", "src")
	if code != exitUsage || !strings.Contains(errs, `unknown command "buidl"`) || !strings.Contains(errs, "did you mean build") {
		t.Fatalf("exit %d, stderr %q: want exit %d naming the command and suggesting build", code, errs, exitUsage)
	}
	// Flags after a mistyped command are the command's, not the root's: the answer is still
	// the unknown command and the suggestion, not an unknown flag.
	for _, args := range [][]string{{"biuld", "src", "-o", "out"}, {"biuld", "src", "--out", "out"}, {"biuld", "--workers", "2", "src"}} {
		_, errs, code := run(t, args...)
		if code != exitUsage || !strings.Contains(errs, `unknown command "biuld"`) || !strings.Contains(errs, "did you mean build") {
			t.Errorf("%q: exit %d, stderr %q: want exit %d naming the command and suggesting build", args, code, errs, exitUsage)
		}
	}
	// A flag the root does not know, with no command, is still an unknown flag.
	if _, errs, code := run(t, "--verison"); code != exitUsage || !strings.Contains(errs, "unknown flag: --verison") {
		t.Errorf("--verison: exit %d, stderr %q: want exit %d and an unknown flag", code, errs, exitUsage)
	}
}

func TestVersionFlag(t *testing.T) {
	out := mustRun(t, "--version")
	if strings.TrimSpace(out) != "packer "+versionForTest() {
		t.Fatalf("--version printed %q", out)
	}
}

func versionForTest() string { return newRootCommand(stdIO()).Version }

// TestVerifyMissingIsNotCorrupt: nothing was read, so verify fails (1), it does not report
// corruption (3).
func TestVerifyMissingIsNotCorrupt(t *testing.T) {
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), t.TempDir()} {
		out, errs, code := run(t, "verify", dir)
		if code != exitFailure || strings.Contains(out+errs, "CORRUPT") {
			t.Errorf("verify %s: exit %d, output %q %q: want exit %d and no CORRUPT", dir, code, out, errs, exitFailure)
		}
	}
}

// TestURLPathsRefused: a URL path must not silently become a local directory. s3:// is
// accepted where object storage is implemented (build -o, verify, inspect, preview; see
// s3_test.go) and refused elsewhere; other schemes are refused everywhere.
func TestURLPathsRefused(t *testing.T) {
	wd, _ := os.Getwd()
	dir := t.TempDir()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "/usr/share/datasets/fashion-mnist", "-o", "gs://bucket/out"}, "URLs are not supported"},
		{[]string{"verify", "gs://bucket/out"}, "URLs are not supported"},
		{[]string{"inspect", "https://host/out"}, "URLs are not supported"},
		{[]string{"preview", "out", "-o", "s3://bucket/p.png"}, "preview does not read or write object storage"},
		{[]string{"plan", "gs://bucket/raw", "-o", "p.plan"}, "URLs are not supported"},
		{[]string{"build", "/usr/share/datasets/fashion-mnist", "-o", "s3://Bad_Bucket/out"}, "not a valid bucket name"},
		{[]string{"verify", "s3://bucket/../x"}, "not a valid key prefix"},
	} {
		_, errs, code := run(t, c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("packer %s: exit %d, stderr %q: want a usage error saying %q", strings.Join(c.args, " "), code, errs, c.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused URL left %v in the working directory", ents)
	}
}

func TestMaxPixelsHelpStatesDefault(t *testing.T) {
	out := mustRun(t, "build", "--help")
	if !strings.Contains(out, "178956970") {
		t.Fatalf("build --help does not state the --max-pixels default 178956970:\n%s", out)
	}
}

// bombPNG returns the first bytes of a PNG whose header claims w×h pixels.
func bombPNG(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	binary.Write(&b, binary.BigEndian, uint32(len(ihdr)))
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// TestInspectKeepsReasonNumbersWhole: inspect used to cut skip reasons at 60 bytes, so
// "limit of 178956970" read "limit of 17895697".
func TestInspectKeepsReasonNumbersWhole(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	cls := filepath.Join(src, "cls")
	if err := os.MkdirAll(cls, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cls, "bomb.png"), bombPNG(100000, 100000), 0o644); err != nil {
		t.Fatal(err)
	}
	var ok bytes.Buffer
	if err := png.Encode(&ok, image.NewRGBA(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cls, "ok.png"), ok.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	mustRun(t, "build", src, "-o", out, "--crop", "8")
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Skipped) != 1 || !strings.Contains(m.Skipped[0].Reason, "178956970") {
		t.Fatalf("skipped %v: want the bomb, naming the limit 178956970", m.Skipped)
	}
	text := mustRun(t, "inspect", out)
	found := false
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "over the limit") { // the skip-reason line, not the source spec
			found = true
			if !strings.Contains(line, "178956970") {
				t.Errorf("inspect cut the limit: %q", line)
			}
		}
	}
	if !found {
		t.Fatalf("inspect shows no skip reason:\n%s", text)
	}
}

// TestClassesForIntegerLists: --classes used to be ignored silently for a list labelled by
// integers; now it names the classes, and is refused where it cannot apply.
func TestClassesForIntegerLists(t *testing.T) {
	dir := t.TempDir()
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.png", "b.png"} {
		if err := os.WriteFile(filepath.Join(dir, n), img.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list := filepath.Join(dir, "list.csv")
	if err := os.WriteFile(list, []byte("path,label\na.png,0\nb.png,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	mustRun(t, "build", list, "-o", out, "--classes", "cat,dog")
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(m.Classes, ",") != "cat,dog" {
		t.Fatalf("classes %v, want [cat dog]", m.Classes)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"build", list, "-o", filepath.Join(t.TempDir(), "o"), "--classes", "cat"}, exitFailure}, // label 1 has no name
		{[]string{"build", list, "-o", filepath.Join(t.TempDir(), "o"), "--classes", "cat,cat"}, exitUsage},
		{[]string{"build", dir, "--from", "folder", "-o", filepath.Join(t.TempDir(), "o"), "--classes", "x"}, exitUsage},
	} {
		if _, errs, code := run(t, c.args...); code != c.code || !strings.Contains(errs, "classes") {
			t.Errorf("packer %s: exit %d (%q), want %d with a message about the classes", strings.Join(c.args, " "), code, errs, c.code)
		}
	}
}

// TestPreviewRefusesInsideDataset: `preview -o OUT/manifest.json` used to overwrite the
// manifest with a PNG (and -o OUT/x.png added an unlisted file verify then reports).
func TestPreviewRefusesInsideDataset(t *testing.T) {
	out := filepath.Join(t.TempDir(), "fm")
	mustRun(t, "build", "/usr/share/datasets/fashion-mnist", "--split", "test", "-o", out)
	before, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{filepath.Join(out, "manifest.json"), filepath.Join(out, "..", filepath.Base(out), "sheet.png")} {
		if _, errs, code := run(t, "preview", out, "-o", target); code != exitUsage || !strings.Contains(errs, "inside the dataset") {
			t.Errorf("preview -o %s: exit %d (%q), want a usage error", target, code, errs)
		}
	}
	after, _ := os.ReadFile(filepath.Join(out, "manifest.json"))
	if !bytes.Equal(before, after) {
		t.Fatal("preview changed the manifest")
	}
	mustRun(t, "verify", out)
	sheet := filepath.Join(t.TempDir(), "sheet.png")
	mustRun(t, "preview", out, "-o", sheet)
	if _, err := os.Stat(sheet); err != nil {
		t.Fatal(err)
	}
}

// TestFlagHelp: the values of build's enumerated flags complete in the shell, and a mistyped
// flag gets a suggestion.
func TestFlagHelp(t *testing.T) {
	out, _, code := run(t, "__complete", "build", "--format", "")
	if code != 0 || !strings.Contains(out, "shards\nnpy\nhdf5\n") {
		t.Errorf("--format completion: exit %d\n%s", code, out)
	}
	out, _, _ = run(t, "__complete", "build", "--from", "")
	for _, k := range []string{"folder", "cifar10", "webdataset", "tfrecord"} {
		if !strings.Contains(out, k+"\n") {
			t.Errorf("--from completion lacks %s:\n%s", k, out)
		}
	}
	out, _, _ = run(t, "__complete", "build", "--dtype", "")
	if !strings.Contains(out, "float16\n") {
		t.Errorf("--dtype completion:\n%s", out)
	}
	_, stderr, code := run(t, "build", "src", "-o", "out", "--crp", "8")
	if code != 2 || !strings.Contains(stderr, "unknown flag: --crp; did you mean --crop?") {
		t.Errorf("mistyped flag: exit %d\n%s", code, stderr)
	}
	_, stderr, _ = run(t, "build", "src", "-o", "out", "--zzzzzzzz")
	if strings.Contains(stderr, "did you mean") {
		t.Errorf("a suggestion for a flag nothing resembles:\n%s", stderr)
	}
}

// TestBuildJSON: build --json prints one JSON summary on stdout that agrees with the manifest.
func TestBuildJSON(t *testing.T) {
	src := t.TempDir()
	writePNGFolder(t, src, 3)
	out := filepath.Join(t.TempDir(), "out")
	stdout := mustRun(t, "build", src, "-o", out, "--crop", "2", "--json")
	var s buildSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("--json output is not one JSON object: %v\n%s", err, stdout)
	}
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Records != m.Count || s.Inputs != m.Inputs || s.Format != "shards" || s.Source != "folder" || s.Out != out || s.Files != len(m.Files) {
		t.Errorf("summary %+v does not agree with the manifest (count %d, inputs %d)", s, m.Count, m.Inputs)
	}
}

// TestBenchJSON: bench --json prints one JSON object that agrees with the dataset.
func TestBenchJSON(t *testing.T) {
	src := t.TempDir()
	writePNGFolder(t, src, 3)
	out := filepath.Join(t.TempDir(), "out")
	mustRun(t, "build", src, "-o", out, "--crop", "2")
	stdout := mustRun(t, "bench", out, "--json", "--repeat", "1")
	var s benchSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("--json output is not one JSON object: %v\n%s", err, stdout)
	}
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Records != m.Count || s.Files != len(m.Files) || s.Bytes != m.Files[0].Size || !s.CRC || s.Ratio <= 0 || s.ReaderSeconds <= 0 {
		t.Errorf("summary %+v does not agree with the manifest (count %d, %d files)", s, m.Count, len(m.Files))
	}
	// A shuffled cold pass with several reads in flight (--depth) reads every record too.
	stdout = mustRun(t, "bench", out, "--json", "--repeat", "1", "--shuffle", "--cold", "--batch", "1", "--depth", "3")
	s = benchSummary{}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || s.Records != m.Count {
		t.Errorf("--shuffle --depth 3: %v, summary %+v, want %d records", err, s, m.Count)
	}
	if _, _, code := run(t, "bench", out, "--depth", "-1"); code != exitUsage {
		t.Errorf("--depth -1: exit %d, want a usage error", code)
	}
}

// TestClassesFile: --classes @FILE reads one class name per line.
func TestClassesFile(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list.csv")
	writeTinyPNG(t, filepath.Join(dir, "a.png"), 1)
	writeTinyPNG(t, filepath.Join(dir, "b.png"), 2)
	os.WriteFile(list, []byte("path,label\na.png,0\nb.png,1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "names.txt"), []byte("cat\n\ndog\n"), 0o644)
	out := filepath.Join(dir, "out")
	mustRun(t, "build", list, "-o", out, "--classes", "@"+filepath.Join(dir, "names.txt"))
	m, err := shard.ReadManifest(out)
	if err != nil || strings.Join(m.Classes, ",") != "cat,dog" {
		t.Errorf("classes %v, %v", m.Classes, err)
	}
	os.WriteFile(filepath.Join(dir, "dup.txt"), []byte("cat\ncat\n"), 0o644)
	if _, _, code := run(t, "build", list, "-o", filepath.Join(dir, "o2"), "--classes", "@"+filepath.Join(dir, "dup.txt")); code != exitUsage {
		t.Errorf("duplicate names in a classes file: exit %d", code)
	}
}

// TestPreviewFormats: preview writes a JPEG for a .jpg name, a PNG for .png, and refuses any
// other name instead of writing PNG bytes under it.
func TestPreviewFormats(t *testing.T) {
	out := filepath.Join(t.TempDir(), "fm")
	mustRun(t, "build", "/usr/share/datasets/fashion-mnist", "--split", "test", "-o", out)
	dir := t.TempDir()
	for name, magic := range map[string]string{"s.jpg": "\xff\xd8\xff", "s.JPEG": "\xff\xd8\xff", "s.png": "\x89PNG"} {
		p := filepath.Join(dir, name)
		mustRun(t, "preview", out, "-o", p, "--count", "4")
		data, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(data, []byte(magic)) {
			t.Errorf("preview -o %s: %v, starts %q", name, err, data[:min(4, len(data))])
		}
	}
	p := filepath.Join(dir, "s.gif")
	if _, errs, code := run(t, "preview", out, "-o", p); code != exitUsage || !strings.Contains(errs, "PNG (.png) or JPEG") {
		t.Errorf("preview -o s.gif: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(p); err == nil {
		t.Error("preview wrote s.gif")
	}
}

// TestFileCount checks verify's count of data files: singular and plural, and the file noun of
// each format.
func TestFileCount(t *testing.T) {
	for _, c := range []struct {
		n      int
		format string
		want   string
	}{
		{1, "shards", "1 shard file"}, {8, "shards", "8 shard files"}, {2, "npy", "2 npy files"},
		{1, "hdf5", "1 HDF5 file"}, {0, "shards", "0 shard files"},
	} {
		if got := fileCount(c.n, c.format); got != c.want {
			t.Errorf("fileCount(%d, %q) = %q, want %q", c.n, c.format, got, c.want)
		}
	}
}

// TestSummaryCounts: build's and verify's summaries put a count of one in the singular
// ("1 file", not "1 files") and other counts in the plural.
func TestSummaryCounts(t *testing.T) {
	src := t.TempDir()
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewRGBA(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "cls"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "cls", "one.png"), img.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	text := mustRun(t, "build", src, "-o", out, "--crop", "2", "--workers", "1")
	for _, want := range []string{"packed 1 record from 1 input (folder) into " + out + " [", ", 1 file, ", "; 1 worker; "} {
		if !strings.Contains(text, want) {
			t.Errorf("build summary lacks %q:\n%s", want, text)
		}
	}
	if text := mustRun(t, "verify", out); !strings.Contains(text, ": 1 record in 1 shard file (12.0 KiB) matches the manifest\n") {
		t.Errorf("verify summary: %s", text)
	}
	if text := mustRun(t, "inspect", "--records", "5", out); !strings.Contains(text, "\nfirst 1 record:\n") || !strings.Contains(text, "  record 0\n") {
		t.Errorf("inspect lacks %q and %q:\n%s", "first 1 record:", "record 0", text)
	}
	plan := filepath.Join(t.TempDir(), "plan.txt")
	if text := mustRun(t, "plan", src, "-o", plan); !strings.Contains(text, "planned 1 input of ") {
		t.Errorf("plan summary: %s", text)
	}
	if err := os.WriteFile(filepath.Join(out, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if text := mustRun(t, "verify", out); !strings.Contains(text, ": 1 file the manifest does not list (") {
		t.Errorf("verify of a dataset with one unlisted file: %s", text)
	}
	src2 := t.TempDir()
	writePNGFolder(t, src2, 2) // two classes of two
	out2 := filepath.Join(t.TempDir(), "out")
	text = mustRun(t, "build", src2, "-o", out2, "--crop", "2", "--workers", "2")
	for _, want := range []string{"packed 4 records from 4 inputs (folder)", "; 2 workers; "} {
		if !strings.Contains(text, want) {
			t.Errorf("build summary lacks %q:\n%s", want, text)
		}
	}
}
