package npy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/packer-dev/packer/output/npy"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/cifar"
	"github.com/packer-dev/packer/source/idx"
)

// TestBuildCIFAR100 packs a CIFAR-100 file with one bad label through the whole pipeline into
// npy, and checks the files against the source bytes, the manifest, Check and NumPy.
func TestBuildCIFAR100(t *testing.T) {
	dir := t.TempDir()
	recs := cifar.TestRecords(cifar.Kind100, 9, 3)
	recs[4].Label = 250 // a bad input: skipped and listed
	if err := cifar.WriteBinary(filepath.Join(dir, "train.bin"), cifar.Kind100, recs); err != nil {
		t.Fatal(err)
	}
	src, err := cifar.Open(dir, cifar.Kind100, "train")
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, workers := range []int{1, 3} {
		out := filepath.Join(t.TempDir(), "out")
		sum, err := pipeline.Build(context.Background(), pipeline.Options{
			Source: src, Output: npy.Entry, Out: out, Workers: workers,
		})
		if err != nil {
			t.Fatal(err)
		}
		m := sum.Manifest
		if m.Count != 8 || len(m.Skipped) != 1 || m.Skipped[0].Input != "train.bin#4" || !strings.Contains(m.Skipped[0].Reason, "label out of range: 250") {
			t.Fatalf("count %d skipped %+v", m.Count, m.Skipped)
		}
		t.Logf("skipped: %+v", m.Skipped[0])
		if errs := npy.Check(out, m); len(errs) > 0 {
			t.Fatalf("Check: %v", errs)
		}
		d, err := shard.OpenDataset(out)
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.Shard(0)
		if err != nil {
			t.Fatal(err)
		}
		j := 0
		for i, rec := range recs {
			if i == 4 {
				continue
			}
			got, err := r.Record(j)
			want := make([]byte, cifar.ImageSize)
			cifar.ToHWC(want, rec.Pixels)
			if err != nil || !bytes.Equal(got, want) || r.Label(j) != int64(rec.Label) || r.Aux(j)[0] != int64(rec.Coarse) {
				t.Fatalf("record %d (source %d) differs: %v", j, i, err)
			}
			j++
		}
		d.Close()
		var all []string
		for _, fe := range m.Files {
			all = append(all, fe.Path+"="+fe.SHA256)
		}
		mb, _ := os.ReadFile(filepath.Join(out, shard.ManifestName))
		all = append(all, hex.EncodeToString(sha256Sum(mb)))
		sums = append(sums, strings.Join(all, " "))
		if _, err := exec.LookPath("/usr/bin/python3"); err == nil {
			script := `import numpy, sys; a = numpy.load(sys.argv[1] + "/images.npy", mmap_mode="r"); l = numpy.load(sys.argv[1] + "/labels.npy", mmap_mode="r"); c = numpy.load(sys.argv[1] + "/aux_coarse_label.npy", mmap_mode="r"); print(a.shape, a.dtype, l.tolist(), c.tolist())`
			outb, err := exec.Command("/usr/bin/python3", "-c", script, out).CombinedOutput()
			if err == nil || !strings.Contains(string(outb), "No module named") {
				if err != nil {
					t.Fatalf("numpy: %v\n%s", err, outb)
				}
				var labels, coarse []string
				for i, rec := range recs {
					if i != 4 {
						labels = append(labels, strconv.Itoa(int(rec.Label)))
						coarse = append(coarse, strconv.Itoa(int(rec.Coarse)))
					}
				}
				want := "(8, 32, 32, 3) uint8 [" + strings.Join(labels, ", ") + "] [" + strings.Join(coarse, ", ") + "]"
				if got := strings.TrimSpace(string(outb)); got != want {
					t.Fatalf("numpy sees %s, want %s", got, want)
				}
			}
		}
	}
	if sums[0] != sums[1] {
		t.Fatalf("workers 1 and 3 differ:\n%s\n%s", sums[0], sums[1])
	}
}

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// TestBuildFashionMNIST packs Debian's Fashion-MNIST test split into npy and compares every
// byte with the source.
func TestBuildFashionMNIST(t *testing.T) {
	const dir = "/usr/share/datasets/fashion-mnist"
	if _, err := os.Stat(filepath.Join(dir, "t10k-images-idx3-ubyte.gz")); err != nil {
		t.Skipf("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist): %v", err)
	}
	src, err := idx.Open(dir, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	sum, err := pipeline.Build(context.Background(), pipeline.Options{Source: src, Output: npy.Entry, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	m := sum.Manifest
	if m.Count != 10000 || len(m.Skipped) != 0 || m.Classes[0] != "T-shirt/top" || len(m.Sample.Shape) != 3 || m.Sample.Shape[0] != 28 || m.Sample.Shape[2] != 1 {
		t.Fatalf("manifest: count %d classes %v sample %+v", m.Count, m.Classes, m.Sample)
	}
	if errs := npy.Check(out, m); len(errs) > 0 {
		t.Fatalf("Check: %v", errs)
	}
	images, err := os.ReadFile(filepath.Join(out, npy.ImagesFile))
	if err != nil {
		t.Fatal(err)
	}
	var src784 []byte
	if err := src.Enumerate(context.Background(), func(it source.Item) error {
		src784 = append(src784, it.Raw...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(images, src784) || len(images) != 128+len(src784) {
		t.Fatalf("images.npy (%d bytes) does not hold the source pixels (%d bytes)", len(images), len(src784))
	}
}
