package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/packer-dev/packer/output/hdf5"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source/cifar"
	"github.com/packer-dev/packer/verify"
)

// verifierPython returns a Python interpreter that can run packer_reader's verifier (NumPy and,
// for HDF5, h5py): $PACKER_PYTHON, else Debian's /usr/bin/python3.
func verifierPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("PACKER_PYTHON"), "/usr/bin/python3"} {
		if p == "" {
			continue
		}
		if err := exec.Command(p, "-c", "import numpy, h5py").Run(); err == nil {
			return p
		}
	}
	t.Skip("no Python with NumPy and h5py (set PACKER_PYTHON): the Python verifier cannot run")
	return ""
}

// pythonDir is the directory that holds the packer_reader package.
func pythonDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", "..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// pyVerifyMany runs the Python verifier (packer_reader.verify, what `python3 -m packer_reader
// verify --json` prints) over dirs in one process and returns each report.
func pyVerifyMany(t *testing.T, py string, dirs []string) []pyReport {
	t.Helper()
	const script = `
import json, sys
import packer_reader
out = []
for d in sys.stdin.read().split("\n"):
    if d:
        out.append(packer_reader.verify(d).to_dict())
json.dump(out, sys.stdout)
`
	cmd := exec.Command(py, "-c", script)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDir(t))
	cmd.Stdin = strings.NewReader(strings.Join(dirs, "\n"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python verifier: %v\n%s", err, stderr.String())
	}
	var reps []pyReport
	if err := json.Unmarshal(out, &reps); err != nil {
		t.Fatalf("python verifier output: %v", err)
	}
	if len(reps) != len(dirs) {
		t.Fatalf("python verifier returned %d reports for %d directories", len(reps), len(dirs))
	}
	return reps
}

type pyReport struct {
	OK     bool           `json:"ok"`
	Faults []verify.Fault `json:"faults"`
	Notes  []string       `json:"notes"`
}

// buildMutationSource writes a CIFAR-100 file (100 classes, an auxiliary label column) of n records.
func buildMutationSource(t *testing.T, n int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "data.bin")
	if err := cifar.WriteBinary(src, "cifar100", cifar.TestRecords("cifar100", n, 9)); err != nil {
		t.Fatal(err)
	}
	return src
}

// mutation is one change to the decoded manifest.
type mutation struct {
	path  string // JSON path of the changed value, e.g. "files[1].sha256" or "classes[+]"
	apply func(doc any) any
}

// mutations walks the decoded manifest and returns, for every leaf, a change of its value, and
// for every list, the addition of an element, the removal of one, and the swap of two. Long
// lists (classes, class_counts) are sampled: their first, second and last elements.
func mutations(doc any) []mutation {
	var out []mutation
	var walk func(path string, v any, set func(root any, nv any) any, get func(root any) any)
	walk = func(path string, v any, set func(root, nv any) any, get func(root any) any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if path == "" && k == "manifest_sha256" {
					continue // changed by every mutation's stale variant; see the bit flips
				}
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, x[k], func(root, nv any) any {
					get(root).(map[string]any)[k] = nv
					return root
				}, func(root any) any { return get(root).(map[string]any)[k] })
			}
		case []any:
			n := len(x)
			listSet := func(root any, nl []any) any { return set(root, nl) }
			list := func(root any) []any { return get(root).([]any) }
			out = append(out, mutation{path + "[+]", func(root any) any {
				l := list(root)
				var e any = "added"
				if path == "skipped" {
					e = map[string]any{"input": "img/0001.png", "reason": "decode: unexpected EOF"}
				}
				if len(l) > 0 {
					e = clone(l[len(l)-1])
				}
				return listSet(root, append(slices.Clone(l), e))
			}})
			if n > 0 {
				out = append(out, mutation{path + "[-]", func(root any) any {
					l := list(root)
					return listSet(root, slices.Clone(l[:len(l)-1]))
				}})
			}
			if n > 1 {
				out = append(out, mutation{path + "[swap]", func(root any) any {
					l := slices.Clone(list(root))
					l[0], l[len(l)-1] = l[len(l)-1], l[0]
					return listSet(root, l)
				}})
				if _, ok := x[0].(json.Number); ok {
					// the same sum: one moved from the first element to the last
					out = append(out, mutation{path + "[move]", func(root any) any {
						l := slices.Clone(list(root))
						l[0] = addNum(l[0], -1)
						l[len(l)-1] = addNum(l[len(l)-1], 1)
						return listSet(root, l)
					}})
				}
			}
			idx := []int{}
			for i := range n {
				if n <= 4 || i < 2 || i == n-1 {
					idx = append(idx, i)
				}
			}
			for _, i := range idx {
				walk(fmt.Sprintf("%s[%d]", path, i), x[i], func(root, nv any) any {
					l := list(root)
					l[i] = nv
					return root
				}, func(root any) any { return list(root)[i] })
			}
		default:
			out = append(out, mutation{path, func(root any) any { return set(root, changed(v)) }})
		}
	}
	walk("", doc, func(root, nv any) any { return nv }, func(root any) any { return root })
	return out
}

