package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source/cifar"
	"github.com/packer-dev/packer/verify"
)

// run executes packer in-process with buffer streams and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newRootCommand(&iostreams{Out: &out, Err: &errb})
	cmd.SetArgs(args)
	ctx := context.Background()
	err := cmd.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(&errb, "packer:", err)
	}
	return out.String(), errb.String(), exitCode(ctx, err)
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := run(t, args...)
	if code != 0 {
		t.Fatalf("packer %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// cifarHWC returns the records of a synthetic CIFAR file in HWC order, as packer writes them.
func cifarHWC(recs []cifar.Record) [][]byte {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		b := make([]byte, 3072)
		for p := 0; p < 1024; p++ {
			for c := 0; c < 3; c++ {
				b[p*3+c] = r.Pixels[c*1024+p]
			}
		}
		out[i] = b
	}
	return out
}

// readShards returns every record and label of a shard dataset, through the shard reader.
func readShards(t *testing.T, dir string) ([][]byte, []int64, []int64) {
	t.Helper()
	m, err := shard.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	var labels, aux []int64
	for _, f := range m.Files {
		r, err := shard.Open(filepath.Join(dir, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < r.Len(); i++ {
			b, err := r.Record(i)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, append([]byte(nil), b...))
			labels = append(labels, r.Label(i))
			if a := r.Aux(i); len(a) > 0 {
				aux = append(aux, a[0])
			}
		}
		r.Close()
	}
	if int64(len(recs)) != m.Count {
		t.Fatalf("read %d records, manifest count %d", len(recs), m.Count)
	}
	return recs, labels, aux
}

func TestBuildCIFARRoundTrip(t *testing.T) {
	for _, kind := range []string{"cifar10", "cifar100"} {
		t.Run(kind, func(t *testing.T) {
			tmp := t.TempDir()
			recs := cifar.TestRecords(kind, 300, 7)
			name := "data.bin"
			path := filepath.Join(tmp, name)
			if err := cifar.WriteBinary(path, kind, recs); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(tmp, "out")
			mustRun(t, "build", path, "--from", kind, "-o", out, "--shard-size", "100KiB", "--workers", "3")
			mustRun(t, "verify", out)
			got, labels, aux := readShards(t, out)
			want := cifarHWC(recs)
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("record %d differs from the source", i)
				}
				if labels[i] != int64(recs[i].Label) {
					t.Fatalf("record %d: label %d, want %d", i, labels[i], recs[i].Label)
				}
				if kind == "cifar100" && aux[i] != int64(recs[i].Coarse) {
					t.Fatalf("record %d: coarse %d, want %d", i, aux[i], recs[i].Coarse)
				}
			}
			m, _ := shard.ReadManifest(out)
			if len(m.Files) < 2 {
				t.Fatalf("--shard-size 100KiB gave %d shards for %d bytes", len(m.Files), len(recs)*3072)
			}
			// CHW keeps the native planes.
			outCHW := filepath.Join(tmp, "chw")
			mustRun(t, "build", path, "--from", kind, "-o", outCHW, "--layout", "chw")
			got, _, _ = readShards(t, outCHW)
			for i := range recs {
				if !bytes.Equal(got[i], recs[i].Pixels) {
					t.Fatalf("chw record %d differs from the source planes", i)
				}
			}
		})
	}
}

