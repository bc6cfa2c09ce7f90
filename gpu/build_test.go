package gpu

import (
	"bytes"
	"image"
	"image/png"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestBuildDeviceGPUEqualsCPU builds the packer command and packs the same image folder
// with --device gpu and --device cpu: every output file, manifest included, must be
// byte-identical. It needs a GPU (and the go command); it skips otherwise.
func TestBuildDeviceGPUEqualsCPU(t *testing.T) {
	if info, err := Probe(); err != nil {
		skipNoGPU(t, "no CUDA device, skipping the end-to-end GPU build: %v", err)
	} else {
		t.Logf("device: %v", info)
	}
	if testing.Short() {
		t.Skip("-short: skipping the end-to-end build")
	}
	buildCompare(t, nil, "")
}

// TestBuildDeviceFakeGPUEqualsCPU is the same end-to-end comparison with the fake driver
// installed as libcuda.so.1 (through LD_LIBRARY_PATH), so the command's --device gpu wiring
// is tested on machines without a GPU. It skips while the command reports that GPU resizing
// is not available in its build.
func TestBuildDeviceFakeGPUEqualsCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the end-to-end build")
	}
	if _, err := Probe(); err == nil {
		t.Skip("a real CUDA driver is loaded: TestBuildDeviceGPUEqualsCPU covers it")
	}
	if _, err := fakeDriver(); err != nil {
		t.Skipf("fake CUDA driver unavailable: %v", err)
	}
	libDir := t.TempDir()
	if err := os.Symlink(filepath.Join(fakeDir, "libfakecuda.so.1"), filepath.Join(libDir, "libcuda.so.1")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "LD_LIBRARY_PATH="+libDir)
	buildCompare(t, env, fakeDeviceName)
}

// buildCompare builds cmd/packer and packs one image folder with --device gpu and --device
// cpu, requiring identical output trees. With wantDevice set, the gpu build's summary must
// name that device.
//
// PACKER_BIN names a packer binary built beforehand (from this same tree), used instead of
// building one: scripts/gpu-check.sh sets it on a GPU machine that has no Go toolchain.
func buildCompare(t *testing.T, env []string, wantDevice string) {
	dir := t.TempDir()
	bin := os.Getenv("PACKER_BIN")
	if bin == "" {
		goBin, err := exec.LookPath("go")
		if err != nil {
			skipNoGPU(t, "go command not found and PACKER_BIN not set: %v", err)
		}
		bin = filepath.Join(dir, "packer")
		if b, err := exec.Command(goBin, "build", "-o", bin, "../cmd/packer").CombinedOutput(); err != nil {
			t.Fatalf("go build ../cmd/packer: %v\n%s", err, b)
		}
	}

	// Source: two classes of random PNGs of assorted sizes, plus wallpapers when installed.
	src := filepath.Join(dir, "src")
	r := rand.New(rand.NewPCG(8, 8))
	for c, class := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(src, class), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 12; i++ {
			w, h := 40+r.IntN(700), 40+r.IntN(700)
			im := image.NewNRGBA(image.Rect(0, 0, w, h))
			for p := range im.Pix {
				im.Pix[p] = byte(r.IntN(256))
			}
			for p := 3; p < len(im.Pix); p += 4 {
				im.Pix[p] = 255
			}
			var buf bytes.Buffer
			if err := png.Encode(&buf, im); err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(src, class, string(rune('a'+i))+".png")
			if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		paths, _ := filepath.Glob("/usr/share/backgrounds/*.jpg")
		for i, p := range paths {
			if i%2 != c || i >= 4 {
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, class, filepath.Base(p)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	args := []string{"--resize", "256", "--crop", "224", "--workers", "2"}
	for _, extra := range [][]string{
		nil,
		{"--filter", "lanczos", "--layout", "chw", "--dtype", "float16", "--mean", "0.485,0.456,0.406", "--std", "0.229,0.224,0.225"},
	} {
		outs := map[string]string{}
		for _, dev := range []string{"gpu", "cpu"} { // gpu first: skip early while unwired
			out := filepath.Join(dir, "out-"+dev)
			os.RemoveAll(out)
			cmd := exec.Command(bin, append(append([]string{"build", src, "-o", out, "--device", dev}, args...), extra...)...)
			cmd.Env = env
			b, err := cmd.CombinedOutput()
			if err != nil {
				if dev == "gpu" && bytes.Contains(b, []byte("not available in this build")) {
					t.Skipf("cmd/packer does not wire --device gpu yet: %s", bytes.TrimSpace(b))
				}
				t.Fatalf("packer build --device %s: %v\n%s", dev, err, b)
			}
			t.Logf("--device %s %v: %s", dev, extra, bytes.TrimSpace(b))
			if dev == "gpu" && wantDevice != "" && !bytes.Contains(b, []byte(wantDevice)) {
				t.Fatalf("the --device gpu build does not name %q in its summary:\n%s", wantDevice, b)
			}
			outs[dev] = out
		}
		compareTrees(t, outs["cpu"], outs["gpu"])
	}
}

// compareTrees requires two directories to hold the same files with the same bytes.
func compareTrees(t *testing.T, a, b string) {
	t.Helper()
	files := func(root string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			m[rel], err = os.ReadFile(p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	fa, fb := files(a), files(b)
	if len(fa) != len(fb) {
		t.Errorf("cpu build has %d files, gpu build %d", len(fa), len(fb))
	}
	for name, da := range fa {
		db, ok := fb[name]
		switch {
		case !ok:
			t.Errorf("%s: missing from the gpu build", name)
		case !bytes.Equal(da, db):
			t.Errorf("%s: differs between the cpu and gpu builds (at byte %d)", name, firstDiff(da, db))
		}
	}
}