func addNum(v any, d int64) any {
	n, _ := v.(json.Number).Int64()
	return json.Number(strconv.FormatInt(n+d, 10))
}

// changed returns a different value of the same JSON type.
func changed(v any) any {
	switch x := v.(type) {
	case string:
		if x == "" {
			return "x"
		}
		if len(x) == 64 && strings.Trim(x, "0123456789abcdef") == "" {
			return strings.Repeat("0", 63) + "1" // a SHA-256: another well-formed one
		}
		return x + "x"
	case json.Number:
		if f, err := x.Float64(); err == nil && strings.ContainsAny(string(x), ".eE") {
			return json.Number(strconv.FormatFloat(f+0.5, 'g', -1, 64))
		}
		return addNum(x, 1)
	case bool:
		return !x
	case nil:
		return "x"
	}
	panic(fmt.Sprintf("unexpected JSON value %T", v))
}

func clone(v any) any {
	b, _ := json.Marshal(v)
	return decodeJSON(b)
}

func decodeJSON(b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		panic(err)
	}
	return v
}

func encodeBody(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// checksumOnly lists the manifest fields that no data file can confirm, per format: a change to
// them is caught by the manifest's own checksum alone (the stale-checksum variant), and a
// resealed change is, by design, accepted. Everything else is cross-checked against the data.
var checksumOnly = map[string][]string{
	// skipped inputs are not in any data file; the transform and source settings and the packer
	// version are copied into every shard header's meta, so shards confirm them
	"shards": {`^skipped`},
	// .npy files carry no dataset metadata: names of classes (their number is confirmed by the
	// labels and class_counts), packer version, source, transform and layout are the manifest's
	// alone, and format_version is the shard format version, which no npy file holds
	"npy": {`^skipped`, `^packer$`, `^source`, `^transform`, `^classes\[\d+\]$`, `^classes\[swap\]$`, `^sample\.layout$`, `^format_version$`},
	// data.h5 stores classes, sample, label and the dataset meta (packer, source, transform) as
	// attributes; format_version is not stored
	"hdf5": {`^skipped`, `^format_version$`},
}

func isChecksumOnly(format, path string) bool {
	for _, re := range checksumOnly[format] {
		if regexp.MustCompile(re).MatchString(path) {
			return true
		}
	}
	return false
}

// linkDataset makes dir a copy of the dataset in src whose data files are hard links (verify
// only reads them) and whose manifest is manifest.
func linkDataset(t *testing.T, src, dir string, manifest []byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == shard.ManifestName {
			continue
		}
		if err := os.Link(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, shard.ManifestName), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
}

func goVerify(t *testing.T, dir string) *verify.Report {
	t.Helper()
	rep, err := verify.Dir(context.Background(), dir, verify.Options{}, formatCheckers())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestVerifyManifestMutations builds a real dataset of each format, changes every field of its
// manifest in turn, and requires both verifiers (Go and Python) to fail each change: once with
// the now stale manifest_sha256 (the checksum catches it), and once with the checksum recomputed
// (the cross-checks against the data catch it), except for the fields in checksumOnly.
func TestVerifyManifestMutations(t *testing.T) {
	py := verifierPython(t)
	src := buildMutationSource(t, 300)
	for _, format := range []string{"shards", "npy", "hdf5"} {
		t.Run(format, func(t *testing.T) {
			tmp := t.TempDir()
			clean := filepath.Join(tmp, "clean")
			mustRun(t, "build", src, "--from", "cifar100", "-o", clean, "--format", format, "--shard-size", "300KiB")
			orig, err := os.ReadFile(filepath.Join(clean, shard.ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			cut := bytes.LastIndex(orig, []byte(",\n  \"manifest_sha256\""))
			if cut < 0 {
				t.Fatal("the built manifest has no manifest_sha256")
			}
			staleTail := orig[cut:]
			base := decodeJSON(orig)
			delete(base.(map[string]any), "manifest_sha256")
			baseBody := encodeBody(base)

			type variant struct {
				dir, path string
				resealed  bool
			}
			var cases []variant
			seen := map[string]bool{}
			for i, mu := range mutations(base) {
				doc := mu.apply(clone(base))
				body := encodeBody(doc)
				if bytes.Equal(body, baseBody) {
					continue // a no-op (say, a swap of two equal counts)
				}
				seen[mu.path] = true
				stale := append(slices.Clone(body[:len(body)-3]), staleTail...)
				sealed, err := shard.SealManifest(body)
				if err != nil {
					t.Fatal(err)
				}
				d := filepath.Join(tmp, fmt.Sprintf("m%03d", i))
				linkDataset(t, clean, d+"s", stale)
				linkDataset(t, clean, d+"r", sealed)
				cases = append(cases, variant{d + "s", mu.path, false}, variant{d + "r", mu.path, true})
			}
			// the fields the issue names must be among the mutations
			for _, p := range []string{"count", "format_version", "label.dtype", "label.aux[0]", "label.aux[+]",
				"classes[swap]", "classes[0]", "class_counts[move]", "skipped[+]", "files[0].sha256",
				"sample.shape[0]", "transform.dtype", "source.kind", "packer"} {
				if !seen[p] {
					t.Errorf("no mutation of %s", p)
				}
			}
			dirs := make([]string, len(cases))
			for i, c := range cases {
				dirs[i] = c.dir
			}
			pyReps := pyVerifyMany(t, py, dirs)
			var missed []string
			for i, c := range cases {
				if c.resealed && isChecksumOnly(format, c.path) {
					continue
				}
				what := "stale checksum"
				if c.resealed {
					what = "checksum recomputed"
				}
				if rep := goVerify(t, c.dir); rep.OK {
					missed = append(missed, fmt.Sprintf("packer verify accepts %s (%s)", c.path, what))
				}
				if pyReps[i].OK {
					missed = append(missed, fmt.Sprintf("python verify accepts %s (%s)", c.path, what))
				}
			}
			t.Logf("%s: %d mutations, each with a stale and a recomputed checksum", format, len(cases)/2)
			if len(missed) > 0 {
				t.Errorf("%d of %d checks missed:\n%s", len(missed), len(cases)*2, strings.Join(missed, "\n"))
			}
		})
	}
}

// TestVerifyManifestBitFlips flips 48 random single bits of manifest.json (fixed seed) in each
// format's dataset; both verifiers must report every one.
func TestVerifyManifestBitFlips(t *testing.T) {
	py := verifierPython(t)
	src := buildMutationSource(t, 120)
	for _, format := range []string{"shards", "npy", "hdf5"} {
		t.Run(format, func(t *testing.T) {
			tmp := t.TempDir()
			clean := filepath.Join(tmp, "clean")
			mustRun(t, "build", src, "--from", "cifar100", "-o", clean, "--format", format, "--shard-size", "150KiB")
			orig, err := os.ReadFile(filepath.Join(clean, shard.ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, uint64(len(format))))
			const flips = 48
			var dirs, what []string
			for i := range flips {
				off := rng.IntN(len(orig))
				bit := byte(1) << rng.IntN(8)
				b := slices.Clone(orig)
				b[off] ^= bit
				d := filepath.Join(tmp, fmt.Sprintf("f%02d", i))
				linkDataset(t, clean, d, b)
				dirs = append(dirs, d)
				what = append(what, fmt.Sprintf("bit %#x at offset %d (%q)", bit, off, orig[off]))
			}
			pyReps := pyVerifyMany(t, py, dirs)
			caughtGo, caughtPy := 0, 0
			for i, d := range dirs {
				if rep := goVerify(t, d); rep.OK {
					t.Errorf("packer verify accepts a flip of %s", what[i])
				} else {
					caughtGo++
				}
				if pyReps[i].OK {
					t.Errorf("python verify accepts a flip of %s", what[i])
				} else {
					caughtPy++
				}
			}
			t.Logf("%s: %d flips: packer verify caught %d, python verify %d", format, flips, caughtGo, caughtPy)
		})
	}
}

// TestVerifyNumbering damages one record in the third shard of a dataset and requires both
// verifiers' --json reports to name the same damaged range: dataset-wide record numbers in
// first_record/records, the range inside the shard in shard_first_record; and the text reports
// to say which numbering they print.
func TestVerifyNumbering(t *testing.T) {
	py := verifierPython(t)
	src := filepath.Join(t.TempDir(), "data.bin")
	if err := cifar.WriteBinary(src, "cifar10", cifar.TestRecords("cifar10", 400, 4)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ds")
	mustRun(t, "build", src, "--from", "cifar10", "-o", dir, "--shard-size", "400KiB")
	m, err := shard.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) < 3 {
		t.Fatalf("%d shards, want at least 3", len(m.Files))
	}
	fe := m.Files[2]
	const local = 37
	path := filepath.Join(dir, fe.Path)
	r, err := shard.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	off, _ := r.DataRange(local, local+1)
	r.Close()
	flip(t, path, off+100, 0x10)

	type fault struct {
		File       string `json:"file"`
		Kind       string `json:"kind"`
		First      int64  `json:"first_record"`
		Count      int64  `json:"records"`
		ShardFirst *int64 `json:"shard_first_record"`
	}
	type report struct {
		Faults []fault `json:"faults"`
	}
	checksumFault := func(who string, out []byte) fault {
		t.Helper()
		var rep report
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("%s --json: %v\n%s", who, err, out)
		}
		for _, f := range rep.Faults {
			if f.Kind == "checksum" {
				if f.File != fe.Path || f.ShardFirst == nil {
					t.Fatalf("%s: checksum fault %+v, want one in %s with shard_first_record", who, f, fe.Path)
				}
				return f
			}
		}
		t.Fatalf("%s: no checksum fault in %s", who, out)
		return fault{}
	}
	goOut, _, code := run(t, "verify", "--json", dir)
	if code != exitCorrupt {
		t.Fatalf("packer verify exit %d", code)
	}
	gf := checksumFault("packer verify", []byte(goOut))
	cmd := exec.Command(py, "-m", "packer_reader", "verify", "--json", dir)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDir(t))
	pyOut, _ := cmd.Output()
	pf := checksumFault("python verify", pyOut)
	if gf.First != pf.First || gf.Count != pf.Count || *gf.ShardFirst != *pf.ShardFirst {
		t.Fatalf("packer verify reports records %d+%d (shard %d), python verify %d+%d (shard %d)",
			gf.First, gf.Count, *gf.ShardFirst, pf.First, pf.Count, *pf.ShardFirst)
	}
	if *gf.ShardFirst > local || local >= *gf.ShardFirst+gf.Count || gf.First != fe.FirstRecord+*gf.ShardFirst {
		t.Fatalf("reported records %d-%d (shard records %d-%d) do not hold record %d of %s (dataset record %d)",
			gf.First, gf.First+gf.Count-1, *gf.ShardFirst, *gf.ShardFirst+gf.Count-1, local, fe.Path, fe.FirstRecord+local)
	}
	want := fmt.Sprintf("records %d-%d (%s records %d-%d)", gf.First, gf.First+gf.Count-1, fe.Path, *gf.ShardFirst, *gf.ShardFirst+gf.Count-1)
	goText, _, _ := run(t, "verify", dir)
	cmd = exec.Command(py, "-m", "packer_reader", "verify", dir)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDir(t))
	pyText, _ := cmd.Output()
	for who, text := range map[string]string{"packer verify": goText, "python verify": string(pyText)} {
		if !strings.Contains(text, want) {
			t.Errorf("%s text report does not contain %q:\n%s", who, want, text)
		}
	}
}

// TestReadersRefuseEditedManifest: every reader, Go (shard.OpenDataset, of shards and npy, hdf5.Open, the
// commands' openAny) and Python (packer_reader.open), refuses at open a dataset whose manifest
// was edited after it was written, or has no checksum.
func TestReadersRefuseEditedManifest(t *testing.T) {
	py := verifierPython(t)
	src := buildMutationSource(t, 50)
	for _, format := range []string{"shards", "npy", "hdf5"} {
		t.Run(format, func(t *testing.T) {
			tmp := t.TempDir()
			clean := filepath.Join(tmp, "clean")
			mustRun(t, "build", src, "--from", "cifar100", "-o", clean, "--format", format)
			orig, err := os.ReadFile(filepath.Join(clean, shard.ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			edited := bytes.Replace(orig, []byte(`"count": 50`), []byte(`"count": 49`), 1)
			cut := bytes.LastIndex(orig, []byte(",\n  \"manifest_sha256\""))
			unsealed := append(slices.Clone(orig[:cut]), "\n}\n"...)
			for name, c := range map[string]struct {
				data []byte
				want string
			}{
				"edited":      {edited, "checksum mismatch: the manifest was edited or damaged"},
				"no checksum": {unsealed, "has no manifest_sha256: written by packer < 0.2 or edited; rebuild"},
			} {
				dir := filepath.Join(tmp, strings.ReplaceAll(name, " ", "-"))
				linkDataset(t, clean, dir, c.data)
				opens := map[string]func() error{
					"openAny": func() error {
						d, err := openAny(dir)
						if err == nil {
							d.Close()
						}
						return err
					},
				}
				switch format {
				case "shards", "npy":
					opens["shard.OpenDataset"] = func() error {
						d, err := shard.OpenDataset(dir)
						if err == nil {
							d.Close()
						}
						return err
					}
				case "hdf5":
					opens["hdf5.Open"] = func() error {
						r, err := hdf5.Open(dir)
						if err == nil {
							r.Close()
						}
						return err
					}
				}
				for who, open := range opens {
					err := open()
					if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), shard.ManifestName) {
						t.Errorf("%s: %s of the %s manifest: %v, want an error naming %s: %q", format, who, name, err, shard.ManifestName, c.want)
					}
				}
				cmd := exec.Command(py, "-c", "import sys, packer_reader\ntry:\n    packer_reader.open(sys.argv[1])\nexcept packer_reader.FormatError as e:\n    print(e)\n    sys.exit(3)\n", dir)
				cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDir(t))
				out, err := cmd.CombinedOutput()
				if err == nil || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), shard.ManifestName) {
					t.Errorf("%s: packer_reader.open of the %s manifest: %v %s, want a FormatError %q", format, name, err, out, c.want)
				}
			}
		})
	}
}
