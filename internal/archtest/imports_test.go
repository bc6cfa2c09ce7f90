// Package archtest checks the import rules of docs/architecture.md against the real import
// graph, as the go command reports it (go list), so that a rule broken by a new import fails
// the tests instead of drifting silently.
package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

const mod = "github.com/packer-dev/packer"

// pkg is what go list reports of one package.
type pkg struct {
	ImportPath   string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
	CgoFiles     []string
	Error        *struct{ Err string }
}

var (
	graphOnce sync.Once
	graph     map[string]*pkg
	graphErr  error
)

// load lists every package of the module and every package they depend on, with the
// standard library marked (go list -deps).
func load(t *testing.T) map[string]*pkg {
	t.Helper()
	graphOnce.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			graphErr = fmt.Errorf("the go command is needed to list the import graph: %w", err)
			return
		}
		// -e: a bad import (a program, a cycle) is reported in the package, not as a failure
		// to list, so the rule that forbids it is the one that fails.
		cmd := exec.Command(gobin, "list", "-e", "-deps", "-test=false",
			"-json=ImportPath,Standard,Imports,TestImports,XTestImports,Deps,CgoFiles,Error", mod+"/...")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			graphErr = fmt.Errorf("go list: %v\n%s", err, stderr.String())
			return
		}
		graph = map[string]*pkg{}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p pkg
			if err := dec.Decode(&p); err == io.EOF {
				break
			} else if err != nil {
				graphErr = fmt.Errorf("go list output: %w", err)
				return
			}
			graph[p.ImportPath] = &p
		}
	})
	if graphErr != nil {
		t.Fatal(graphErr)
	}
	return graph
}

// ours lists the module's own packages, sorted.
func ours(g map[string]*pkg) []string {
	var ps []string
	for path := range g {
		if path == mod || strings.HasPrefix(path, mod+"/") {
			ps = append(ps, path)
		}
	}
	sort.Strings(ps)
	return ps
}

// get returns the package at mod/rel, failing the test when the module has none: a rule
// about a package that was renamed must not pass by checking nothing.
func get(t *testing.T, g map[string]*pkg, rel string) *pkg {
	t.Helper()
	p, ok := g[mod+"/"+rel]
	if !ok {
		t.Fatalf("package %s/%s not found: update the rule and docs/architecture.md", mod, rel)
	}
	return p
}

func short(path string) string { return strings.TrimPrefix(path, mod+"/") }

// standard reports whether path is a standard-library package ("C", cgo, is not). A package
// only tests import is not in the listed graph; it is standard when its first path element
// has no dot, the go command's own rule.
func standard(g map[string]*pkg, path string) bool {
	if p, ok := g[path]; ok {
		return p.Standard
	}
	first, _, _ := strings.Cut(path, "/")
	return path != "C" && !strings.Contains(first, ".")
}

// TestStandardLibraryOnly: the shard format package (what every Go reader imports),
// source/internal/fsentry (the entry checks every file source shares) and internal/fileutil
// (every writer's durable commit) import only the standard library, without cgo, in their code
// and in their tests.
func TestStandardLibraryOnly(t *testing.T) {
	g := load(t)
	for _, rel := range []string{"shard", "source/internal/fsentry", "internal/fileutil"} {
		p := get(t, g, rel)
		var bad []string
		for _, imp := range p.Deps {
			if !standard(g, imp) {
				bad = append(bad, imp)
			}
		}
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if imp == p.ImportPath {
				continue // the external test package imports the package itself
			}
			if imp == "C" || !standard(g, imp) && !slices.Contains(bad, imp) {
				bad = append(bad, imp)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s must import only the standard library, but depends on %v", rel, bad)
		}
	}
}

// TestOutputContractLeaf: the output contract (package output) imports only shard and the
// standard library, so that an output format, reader half included, depends on nothing more
// by implementing it.
func TestOutputContractLeaf(t *testing.T) {
	g := load(t)
	p := get(t, g, "output")
	for _, imp := range p.Deps {
		if !standard(g, imp) && imp != mod+"/shard" {
			t.Errorf("output depends on %s: it may import only shard and the standard library", short(imp))
		}
	}
	for _, imp := range p.Imports {
		if imp == "C" {
			t.Error("output uses cgo")
		}
	}
}

// TestStorageLeaf: the storage seam (package storage and its conformance suite) imports only
// shard, internal/fileutil (the durable commit), golang.org/x/sys and the standard library, so that every reader and the build can use
// it, and a backend depends on nothing of the engine.
func TestStorageLeaf(t *testing.T) {
	g := load(t)
	for _, rel := range []string{"storage", "storage/storagetest"} {
		p := get(t, g, rel)
		for _, imp := range p.Deps {
			ok := standard(g, imp) || imp == mod+"/shard" || imp == mod+"/storage" || imp == mod+"/internal/fileutil" ||
				strings.HasPrefix(imp, "golang.org/x/sys/")
			if !ok {
				t.Errorf("%s depends on %s: it may import only shard, internal/fileutil, golang.org/x/sys and the standard library", rel, short(imp))
			}
		}
		for _, imp := range p.Imports {
			if imp == "C" {
				t.Errorf("%s uses cgo", rel)
			}
		}
	}
}