func TestBuildDeterministicAcrossWorkers(t *testing.T) {
	tmp := t.TempDir()
	src, err := cifar.WriteTestDataset(tmp, "cifar10", 200)
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, w := range []string{"1", "2", "7"} {
		out := filepath.Join(tmp, "out"+w)
		mustRun(t, "build", src, "-o", out, "--workers", w, "--shard-size", "1MiB")
		man, err := os.ReadFile(filepath.Join(out, shard.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, string(man))
	}
	for i := 1; i < len(sums); i++ {
		if sums[i] != sums[0] {
			t.Fatalf("manifest (with every file's SHA-256) differs between worker counts:\n%s\n---\n%s", sums[0], sums[i])
		}
	}
}

func TestBuildRefusesExistingOutput(t *testing.T) {
	tmp := t.TempDir()
	path := filepath.Join(tmp, "data.bin")
	if err := cifar.WriteBinary(path, "cifar10", cifar.TestRecords("cifar10", 10, 1)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out")
	mustRun(t, "build", path, "--from", "cifar10", "-o", out)
	if _, errs, code := run(t, "build", path, "--from", "cifar10", "-o", out); code != exitUsage || !strings.Contains(errs, "--force") {
		t.Fatalf("second build into %s: exit %d, stderr %q; want exit %d mentioning --force", out, code, errs, exitUsage)
	}
	mustRun(t, "build", path, "--from", "cifar10", "-o", out, "--force", "--layout", "chw")
	m, err := shard.ReadManifest(out)
	if err != nil || m.Sample.Layout != "chw" {
		t.Fatalf("--force did not replace the output: %v %+v", err, m)
	}
	if _, err := os.Stat(out + ".packer-partial"); !os.IsNotExist(err) {
		t.Fatalf("staging directory left behind: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"build"},
		{"build", "x"},
		{"build", "x", "-o", "y", "--format", "zip"},
		{"build", "x", "-o", "y", "--crop", "0"},
		{"build", "x", "-o", "y", "--workers", "0"},
		{"build", "x", "-o", "y", "--nosuchflag"},
		{"verify"},
	} {
		if _, _, code := run(t, args...); code != exitUsage {
			t.Errorf("packer %v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// damage is one way of breaking a dataset, and what verify must then report.
type damage struct {
	name  string
	apply func(t *testing.T, dir string, m *shard.Manifest)
	kind  string // a fault of this kind must be reported
}

func TestVerifyDamageTable(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "data.bin")
	if err := cifar.WriteBinary(src, "cifar10", cifar.TestRecords("cifar10", 500, 3)); err != nil {
		t.Fatal(err)
	}
	clean := filepath.Join(tmp, "clean")
	mustRun(t, "build", src, "--from", "cifar10", "-o", clean, "--shard-size", "600KiB")
	table := []damage{
		{"truncated shard", func(t *testing.T, dir string, m *shard.Manifest) {
			p := filepath.Join(dir, m.Files[0].Path)
			if err := os.Truncate(p, m.Files[0].Size-5000); err != nil {
				t.Fatal(err)
			}
		}, verify.KindSize},
		{"deleted shard", func(t *testing.T, dir string, m *shard.Manifest) {
			if err := os.Remove(filepath.Join(dir, m.Files[1].Path)); err != nil {
				t.Fatal(err)
			}
		}, verify.KindMissing},
		{"edited manifest count", func(t *testing.T, dir string, m *shard.Manifest) {
			editManifest(t, dir, func(m map[string]any) { m["count"] = 499 })
		}, verify.KindManifest},
		{"edited manifest sha256", func(t *testing.T, dir string, m *shard.Manifest) {
			editManifest(t, dir, func(m map[string]any) {
				f := m["files"].([]any)[0].(map[string]any)
				f["sha256"] = strings.Repeat("0", 64)
			})
		}, verify.KindSHA256},
		{"edited manifest classes", func(t *testing.T, dir string, m *shard.Manifest) {
			editManifest(t, dir, func(m map[string]any) { m["classes"].([]any)[0] = "aeroplane" })
		}, verify.KindManifest},
		{"deleted manifest", func(t *testing.T, dir string, m *shard.Manifest) {
			os.Remove(filepath.Join(dir, shard.ManifestName))
		}, verify.KindManifest},
	}
	for _, d := range table {
		t.Run(d.name, func(t *testing.T) {
			dir := copyDir(t, clean)
			m, _ := shard.ReadManifest(dir)
			d.apply(t, dir, m)
			rep, err := verify.Dir(context.Background(), dir, verify.Options{}, formatCheckers())
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || !hasKind(rep, d.kind) {
				t.Fatalf("verify after %s: ok=%v faults %v; want a %q fault", d.name, rep.OK, rep.Faults, d.kind)
			}
			if _, _, code := run(t, "verify", dir); code != exitCorrupt {
				t.Fatalf("packer verify exit %d, want %d", code, exitCorrupt)
			}
		})
	}
}

// TestVerifyExtraFile: packer verify reports a file the manifest does not list as a warning
// naming it and exits 0; with --strict it is a fault and the exit status is 3. A missing
// listed file still fails without --strict.
func TestVerifyExtraFile(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "data.bin")
	if err := cifar.WriteBinary(src, "cifar10", cifar.TestRecords("cifar10", 300, 3)); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"shards", "npy"} {
		t.Run(format, func(t *testing.T) {
			dir := filepath.Join(tmp, format)
			mustRun(t, "build", src, "--from", "cifar10", "-o", dir, "--format", format, "--shard-size", "400KiB")
			if err := os.WriteFile(filepath.Join(dir, "shard-00099.pks"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _, code := run(t, "verify", dir)
			if code != 0 || !strings.Contains(out, "warning: shard-00099.pks: extra:") || !strings.Contains(out, "ok: ") {
				t.Fatalf("verify with an extra file: exit %d, output:\n%s", code, out)
			}
			out, _, code = run(t, "verify", "--json", dir)
			var rep verify.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || !rep.OK || len(rep.Warnings) != 1 || rep.Warnings[0].File != "shard-00099.pks" {
				t.Fatalf("verify --json: exit %d, %v, %s", code, err, out)
			}
			out, _, code = run(t, "verify", "--strict", dir)
			if code != exitCorrupt || !strings.Contains(out, "shard-00099.pks: extra:") || !strings.Contains(out, "CORRUPT") {
				t.Fatalf("verify --strict: exit %d, want %d; output:\n%s", code, exitCorrupt, out)
			}
			m, err := shard.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(dir, m.Files[0].Path)); err != nil {
				t.Fatal(err)
			}
			if out, _, code = run(t, "verify", dir); code != exitCorrupt || !strings.Contains(out, "missing") {
				t.Fatalf("verify with a missing file: exit %d, want %d; output:\n%s", code, exitCorrupt, out)
			}
		})
	}
}

func hasKind(rep *verify.Report, kind string) bool {
	for _, f := range rep.Faults {
		if f.Kind == kind {
			return true
		}
	}
	return false
}

// TestVerifyBitFlips flips single bits at random positions of every data file (fixed seed) and
// requires verify to report each, in the right file and, for shard record data, the right
// record range.
func TestVerifyBitFlips(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "data.bin")
	if err := cifar.WriteBinary(src, "cifar10", cifar.TestRecords("cifar10", 700, 5)); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"shards", "npy", "hdf5"} {
		t.Run(format, func(t *testing.T) {
			clean := filepath.Join(tmp, format)
			mustRun(t, "build", src, "--from", "cifar10", "-o", clean, "--format", format, "--shard-size", "700KiB")
			m, err := shard.ReadManifest(clean)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 1))
			flips := 300
			if testing.Short() {
				flips = 60
			}
			for n := 0; n < flips; n++ {
				fi := rng.IntN(len(m.Files))
				fe := m.Files[fi]
				path := filepath.Join(clean, fe.Path)
				off := rng.Int64N(fe.Size)
				bit := byte(1) << rng.IntN(8)
				flip(t, path, off, bit)
				rep, err := verify.Dir(context.Background(), clean, verify.Options{}, formatCheckers())
				flip(t, path, off, bit) // restore
				if err != nil {
					t.Fatal(err)
				}
				if rep.OK {
					t.Fatalf("flip of bit %#x at %s offset %d not detected", bit, fe.Path, off)
				}
				for _, f := range rep.Faults {
					if f.File != fe.Path && f.File != shard.ManifestName {
						t.Fatalf("flip in %s at %d reported in %s: %v", fe.Path, off, f.File, f)
					}
				}
				if format == "shards" {
					checkLocated(t, clean, fe, off, rep)
				}
			}
		})
	}
}

// checkLocated requires a flip inside a shard's record data to be reported with a record range
// that holds the flipped record.
func checkLocated(t *testing.T, dir string, fe shard.FileEntry, off int64, rep *verify.Report) {
	t.Helper()
	r, err := shard.Open(filepath.Join(dir, fe.Path))
	if err != nil {
		return // the flip broke the header, footer or index: not in record data
	}
	defer r.Close()
	start, size := r.DataOffset(), r.DataSize()
	if off < start || off >= start+size {
		return
	}
	rec := (off - start) / r.RecordSize()
	for _, f := range rep.Faults {
		if f.File == fe.Path && f.Kind == verify.KindChecksum && f.ShardFirst <= rec && rec < f.ShardFirst+f.Count {
			return
		}
	}
	t.Fatalf("flip in %s record %d (offset %d) not located: %v", fe.Path, rec, off, rep.Faults)
}

func flip(t *testing.T, path string, off int64, bit byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= bit
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func editManifest(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, shard.ManifestName)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "manifest_sha256")
	edit(m)
	data, _ = json.MarshalIndent(m, "", "  ")
	// resealed, so the cross-checks of verify are under test, not the manifest's checksum
	data, err = shard.SealManifest(append(data, '\n'))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestInterruptedBuild kills a real packer process in the middle of a build and requires that
// nothing it leaves looks complete: OUT does not exist, and verify and the reader reject it.
func TestInterruptedBuild(t *testing.T) {
	bin := buildBinary(t)
	tmp := t.TempDir()
	src, err := cifar.WriteTestDataset(tmp, "cifar10", 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			out := filepath.Join(tmp, "out-"+strings.ReplaceAll(sig.String(), " ", ""))
			// A small shard size and one worker make the build slow enough to interrupt.
			cmd := exec.Command(bin, "build", src, "-o", out, "--shard-size", "64KiB", "--workers", "1", "--layout", "chw")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until shards are being written into the staging directory.
			deadline := time.Now().Add(60 * time.Second)
			for {
				ents, _ := os.ReadDir(out + ".packer-partial")
				if len(ents) >= 3 || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			// Stopped (every thread), or ended, the build is where the staging folder shows
			// it: one whose staging folder is gone has published OUT (the test was descheduled
			// for the rest of the build), and the signal would come after the end it tests.
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			waitStopped(t, cmd.Process.Pid)
			published := !exists(out + ".packer-partial")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil && sig != syscall.SIGKILL {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if published {
				t.Skipf("build finished before it could be stopped; nothing to check (exit: %v)", err)
			}
			if err == nil {
				t.Skipf("build finished before the %v arrived; nothing to check", sig)
			}
			if sig == syscall.SIGINT {
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
					t.Fatalf("SIGINT: %v, want exit %d; stderr %s", err, exitInterrupted, stderr.String())
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("an interrupted build left %s behind (%v)", out, err)
			}
			for _, dir := range []string{out, out + ".packer-partial"} {
				rep, err := verify.Dir(context.Background(), dir, verify.Options{}, formatCheckers())
				if err != nil {
					t.Fatal(err)
				}
				if rep.OK {
					t.Fatalf("verify accepts the interrupted build in %s", dir)
				}
				if _, err := shard.ReadManifest(dir); err == nil {
					t.Fatalf("the reader finds a manifest in %s", dir)
				}
			}
		})
	}
}

// TestBuildFashionMNISTRoundTrip packs the real Fashion-MNIST test split (Debian's
// dataset-fashion-mnist) to shards and npy and reads both back with the Go readers, comparing
// every pixel and label with the gunzipped IDX files.
func TestBuildFashionMNISTRoundTrip(t *testing.T) {
	const dir = "/usr/share/datasets/fashion-mnist"
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("PACKER_NO_FASHION_MNIST") == "1" {
			t.Skipf("PACKER_NO_FASHION_MNIST=1 and %s is missing", dir)
		}
		t.Fatalf("%s is missing: scripts/setup.sh installs dataset-fashion-mnist (%v)", dir, err)
	}
	gunzip := func(name string) []byte {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pixels := gunzip("t10k-images-idx3-ubyte.gz")[16:]
	labels := gunzip("t10k-labels-idx1-ubyte.gz")[8:]
	tmp := t.TempDir()
	out := filepath.Join(tmp, "shards")
	mustRun(t, "build", dir, "-o", out, "--split", "test", "--shard-size", "2MiB")
	recs, got, _ := readShards(t, out)
	if len(recs) != 10000 {
		t.Fatalf("%d records, want 10000", len(recs))
	}
	for i, r := range recs {
		if !bytes.Equal(r, pixels[i*784:(i+1)*784]) || got[i] != int64(labels[i]) {
			t.Fatalf("record %d differs from the IDX source", i)
		}
	}
	outNpy := filepath.Join(tmp, "npy")
	mustRun(t, "build", dir, "-o", outNpy, "--split", "test", "--format", "npy")
	ds, err := openAny(outNpy)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for i := int64(0); i < ds.Len(); i += 97 {
		r, err := ds.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		ri, err := ds.Info(i)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r, pixels[i*784:(i+1)*784]) || ri.Label != int64(labels[i]) {
			t.Fatalf("npy record %d differs from the IDX source", i)
		}
	}
	m, _ := shard.ReadManifest(out)
	if m.Classes[0] != "T-shirt/top" || m.Sample.Shape[2] != 1 {
		t.Fatalf("classes %v, shape %v", m.Classes, m.Sample.Shape)
	}
}
