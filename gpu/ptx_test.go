package gpu

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPTXUpToDate rebuilds the PTX with scripts/build-ptx.sh and requires the checked-in,
// embedded copy to be identical: the kernels' source and the binary's PTX never drift.
func TestPTXUpToDate(t *testing.T) {
	if _, err := exec.LookPath("clang-14"); err != nil {
		t.Skipf("clang-14 not installed (apt-get install clang-14), cannot rebuild the PTX: %v", err)
	}
	out := filepath.Join(t.TempDir(), "resize.ptx")
	cmd := exec.Command("bash", "../scripts/build-ptx.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-ptx.sh: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	checked, err := os.ReadFile("kernels/resize.ptx")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, checked) {
		t.Fatalf("gpu/kernels/resize.ptx is stale: run scripts/build-ptx.sh and commit the result")
	}
	if string(checked) != PTX() {
		t.Fatalf("embedded PTX differs from gpu/kernels/resize.ptx: rebuild the package")
	}
}

// TestPTXParams checks every launcher's argument list against the .entry signatures parsed
// from the embedded PTX: same count, same size for each argument.
func TestPTXParams(t *testing.T) {
	entries, err := ParsePTXEntries(PTX())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(Kernels()) {
		t.Errorf("PTX has %d entries, Go launches %d kernels", len(entries), len(Kernels()))
	}
	for _, k := range Kernels() {
		if err := k.CheckAgainst(entries); err != nil {
			t.Error(err)
		}
		t.Logf("%s: %v", k.Name, k.ParamSizes())
	}
	if err := checkKernelSignatures(PTX()); err != nil {
		t.Error(err)
	}
}

func TestParsePTXEntries(t *testing.T) {
	const ptx = `
.version 7.0
.target sm_52
.visible .entry a(
	.param .u64 a_param_0,
	.param .u32 a_param_1,
	.param .align 8 .b8 a_param_2[24],
	.param .f32 a_param_3
)
{ ret; }
.entry b()
{ ret; }
`
	got, err := ParsePTXEntries(ptx)
	if err != nil {
		t.Fatal(err)
	}
	want := []PTXParam{{".u64", 8}, {".u32", 4}, {".b8", 24}, {".f32", 4}}
	if len(got["a"]) != len(want) {
		t.Fatalf("a: %v", got["a"])
	}
	for i := range want {
		if got["a"][i] != want[i] {
			t.Errorf("a param %d: %v, want %v", i, got["a"][i], want[i])
		}
	}
	if p, ok := got["b"]; !ok || len(p) != 0 {
		t.Errorf("b: %v %v", p, ok)
	}
	for _, bad := range []string{
		".entry x(\n.param .u128 p\n)",
		".entry x(\n.param .u32\n)",
		".entry x(\n.param .u32 p,\n",
		".entry (\n)",
		".entry x(\n.param .b8 p[zz]\n)",
		".entry x()\n{}\n.entry x()\n{}",
	} {
		if _, err := ParsePTXEntries(bad); err == nil {
			t.Errorf("ParsePTXEntries(%q): no error", bad)
		}
	}
	// A launcher that disagrees with the PTX is caught.
	k := Kernel{Name: "a", params: func() []Param { return []Param{PtrArg(0), PtrArg(0), Int32Arg(0), Int32Arg(0)} }}
	if err := k.CheckAgainst(got); err == nil || !strings.Contains(err.Error(), "argument 1") {
		t.Errorf("mismatch not caught: %v", err)
	}
}

// ptxas returns the PTX assembler named by $PACKER_PTXAS, found on $PATH, or put in the user
// cache by scripts/setup.sh (the newest there).
func ptxas(t *testing.T) string {
	if p := os.Getenv("PACKER_PTXAS"); p != "" {
		return p
	}
	p, err := exec.LookPath("ptxas")
	if err != nil {
		if dir, cerr := os.UserCacheDir(); cerr == nil {
			found, _ := filepath.Glob(filepath.Join(dir, "packer", "ptxas-*", "ptxas"))
			if len(found) > 0 {
				slices.SortFunc(found, func(a, b string) int {
					return cmpVersions(filepath.Base(filepath.Dir(a)), filepath.Base(filepath.Dir(b)))
				})
				return found[len(found)-1]
			}
		}
		t.Skip("ptxas not found: set PACKER_PTXAS or put it on PATH (pip install nvidia-cuda-nvcc-cu12 ships it in nvidia/cuda_nvcc/bin)")
	}
	return p
}