// TestS3Backend: the object-store backend (storage/s3) imports only the storage seam, shard,
// internal/fileutil, the AWS SDK for Go v2 (and its smithy runtime) and the standard library; its test server
// helper (storage/s3/s3test) only the SDK and the standard library. Neither shard nor storage
// depends on it (TestNeverDependsOn).
func TestS3Backend(t *testing.T) {
	g := load(t)
	sdk := func(imp string) bool {
		return strings.HasPrefix(imp, "github.com/aws/aws-sdk-go-v2") || strings.HasPrefix(imp, "github.com/aws/smithy-go")
	}
	for rel, allowed := range map[string][]string{
		"storage/s3":        {mod + "/storage", mod + "/shard", mod + "/internal/fileutil"},
		"storage/s3/s3test": {},
	} {
		p := get(t, g, rel)
		for _, imp := range p.Deps {
			if !standard(g, imp) && !sdk(imp) && !slices.Contains(allowed, imp) && !strings.HasPrefix(imp, "golang.org/x/sys/") {
				t.Errorf("%s depends on %s: it may import only %v, the AWS SDK and the standard library", rel, short(imp), allowed)
			}
		}
		for _, imp := range p.Imports {
			if imp == "C" {
				t.Errorf("%s uses cgo", rel)
			}
		}
	}
}

// never lists, for a package, the module packages it must never depend on, directly or
// through another package. A forbidden "p" is p and every package under it; "p/*" is only the
// packages under p (for source/* and output/*: the plug-ins and their helpers, not the
// contract).
var never = []struct {
	pkg    string
	forbid []string
	why    string
}{
	{"shard", []string{"pipeline", "transforms", "gpu", "verify", "source", "output", "storage"}, "the format and its readers stand alone (shard defines the FS it reads through; storage adapts to it)"},
	{"storage", []string{"storage/s3"}, "the seam knows no backend but the local one; the command picks the object store"},
	{"verify", []string{"transforms", "gpu", "pipeline", "source", "output/*"}, "checking a dataset needs neither the decoders nor a GPU nor the build"},
	{"transforms", []string{"pipeline", "source", "output/*", "verify", "gpu"}, "the CPU reference knows nothing of builds, sources or devices"},
	{"gpu", []string{"pipeline", "source/*", "output/*", "verify"}, "the GPU resizer is handed to the build by the command; it does not know the build"},
	{"pipeline", []string{"source/*", "output/*", "gpu", "verify"}, "the engine knows no source, output format or device by name: it uses the two contracts, and the command wires them"},
	{"source/internal/fsentry", []string{"pipeline", "transforms", "shard"}, "shared entry checks, below every source"},
	{"source", []string{"pipeline", "source/*", "output", "gpu", "verify"}, "the source contract and detection know neither the engine nor any source, output format or device: each source package exports its entry"},
	{"internal/fileutil", []string{""}, "the durable commit below every writer: a leaf"},
}

// forbidden reports whether the package at path is forbidden by the entry f of a never list.
func forbidden(path, f string) bool {
	if f == "" {
		return path == mod || strings.HasPrefix(path, mod+"/")
	}
	if under, ok := strings.CutSuffix(f, "/*"); ok {
		return strings.HasPrefix(path, mod+"/"+under+"/")
	}
	return path == mod+"/"+f || strings.HasPrefix(path, mod+"/"+f+"/")
}

// TestNeverDependsOn checks the forbidden dependencies above over the transitive graph.
func TestNeverDependsOn(t *testing.T) {
	g := load(t)
	for _, r := range never {
		p := get(t, g, r.pkg)
		for _, dep := range p.Deps {
			for _, f := range r.forbid {
				if forbidden(dep, f) {
					t.Errorf("%s depends on %s (%s)", r.pkg, short(dep), r.why)
				}
			}
		}
	}
}

// TestLeaves: the small internal helpers depend on no module package but the ones listed:
// humanize (how packer prints and reads sizes) on none, progress on humanize alone.
func TestLeaves(t *testing.T) {
	g := load(t)
	for rel, allowed := range map[string][]string{
		"internal/humanize": nil,
		"internal/progress": {"internal/humanize"},
	} {
		for _, dep := range get(t, g, rel).Deps {
			if strings.HasPrefix(dep, mod+"/") && !slices.Contains(allowed, short(dep)) {
				t.Errorf("%s depends on %s: it may depend on no module package but %v", rel, short(dep), allowed)
			}
		}
	}
}

// TestNothingImportsCommands: no package, nor any test, imports a command (cmd/... or
// internal/tools/...).
func TestNothingImportsCommands(t *testing.T) {
	g := load(t)
	isCmd := func(path string) bool {
		return strings.HasPrefix(path, mod+"/cmd/") || strings.HasPrefix(path, mod+"/internal/tools/")
	}
	for _, path := range ours(g) {
		p := g[path]
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if isCmd(imp) && imp != path {
				t.Errorf("%s imports the command %s: commands are programs, not libraries", short(path), short(imp))
			}
		}
	}
}

