package transforms

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The fidelity tests compare against Pillow itself, run by Debian's /usr/bin/python3 with
// python3-pil (Pillow 9.4), or by the interpreter named in PACKER_PYTHON. A missing Pillow
// fails the tests: set PACKER_NO_PILLOW=1 to skip them explicitly.
var pythonPath = func() string {
	if p := os.Getenv("PACKER_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}()

func requirePillow(t testing.TB) {
	t.Helper()
	if os.Getenv("PACKER_NO_PILLOW") == "1" {
		t.Skip("PACKER_NO_PILLOW=1: Pillow fidelity tests skipped")
	}
	out, err := exec.Command(pythonPath, "-c", "import PIL; print(PIL.__version__)").CombinedOutput()
	if err != nil {
		t.Fatalf("fidelity tests need Pillow: %s -c 'import PIL' failed: %v\n%s\n"+
			"install Debian's python3-pil (apt-get install python3-pil), or set PACKER_NO_PILLOW=1 to skip these tests", pythonPath, err, out)
	}
	if v := strings.TrimSpace(string(out)); !strings.HasPrefix(v, "9.") {
		t.Logf("note: reference Pillow is %s; packer follows Pillow 9.4", v)
	}
}

// pillowJob is one request to testdata/pillow_ref.py; see that script for the ops.
type pillowJob map[string]any

type pillowResult struct {
	W, H  int
	Error string
	Data  []byte
}

// runPillow runs the jobs in one Python process. For jobs with an "in_image", the image's
// bytes are written to a temporary file first; every job's output is read back into Data.
func runPillow(t testing.TB, jobs []pillowJob, inputs []Image) []pillowResult {
	t.Helper()
	requirePillow(t)
	dir := t.TempDir()
	var buf bytes.Buffer
	for i, j := range jobs {
		if inputs != nil && inputs[i].Pix != nil {
			in := filepath.Join(dir, fmt.Sprintf("in%d.raw", i))
			if err := os.WriteFile(in, inputs[i].Pix, 0o600); err != nil {
				t.Fatal(err)
			}
			j["in"], j["w"], j["h"] = in, inputs[i].W, inputs[i].H
			j["mode"] = map[int]string{1: "L", 3: "RGB"}[inputs[i].C]
		}
		j["out"] = filepath.Join(dir, fmt.Sprintf("out%d.raw", i))
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	jobFile := filepath.Join(dir, "jobs.jsonl")
	if err := os.WriteFile(jobFile, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pythonPath, filepath.Join("testdata", "pillow_ref.py"), jobFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pillow_ref.py: %v\n%s", err, stderr.String())
	}
	var res []pillowResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r pillowResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("pillow_ref.py output %q: %v", sc.Text(), err)
		}
		res = append(res, r)
	}
	if len(res) != len(jobs) {
		t.Fatalf("pillow_ref.py answered %d of %d jobs\n%s", len(res), len(jobs), stderr.String())
	}
	for i := range res {
		if res[i].Error != "" {
			continue
		}
		data, err := os.ReadFile(jobs[i]["out"].(string))
		if err != nil {
			t.Fatal(err)
		}
		res[i].Data = data
	}
	return res
}

// loadPhoto decodes a real photo through Pillow (convert(mode)), so tests of the transforms
// do not depend on packer's decoders.
func loadPhotos(t testing.TB, paths []string, mode string) []Image {
	t.Helper()
	jobs := make([]pillowJob, len(paths))
	for i, p := range paths {
		jobs[i] = pillowJob{"op": "load", "path": p, "mode": mode}
	}
	res := runPillow(t, jobs, nil)
	c := map[string]int{"L": 1, "RGB": 3}[mode]
	imgs := make([]Image, len(paths))
	for i, r := range res {
		if r.Error != "" {
			t.Fatalf("load %s: %s", paths[i], r.Error)
		}
		imgs[i] = Image{W: r.W, H: r.H, C: c, Pix: r.Data}
	}
	return imgs
}

// wallpapers lists real photos from Debian's wallpaper packages.
func wallpapers(t testing.TB, max int) []string {
	t.Helper()
	var paths []string
	for _, pat := range []string{"/usr/share/backgrounds/*.jpg", "/usr/share/backgrounds/*.png",
		"/usr/share/wallpapers/*/contents/images/*.jpg", "/usr/share/images/desktop-base/*.png"} {
		m, _ := filepath.Glob(pat)
		paths = append(paths, m...)
	}
	if len(paths) == 0 {
		t.Skip("no Debian wallpapers installed (/usr/share/backgrounds); install ukui-wallpapers")
	}
	if len(paths) > max {
		paths = paths[:max]
	}
	return paths
}

// firstDiff describes the first differing byte of two same-shaped images.
func firstDiff(got, want []byte, w, c int) string {
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	n := 0
	first := -1
	for i := range got {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if first < 0 {
		return ""
	}
	px := first / c
	return fmt.Sprintf("%d bytes differ; first at x=%d y=%d ch=%d: got %d want %d",
		n, px%w, px/w, first%c, got[first], want[first])
}