// TestPTXAssembles assembles the embedded PTX for current GPU architectures with NVIDIA's
// ptxas, as the driver's JIT will: it catches PTX that clang emits but the JIT rejects.
func TestPTXAssembles(t *testing.T) {
	bin := ptxas(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "resize.ptx")
	if err := os.WriteFile(in, []byte(PTX()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"sm_52", "sm_80", "sm_90"} {
		out := filepath.Join(dir, arch+".cubin")
		b, err := exec.Command(bin, "-arch="+arch, "-O3", "-v", in, "-o", out).CombinedOutput()
		if err != nil && arch == "sm_52" && bytes.Contains(b, []byte("is not defined for option 'gpu-name'")) {
			// CUDA 13's ptxas dropped Maxwell; the GPUs packer's cubins target must still assemble.
			t.Logf("ptxas -arch=%s: this ptxas (%s) no longer targets it; not checked", arch, bin)
			continue
		}
		if err != nil {
			t.Errorf("ptxas -arch=%s: %v\n%s", arch, err, b)
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "Used") || strings.Contains(line, "spill") {
				t.Logf("%s: %s", arch, strings.TrimSpace(line))
			}
		}
	}
}

// cmpVersions orders "ptxas-12.9.86"-style names by their numeric parts.
func cmpVersions(a, b string) int {
	pa := strings.Split(strings.TrimPrefix(a, "ptxas-"), ".")
	pb := strings.Split(strings.TrimPrefix(b, "ptxas-"), ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x - y
		}
	}
	return len(pa) - len(pb)
}

// TestCubinsUpToDate reassembles the checked-in PTX with ptxas (gpu/kernels/build-cubin.sh)
// and fails if the embedded cubins differ: they must be the machine code of the PTX.
//
// The cubins are ptxas's output, which changes with its version: they are compared only when
// the ptxas found is the version scripts/setup.sh pins (PTXAS_VERSION), the one that made them.
func TestCubinsUpToDate(t *testing.T) {
	bin := ptxas(t)
	if got, want := ptxasVersion(t, bin), pinnedPTXASVersion(t); got != want {
		t.Skipf("the cubins are what ptxas %s makes (scripts/setup.sh's PTXAS_VERSION); %s is version %s, whose machine code differs: set PACKER_PTXAS to a ptxas %s", want, bin, got, want)
	}
	dir := t.TempDir()
	cmd := exec.Command("kernels/build-cubin.sh", dir)
	cmd.Env = append(os.Environ(), "PACKER_PTXAS="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build-cubin.sh: %v\n%s", err, out)
	}
	for arch, embedded := range map[string][]byte{"sm80": resizeSM80, "sm90": resizeSM90} {
		got, err := os.ReadFile(filepath.Join(dir, "resize_"+arch+".cubin"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, embedded) {
			t.Errorf("gpu/kernels/resize_%s.cubin is not what %s makes of resize.ptx: run go generate ./gpu", arch, bin)
		}
	}
}

// ptxasVersion returns the release of a ptxas binary ("12.9.86"), from its --version output.
func ptxasVersion(t *testing.T, bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	m := regexp.MustCompile(`, V([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s --version: no version in %q", bin, out)
	}
	return string(m[1])
}

// pinnedPTXASVersion returns scripts/setup.sh's PTXAS_VERSION.
func pinnedPTXASVersion(t *testing.T) string {
	b, err := os.ReadFile("../scripts/setup.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PTXAS_VERSION=([0-9.]+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/setup.sh sets no PTXAS_VERSION")
	}
	return string(m[1])
}
