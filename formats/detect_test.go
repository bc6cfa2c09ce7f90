package formats

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/formats/cifar"
	"github.com/packer-dev/packer/formats/idx"
)

func TestDetect(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, data []byte) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dir := func(rel string) string { return filepath.Join(root, rel) }

	c10, err := cifar.WriteTestDataset(dir("c10"), cifar.Kind10, 1)
	if err != nil {
		t.Fatal(err)
	}
	c100, err := cifar.WriteTestDataset(dir("c100"), cifar.Kind100, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := cifar.WriteTestArchive(dir("c10.tar.gz"), cifar.Kind10, 1); err != nil {
		t.Fatal(err)
	}
	if err := cifar.WriteTestArchive(dir("archive.tgz"), cifar.Kind100, 1); err != nil {
		t.Fatal(err)
	}
	rec10, _ := cifar.AppendRecord(nil, cifar.Kind10, cifar.TestRecords(cifar.Kind10, 1, 0)[0])
	rec100, _ := cifar.AppendRecord(nil, cifar.Kind100, cifar.TestRecords(cifar.Kind100, 1, 0)[0])
	mk("odd/mine10.bin", rec10)
	mk("odd/mine100.bin", rec100)
	if err := os.MkdirAll(dir("mnist"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(dir("mnist/t10k-images-idx3-ubyte.gz"), idx.TypeUbyte, []int{1, 2, 2}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(dir("odd/digits.gz"), idx.TypeUbyte, []int{1, 2, 2}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(dir("odd/digits.raw"), idx.TypeUbyte, []int{1, 2, 2}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	mk("imgs/cat/1.jpg", []byte("x"))
	mk("imgs/dog/2.PNG", []byte("x"))
	mk("imgs/.DS_Store", []byte("x"))
	mk("vids/run/a.mp4", []byte("x"))
	mk("frames/run/vid1/0001.jpg", []byte("x"))
	mk("lists/train.csv", []byte("path,label\n"))
	mk("lists/train.jsonl", []byte("{}\n"))
	mk("clip.MKV", []byte("x"))
	mk("mixed/data_batch_1.bin", rec10)
	mk("mixed/train-images-idx3-ubyte", []byte{0, 0, 8, 3})
	mk("empty/readme.txt", []byte("hello"))
	mk("odd/noise.bin", []byte("not cifar"))

	cases := []struct{ path, want string }{
		{c10, KindCIFAR10}, {dir("c10"), KindCIFAR10}, {c100, KindCIFAR100}, {dir("c100"), KindCIFAR100},
		{dir("c10.tar.gz"), KindCIFAR10}, {dir("archive.tgz"), KindCIFAR100},
		{filepath.Join(c10, "data_batch_3.bin"), KindCIFAR10}, {filepath.Join(c100, "test.bin"), KindCIFAR100},
		{dir("odd/mine10.bin"), KindCIFAR10}, {dir("odd/mine100.bin"), KindCIFAR100},
		{dir("mnist"), KindIDX}, {dir("mnist/t10k-images-idx3-ubyte.gz"), KindIDX},
		{dir("odd/digits.gz"), KindIDX}, {dir("odd/digits.raw"), KindIDX},
		{dir("imgs"), KindFolder}, {dir("vids"), KindVideo}, {dir("frames"), KindFrames},
		{dir("lists/train.csv"), KindList}, {dir("lists/train.jsonl"), KindList}, {dir("clip.MKV"), KindVideo},
	}
	if _, err := os.Stat("/usr/share/datasets/fashion-mnist"); err == nil {
		cases = append(cases, struct{ path, want string }{"/usr/share/datasets/fashion-mnist", KindIDX})
	}
	for _, tc := range cases {
		got, err := Detect(tc.path)
		if err != nil || got != tc.want {
			t.Errorf("Detect(%s) = %q, %v; want %q", strings.TrimPrefix(tc.path, root), got, err, tc.want)
		}
	}
	for _, tc := range []struct{ path, want string }{
		{dir("mixed"), "it looks like cifar10 and idx"},
		{dir("empty"), "looked for CIFAR-10 (data_batch_1.bin"},
		{dir("odd/noise.bin"), "looked for"},
		{dir("lists"), "looked for"},
	} {
		_, err := Detect(tc.path)
		if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Detect(%s): %v, want ErrUnknown with %q", strings.TrimPrefix(tc.path, root), err, tc.want)
		}
	}
	if _, err := Detect(dir("missing")); err == nil || errors.Is(err, ErrUnknown) {
		t.Errorf("missing path: %v", err)
	}
}