// plugins lists the plug-ins of a contract, from the tree: the packages directly under contract
// (source or output), but its internal helpers. Each is one source kind or output format.
func plugins(g map[string]*pkg, contract string) []string {
	var ps []string
	for _, path := range ours(g) {
		rel, ok := strings.CutPrefix(short(path), contract+"/")
		if ok && !strings.Contains(rel, "/") && rel != "internal" {
			ps = append(ps, contract+"/"+rel)
		}
	}
	return ps
}

// TestPluginsListed: every package directly under source/ and output/ (but internal/) is a
// plug-in the command lists in its table of source kinds or output formats, so the lists the
// rules below derive from the tree are the plug-ins and nothing else; and there are some.
func TestPluginsListed(t *testing.T) {
	g := load(t)
	cmd := get(t, g, "cmd/packer")
	for _, contract := range []string{"source", "output"} {
		ps := plugins(g, contract)
		if len(ps) == 0 {
			t.Errorf("no plug-ins found under %s/", contract)
		}
		for _, p := range ps {
			if !slices.Contains(cmd.Imports, mod+"/"+p) {
				t.Errorf("%s is not imported by cmd/packer: a package directly under %s/ is a plug-in the command lists (helpers go under %s/internal/)", p, contract, contract)
			}
		}
	}
}

// TestSourcesAndOutputsApart: a source (a package under source/: a kind or a helper the kinds
// share) never depends on the engine (pipeline), on the output side (the output contract or a
// format), on the GPU package or on verify; an output format never depends on a source, the
// source contract, the engine, the transforms or the GPU package. Only the command puts them
// together, and the engine uses the two contracts. A source may use another (video reuses
// imagedir's layout rules) and the helpers under source/internal/. The plug-ins are found in
// the tree (see plugins).
func TestSourcesAndOutputsApart(t *testing.T) {
	g := load(t)
	check := func(rel string, forbid []string, why string) {
		p := get(t, g, rel)
		for _, dep := range p.Deps {
			for _, f := range forbid {
				if forbidden(dep, f) {
					t.Errorf("%s depends on %s (%s)", rel, short(dep), why)
				}
			}
		}
	}
	for _, path := range ours(g) {
		if rel := short(path); strings.HasPrefix(rel, "source/") {
			check(rel, []string{"pipeline", "output", "gpu", "verify"}, "a source only enumerates and decodes, behind the source contract")
		}
	}
	for _, o := range plugins(g, "output") {
		check(o, []string{"source", "pipeline", "transforms", "gpu"}, "an output only writes and checks records, behind the output contract; its reader must not pull in the engine, the transforms or their cgo")
	}
}

// TestCgoConfined: cgo is used only where a C library is the point (libjpeg-turbo and the
// AVX2 resampler in transforms, libhdf5 in output/hdf5, ffmpeg's libraries in source/video,
// the CPU harness of the CUDA kernels); the CUDA driver is reached only from gpu, through
// dlopen (libhdf5 and the libav libraries too are opened with dlopen, by the C shims of
// output/hdf5 and source/video); and the kernels' CPU harness only from gpu's tests.
func TestCgoConfined(t *testing.T) {
	g := load(t)
	cgo := []string{"transforms", "output/hdf5", "source/video", "gpu/kernels"}
	only := map[string][]string{
		"github.com/ebitengine/purego": {"gpu/internal/cuda"},
		mod + "/gpu/kernels":           {}, // tests of gpu only: see below
	}
	for _, path := range ours(g) {
		p := g[path]
		rel := short(path)
		if len(p.CgoFiles) > 0 && !slices.Contains(cgo, rel) {
			t.Errorf("%s uses cgo (%v): only %v may", rel, p.CgoFiles, cgo)
		}
		for _, imp := range p.Imports {
			if allowed, ok := only[imp]; ok && !slices.Contains(allowed, rel) {
				t.Errorf("%s imports %s: only %v may", rel, imp, allowed)
			}
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if imp == mod+"/gpu/kernels" && rel != "gpu" && rel != "gpu/kernels" {
				t.Errorf("the tests of %s import gpu/kernels: only gpu's tests may", rel)
			}
		}
	}
}

// TestGraphListed guards the tests above against checking an empty or partial graph.
func TestGraphListed(t *testing.T) {
	g := load(t)
	var broken []string
	for _, path := range ours(g) {
		if p := g[path]; p.Error != nil {
			broken = append(broken, short(path)+": "+p.Error.Err)
		}
	}
	if len(broken) > 0 {
		t.Errorf("go list reports errors:\n%s", strings.Join(broken, "\n"))
	}
	for _, rel := range []string{"cmd/packer", "pipeline", "shard", "verify", "transforms", "gpu", "source", "source/internal/fsentry", "source/internal/memdecode", "output"} {
		get(t, g, rel)
	}
}
